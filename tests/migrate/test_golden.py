"""Golden: the real legacy capture (``fixtures/corpus/legacy_xml_sse_capture.txt``).

``fixtures/legacy/`` holds what the migration must give, written by
``fixtures/legacy/regenerate.py`` and checked by hand against the capture. This test
compares byte for byte, then checks the migration against an independent reading of
the capture (the corpus README's split rule and plain string searches), so a wrong
golden file cannot pass on its own.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from envelope import XmlMigrator, reconstruct
from validating import assert_valid

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "legacy"
AGENT = "dbe25a6e-0493-4c70-9a0b-e906c03584b5"


@pytest.fixture(scope="module")
def capture(corpus: Path) -> bytes:
    return (corpus / "legacy_xml_sse_capture.txt").read_bytes()


@pytest.fixture(scope="module")
def migrated(capture: bytes) -> tuple[list[bytes], list[str]]:
    migrator = XmlMigrator()
    lines = migrator.feed(capture) + migrator.close()
    return lines, [str(w) for w in migrator.warnings]


def _blocks(lines: list[bytes]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = reconstruct(lines).to_dict()["agents"][AGENT]["blocks"]
    return blocks


def test_capture_matches_golden_files(migrated: tuple[list[bytes], list[str]]) -> None:
    lines, warnings = migrated
    assert_valid(lines)
    assert b"".join(line + b"\n" for line in lines) == (GOLDEN / "envelopes.jsonl").read_bytes()
    assert reconstruct(lines).to_dict() == json.loads((GOLDEN / "blocks.json").read_text(encoding="utf-8"))
    assert "".join(f"{w}\n" for w in warnings) == (GOLDEN / "warnings.txt").read_text(encoding="utf-8")


def test_capture_lines_respect_the_bound(migrated: tuple[list[bytes], list[str]]) -> None:
    lines, _ = migrated
    assert lines[-1] == b"[DONE]"
    assert max(len(line) for line in lines) <= 2048


def test_capture_does_not_depend_on_read_size(capture: bytes, migrated: tuple[list[bytes], list[str]]) -> None:
    for size in (1, 7, 8, 9, 4096):
        migrator = XmlMigrator()
        lines: list[bytes] = []
        for at in range(0, len(capture), size):
            lines += migrator.feed(capture[at : at + size])
        lines += migrator.close()
        assert reconstruct(lines).to_dict() == reconstruct(migrated[0]).to_dict(), size


def test_capture_against_an_independent_reading(capture: bytes, migrated: tuple[list[bytes], list[str]]) -> None:
    # The corpus README's rule: drop the leading `data: ` and the final blank line,
    # split on LF LF `data: `: 145 chunks and `[DONE]`.
    text = capture.decode("utf-8")
    assert text.startswith("data: ")
    assert text.endswith("\n\n")
    records = text[len("data: ") : -2].split("\n\ndata: ")
    assert len(records) == 146
    assert records[-1] == "[DONE]"
    tags = "".join(records[:-1])
    assert len(tags) == 12_662
    blocks = _blocks(migrated[0])

    # Streamed bodies: the text between each open and close tag, verbatim.
    bodies = re.findall(r"<content-block-(thinking|text)>(.*?)</content-block-\1>", tags, re.S)
    streamed = [(b["type"], b["content"]) for b in blocks if b["type"] in ("thinking", "text")]
    assert streamed == bodies
    assert [b["type"] for b in blocks].count("text") == 4

    # Older labels: every tool_call with a srvtoolu_ id and every result named *_tool_result.
    calls = re.findall(r'<content-block-tool_call id="([^"]+)" name="([^"]+)" arguments="([^"]*)">', tags)
    results = re.findall(
        r'<content-block-tool_result id="([^"]+)" name="([^"]+)"><!\[CDATA\[(.*?)\]\]></content-block-tool_result>',
        tags,
        re.S,
    )
    assert len(calls) == len(results) == 6
    got_calls = [b for b in blocks if b["type"] == "server_tool_call"]
    got_results = [b for b in blocks if b["type"] == "server_tool_result"]
    assert [(b["id"], b["name"]) for b in got_calls] == [(i, n) for i, n, _ in calls]
    for block, (_, _, args) in zip(got_calls, calls, strict=True):
        unescaped = args.replace("&quot;", '"').replace("&#x27;", "'").replace("&lt;", "<").replace("&gt;", ">")
        assert block["input"] == json.loads(unescaped.replace("&amp;", "&"))
    # repr() text carried unchanged (it is itself a JSON string of the repr).
    assert [(b["id"], b["name"], b["content"]) for b in got_results] == results
    assert all(r[2].startswith('"Beta') for r in results)

    # meta_files: the pretty-printed JSON, raw line feeds and all.
    files = re.search(r"<content-block-meta_files><!\[CDATA\[(.*?)\]\]></content-block-meta_files>", tags, re.S)
    assert files is not None
    meta_files = [line for line in migrated[0] if b'"meta_files"' in line]
    assert "".join(json.loads(line)["delta"] for line in meta_files) == files.group(1)
    assert blocks[-1]["data"]["files"][0]["filename"] == "document_with_chart.docx"
    assert blocks[0]["data"]["agent_uuid"] == AGENT
    assert len(migrated[1]) == 12  # one note per mapped older label


def test_capture_with_labels_kept(capture: bytes) -> None:
    migrator = XmlMigrator(keep_labels=True)
    lines = migrator.feed(capture) + migrator.close()
    kinds = [b["type"] for b in _blocks(lines)]
    assert kinds.count("tool_call") == kinds.count("tool_result") == 6
    assert "server_tool_call" not in kinds
    assert migrator.warnings == []
