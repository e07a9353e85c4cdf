"""The resume-link docs for JS users say what ``js/envelope-client.d.mts`` declares (issue 39 §3).

``docs/javascript.md`` and ``js/README.md`` document ``run.link``, ``run.linkError``,
``run.streamUrl()``, ``run.refreshLink()`` and the ``clock`` option (spec server §RL2): every
``run.NAME`` they write is a member of the declared ``Run``, every link member is written on
both pages, and their ``js`` examples are JavaScript node can parse.
"""

from __future__ import annotations

import re
import subprocess
from typing import TYPE_CHECKING

import pytest

from doc_blocks import FENCE, ROOT
from js.js_support import tool

if TYPE_CHECKING:
    from pathlib import Path

PAGES = [ROOT / "docs" / "javascript.md", ROOT / "js" / "README.md"]
#: What a JS user of resume links meets: the members of ``Run`` and the option of ``ConnectOptions``.
LINK_MEMBERS = ("link", "linkError", "streamUrl", "refreshLink")


def _declared(kind: str) -> set[str]:
    """The member names of the declared ``class Run`` or ``interface ConnectOptions`` in envelope-client.d.mts."""
    text = (ROOT / "js" / "envelope-client.d.mts").read_text(encoding="utf-8")
    opener = {"Run": "export class Run ", "ConnectOptions": "export interface ConnectOptions "}[kind]
    body = text.split(opener, 1)[1].split("\n}\n", 1)[0]
    return set(re.findall(r"^  (?:readonly )?(\w+)\??[(:]", body, re.M))


def test_the_link_members_are_declared() -> None:
    """The names this test looks for are the declared ones (a rename in the .d.mts fails here first)."""
    assert set(LINK_MEMBERS) <= _declared("Run")
    assert "clock" in _declared("ConnectOptions")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_run_member_the_page_names_is_declared(page: Path) -> None:
    """Each ``run.NAME`` of the page is a member of ``Run`` in envelope-client.d.mts; each link member is named."""
    text = page.read_text(encoding="utf-8")
    named = set(re.findall(r"\brun\.(\w+)", text))
    assert named - _declared("Run") == set()
    assert {f"run.{m}" for m in LINK_MEMBERS if f"run.{m}" not in text} == set()
    assert "`clock`" in text or "`clock?: LinkClock`" in text
    assert "token_expired" in text
    assert "?token=" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_pages_js_examples_parse(page: Path, tmp_path: Path) -> None:
    """Every ``js`` block of the page is a module ``node --check`` accepts (they are read, not run: no browser)."""
    blocks = [code for kind, code in FENCE.findall(page.read_text(encoding="utf-8")) if kind == "js"]
    assert blocks
    node = tool("node")
    for number, code in enumerate(blocks):
        module = tmp_path / f"block{number}.mjs"
        module.write_text(code, encoding="utf-8")
        done = subprocess.run([node, "--check", str(module)], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, (number, done.stderr[-2000:])
