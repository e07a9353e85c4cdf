"""``envelope validate``: output formats, exit status, no traceback on any input."""

from __future__ import annotations

import io
import json
import sys
from typing import TYPE_CHECKING

import pytest

from envelope.cli import main

from ._streams import complete, env, jsonl, text

if TYPE_CHECKING:
    from pathlib import Path

GOOD = jsonl(*complete(*text("hi")))
BAD = jsonl(*complete(env("text", True, "oops")))
WARN = jsonl(*complete(*text("hi")))[: -len(b"[DONE]\n")]


def write(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_valid_file_exits_0_and_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", write(tmp_path, "ok.jsonl", GOOD)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "0 error(s), 0 warning(s) in 1 file" in err


def test_violation_is_printed_like_a_compiler(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "bad.jsonl", BAD)
    assert main(["validate", path]) == 1
    out, _ = capsys.readouterr()
    assert out.startswith(f"{path}:2:1: E121 final marker of a text block has a non-empty delta")


def test_warnings_pass_unless_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "cut.jsonl", WARN)
    assert main(["validate", path]) == 0
    assert main(["validate", "--strict", path]) == 1
    assert "W161" in capsys.readouterr().out


def test_json_output_one_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--format", "json", write(tmp_path, "bad.jsonl", BAD)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc == {
        "violations": [
            {
                "code": "E121",
                "severity": "error",
                "line": 2,
                "offset": len(complete()[0]) + 1,
                "agent": "agent-a",
                "type": "text",
                "message": "final marker of a text block has a non-empty delta (4 characters)",
            }
        ]
    }


def test_json_output_several_files_names_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path, "a.jsonl", BAD)
    b = write(tmp_path, "b.jsonl", WARN)
    c = write(tmp_path, "c.jsonl", GOOD)
    assert main(["validate", "--format", "json", a, b, c]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(v["file"], v["code"]) for v in doc["violations"]] == [(a, "E121"), (b, "W161")]


def test_json_output_with_no_violation_is_still_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--format", "json", write(tmp_path, "ok.jsonl", GOOD)]) == 0
    assert json.loads(capsys.readouterr().out) == {"violations": []}


def test_max_bytes_sets_the_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "ok.jsonl", GOOD)
    assert main(["validate", "--max-bytes", "150", path]) == 1
    assert "E107" in capsys.readouterr().out


def test_no_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """No file (and no --explain): one error line, exit 2."""
    assert main(["validate"]) == 2
    err = capsys.readouterr().err
    assert "no file given" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("args", [["validate", "--max-bytes", "0", "x"], ["validate", "--format", "xml", "x"]])
def test_bad_arguments_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_missing_file_and_directory_exit_2_and_others_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = write(tmp_path, "bad.jsonl", BAD)
    assert main(["validate", str(tmp_path / "nope.jsonl"), str(tmp_path), bad]) == 2
    out, err = capsys.readouterr()
    assert "nope.jsonl: error: No such file or directory" in err
    assert "E121" in out
    assert "Traceback" not in err


def test_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    class Stdin:
        buffer = io.BytesIO(BAD)

    monkeypatch.setattr(sys, "stdin", Stdin)
    assert main(["validate", "-"]) == 1
    assert capsys.readouterr().out.startswith("<stdin>:2:1: E121")


def test_garbage_bytes_are_violations_not_a_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "noise.bin", bytes(range(256)) * 4)
    assert main(["validate", path]) == 1
    out, err = capsys.readouterr()
    assert "E100" in out
    assert "Traceback" not in err


def test_unreadable_utf8_line_reports_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = b"data: " + complete()[0].encode() + b'\n\ndata: {"x\xff\n\n' + b"data: [DONE]\n\n"
    assert main(["validate", write(tmp_path, "c.sse", data)]) == 1
    out = capsys.readouterr().out
    assert ":3:10: E100 invalid UTF-8" in out
