"""The architecture page stays true: the modules and names it cites exist (issue 28 §5).

``docs/architecture.md`` maps every module of ``src/envelope`` and ``src/agent_ref``.
A module added, renamed or removed, or a cited class or function that is gone, fails
here, so the page is updated with the code.
"""

from __future__ import annotations

import re

import pytest

from doc_blocks import ROOT

PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
SRC = ROOT / "src"
#: The section of the page that maps each package, by its heading.
SECTIONS = {
    "envelope": "## The codec, `src/envelope/`",
    "envelope/delivery": "## Delivery, `src/envelope/delivery/`",
    "agent_ref": "## The agent, `src/agent_ref/`",
    **{
        f"agent_ref/{w}": f"## The {w} wing, `src/agent_ref/{w}/`"
        for w in ("run", "tools", "policy", "models", "store", "fleet", "server", "cli")
    },
    "agent_ref/tools/workspace": "## The workspace tools, `src/agent_ref/tools/workspace/`",
}
SOURCES = "\n".join(p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*.py"))) + (
    ROOT / "js" / "envelope-decoder.mjs"
).read_text(encoding="utf-8")


def _section(heading: str) -> str:
    start = PAGE.index(heading)
    end = PAGE.find("\n## ", start + len(heading))
    return PAGE[start : end if end != -1 else None]


@pytest.mark.parametrize("package", sorted(SECTIONS))
def test_every_module_is_mapped_and_every_mapped_module_exists(package: str) -> None:
    rows = re.findall(r"^\| `(\w+\.py)` \|", _section(SECTIONS[package]), re.M)
    modules = sorted(p.name for p in (SRC / package).glob("*.py") if p.name != "__init__.py")
    assert sorted(rows) == modules


def _cited() -> set[str]:
    return set(re.findall(r"`([\w.]+)`", PAGE))


def test_cited_classes_exist() -> None:
    """Every ``CamelCase`` name the page cites is defined in the code (a class, alias or constant) or imported."""
    names = {n for n in _cited() if re.fullmatch(r"_?[A-Z][a-z]\w*", n)}
    assert len(names) > 40, "the parse found the page's names"
    defined = {
        n
        for n in names
        if re.search(rf"^\s*(?:class {n}\b|{n}\s*[:=]|export class {n}\b|from [\w.]+ import .*\b{n}\b)", SOURCES, re.M)
    }
    assert sorted(names - defined) == []


def test_cited_functions_exist() -> None:
    """``module.function`` and ``Class.method`` citations name something defined there (or a subpackage)."""
    pairs = [n.split(".") for n in _cited() if re.fullmatch(r"[A-Za-z_]\w*\.[a-z]\w*", n) and not n.endswith(".py")]
    assert len(pairs) > 10, "the parse found the page's calls"
    missing = []
    for owner, name in pairs:
        if owner in ("envelope", "agent_ref"):  # a module of the package
            if not ((SRC / owner / f"{name}.py").is_file() or (SRC / owner / name / "__init__.py").is_file()):
                missing.append(f"{owner}.{name}")
            continue
        files = [
            SRC / pkg / f"{owner}.py" for pkg in ("envelope", "agent_ref") if (SRC / pkg / f"{owner}.py").is_file()
        ]
        text = "\n".join(f.read_text(encoding="utf-8") for f in files) if files else SOURCES
        if owner[0].isupper():
            text = SOURCES  # a method, wherever its class is
        if not re.search(rf"(?:def {name}\b|\b{name}\s*[(=:]|^\s*{name}\(|{name}\()", text, re.M):
            missing.append(f"{owner}.{name}")
    assert missing == []
