"""Hostile input the validator must judge with a code, never a foreign exception (issue 18 §2, §3).

Nesting depth ([6.7-a], code E116) and escaped lone surrogates ([6.4-a], code E117).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from envelope import StreamReader, StreamValidator, Validator, validate
from envelope._limits import MAX_NESTING_DEPTH
from envelope.cli import main

from ._streams import complete, env, jsonl, sse

if TYPE_CHECKING:
    from pathlib import Path

DEEP_CALL = [
    env("tool_call", False, "[" * 1000, id="t", name="f"),
    env("tool_call", True, "]" * 1000, id="t", name="f"),
]


def all_paths(lines: list[str]) -> list[list[tuple[str, int, int]]]:
    """The findings as (code, line, column) through every entry point: plain lines, a batch, bytes."""
    plain = [(v.code, v.line, v.column) for v in validate(lines)]
    checker = Validator()
    batch = checker.feed_many(StreamReader().feed_batch(jsonl(*lines))) + checker.close()
    results = [plain, [(v.code, v.line, v.column) for v in batch]]
    for data in (jsonl(*lines), sse(*lines)):
        stream = StreamValidator()
        found = stream.feed(data) + stream.close()
        results.append([(v.code, v.line if data.startswith(b"{") else (v.line + 1) // 2, v.column) for v in found])
    return results


def test_spec_06_7_deep_tool_call_payload_is_e116() -> None:
    """[6.7-a] issue 18 §2: two ~1 KB tool_call lines nesting 1000 deep are E116 at the block's line, not a RecursionError."""
    lines = complete(*DEEP_CALL)
    for found in all_paths(lines):
        assert [code for code, _, _ in found] == ["E116"]
        assert found[0][1] == 2


def test_spec_06_7_deep_line_is_e116_with_its_byte() -> None:
    """[6.7-a] a line whose own JSON nests too deep: E116 with the byte of the first bracket too many."""
    deep = '{"type":"text","agent":"é","final":true,"delta":"","x":' + "[" * 1000 + "]" * 1000 + "}"
    found = list(validate([deep]))
    assert [v.code for v in found] == ["E116", "W161"]
    at = len(deep[: deep.index("[") + MAX_NESTING_DEPTH - 1].encode())  # the object is level 1
    assert f"byte {at}" in found[0].message
    assert found[0].column == at + 1


@pytest.mark.parametrize(("depth", "codes"), [(MAX_NESTING_DEPTH, []), (MAX_NESTING_DEPTH + 1, ["E116"])])
def test_spec_06_7_the_limit_is_inclusive(depth: int, codes: list[str]) -> None:
    """[6.7-a] 256 levels are parsed; 257 are not."""
    payload = "[" * depth + "]" * depth
    lines = complete(env("tool_call", True, payload, id="t", name="f"))
    found = [v.code for v in validate(lines)]
    # a parsed array is not the arguments object the payload must be (E141)
    assert found == (codes or ["E141"])


def test_deep_error_payload_is_e116() -> None:
    lines = complete(env("error", True, json.dumps({"type": "x", "message": "m", "detail": [[[]]]})[:-1] + "[" * 999))
    assert [v.code for v in validate(lines)] == ["E116"]


def test_cli_reports_e116_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "deep.sse"
    path.write_bytes(sse(*complete(*DEEP_CALL)))
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "E116" in out
    assert "Traceback" not in out + err
