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
    assert f"(column {at + 1})" in found[0].message  # spec/cli.md C8-a: a column, from 1
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


LONE = '{"type":"text","agent":"agent-a","final":false,"delta":"x\\ud800y"}'


def test_spec_06_4_escaped_lone_surrogate_is_named_with_its_byte() -> None:
    """[6.4-a] issue 18 §3: not "ends inside a value" (E101) but E117, naming the escape and its byte."""
    for found in all_paths(complete(LONE, env("text", True, ""))):
        assert [code for code, _, _ in found] == ["E117"]
        assert found[0][1] == 2
    hit = next(iter(validate([LONE])))
    at = LONE.index("\\ud800")
    assert hit.code == "E117"
    assert f"\\ud800 at column {at + 1}:" in hit.message  # spec/cli.md C8-a
    assert hit.column == at + 1


@pytest.mark.parametrize(
    ("delta", "lone"),
    [("\\udc00", True), ("a\\ud800\\u0041", True), ("\\ud800", True), ("\\ud83d\\ude00", False), ("\\\\ud800", False)],
)
def test_lone_surrogate_escapes_high_low_and_escaped_backslash(delta: str, lone: bool) -> None:
    line = '{"type":"text","agent":"agent-a","final":false,"delta":"' + delta + '"}'
    codes = [v.code for v in validate(complete(line, env("text", True, "")))]
    assert codes == (["E117"] if lone else [])


def test_lone_surrogate_in_a_payload_is_e140_naming_it() -> None:
    lines = complete(
        env("tool_call", False, '{"q": "\\', id="t", name="f"), env("tool_call", True, 'ud800"}', id="t", name="f")
    )
    found = list(validate(lines))
    assert [v.code for v in found] == ["E140"]
    assert "escaped lone surrogate \\ud800 at character offset 7 (spec §6.4)" in found[0].message
