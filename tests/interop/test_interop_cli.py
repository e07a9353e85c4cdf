"""``envelope convert`` and ``envelope validate --from agui|vercel`` (issue 27 item 6, spec/interop.md §6)."""

from __future__ import annotations

import io
import json
import sys
import tracemalloc
from typing import TYPE_CHECKING

import pytest

from envelope import Emitter
from envelope.cli import main
from interop.cases import ROOT, errors, read_lines, transcript

if TYPE_CHECKING:
    from pathlib import Path

GOLDEN = ROOT / "fixtures" / "golden"
CASE = ROOT / "spec" / "conformance" / "valid" / "tools_multimodal.sse"


def _lines(path: Path) -> list[bytes]:
    return read_lines(path)


@pytest.mark.parametrize("other", ["agui", "vercel"])
@pytest.mark.parametrize("framing", ["sse", "jsonl"])
def test_convert_there_and_back(tmp_path: Path, other: str, framing: str) -> None:
    there, back = tmp_path / f"run.{framing}", tmp_path / "back.sse"
    assert errors(_lines(CASE)) == []
    assert (
        main(["convert", "--from", "envelope", "--to", other, "--output-format", framing, str(CASE), "-o", str(there)])
        == 0
    )
    assert main(["convert", "--from", other, "--to", "envelope", str(there), "-o", str(back)]) == 0
    assert transcript(_lines(back)) == transcript(_lines(CASE))
    # and between the two others, through envelopes
    third = "vercel" if other == "agui" else "agui"
    hop = tmp_path / "hop.sse"
    assert main(["convert", "--from", other, "--to", third, str(there), "-o", str(hop)]) == 0
    assert main(["convert", "--from", third, "--to", "envelope", str(hop), "-o", str(back)]) == 0
    assert transcript(_lines(back)) == transcript(_lines(CASE))


def test_convert_reports_a_coded_error_with_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}\n'
    )
    assert main(["convert", "--from", "agui", "--to", "envelope", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{bad}: error: I204 line 3: TEXT_MESSAGE_CONTENT for message 'm' that is not open"]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("data: {not json\n\n", "I201"),
        (
            'data: {"type":"start"}\n\ndata: {"type":"tool-approval-request","approvalId":"a","toolCallId":"c"}\n\n',
            "I203",
        ),
        ('data: {"type":"start"}\n\ndata: {"type":"text-delta","id":"x","delta":"d"}\n\n', "I204"),
        ('data: {"type":"start"}\n\ndata: {"type":"text-start"}\n\n', "I202"),
    ],
)
def test_bad_vercel_input_is_coded(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, code: str) -> None:
    bad = tmp_path / "bad.sse"
    bad.write_text(text)
    assert main(["convert", "--from", "vercel", "--to", "envelope", str(bad)]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(f"{bad}: error: {code} line ")


def test_unreadable_input_is_an_error_not_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    bad = ROOT / "spec" / "conformance" / "invalid" / "E100_bad_utf8.jsonl"
    assert main(["convert", "--from", "envelope", "--to", "agui", str(bad)]) == 2
    assert "invalid UTF-8" in capsys.readouterr().err
    assert main(["convert", "--from", "envelope", "--to", "agui", "/nonexistent/x.sse"]) == 2
    assert "/nonexistent/x.sse: error: cannot read" in capsys.readouterr().err


@pytest.mark.parametrize("spelling", [["--from"], ["--format"]])
@pytest.mark.parametrize("other", ["agui", "vercel"])
def test_validate_a_recording_of_the_other_dialect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], other: str, spelling: list[str]
) -> None:
    there = tmp_path / "run.sse"
    assert main(["convert", "--from", "envelope", "--to", other, str(CASE), "-o", str(there)]) == 0
    assert main(["validate", "--strict", *spelling, other, str(there)]) == 0
    capsys.readouterr()
    # a recording whose envelopes break a rule (agent_uuid is not the agent, E142):
    # reported at the line of the original file that carried it
    init = json.dumps({"format": "json", "user_query": "", "agent_uuid": "zzz", "model": "m"})
    if other == "agui":
        events = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "metadata": {"envelope": {"agent": "a"}}},
            {"type": "CUSTOM", "name": "envelope.meta_init", "value": {"text": init}},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ]
    else:
        events = [
            {"type": "start"},
            {"type": "data-envelope-run", "data": {"agent": "a"}, "transient": True},
            {"type": "data-meta-init", "data": {"agent": "a", "text": init}},
            {"type": "finish"},
        ]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join(json.dumps(e) for e in events[:-1]) + "\n\n" + json.dumps(events[-1]) + "\n")
    assert main(["validate", *spelling, other, str(broken)]) == 1
    row = f"{broken}:{len(events) - 1}:1: E142 "
    assert capsys.readouterr().out.startswith(row)


def test_validate_reports_what_cannot_cross(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "state.jsonl"
    bad.write_text('{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n{"type":"STATE_SNAPSHOT","snapshot":{}}\n')
    assert main(["validate", "--from", "agui", str(bad)]) == 1
    assert capsys.readouterr().out.startswith(f"{bad}:2:1: I203 STATE_SNAPSHOT has no envelope counterpart")


def test_convert_streams_in_bounded_memory(tmp_path: Path) -> None:
    """[I1-c] A recording far larger than what the converters hold: memory stays near one chunk."""
    big = tmp_path / "big.jsonl"
    em = Emitter("a")
    with big.open("wb") as f:
        f.write(
            em.buffered("meta_init", json.dumps({"format": "json", "user_query": "", "agent_uuid": "a", "model": "m"}))[
                0
            ]
            + b"\n"
        )
        piece = "x" * 1500
        for _ in range(4000):  # about 6 MB of text, in 4000 text blocks
            for line in [*em.streamed("text", piece), em.end("text")]:
                f.write(line + b"\n")
        f.write(b"[DONE]\n")
    out = tmp_path / "big.agui.sse"
    tracemalloc.start()
    try:
        assert main(["convert", "--from", "envelope", "--to", "agui", str(big), "-o", str(out)]) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert big.stat().st_size > 6_000_000
    assert peak < 2_000_000, peak


def test_convert_help_says_what_defaults_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """spec/cli.md C1-b for the new subcommand: what it does, each option's default, examples."""
    with pytest.raises(SystemExit) as done:
        main(["convert", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text
    for entry in text.split("options:", 1)[1].split("examples:", 1)[0].split("\n  -")[2:]:
        assert "default" in entry, entry


def test_the_edges_of_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plain validate still works; stdin; empty input; bad UTF-8; an unwritable output; no file; warnings."""
    assert main(["validate", str(CASE)]) == 0  # --from envelope: the validator as before
    capsys.readouterr()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(CASE.read_bytes())))
    assert main(["convert", "--from", "envelope", "--to", "vercel", "-"]) == 0
    assert capsys.readouterr().out.endswith("data: [DONE]\n\n")
    empty = tmp_path / "empty.sse"
    empty.write_text("\n\n")
    assert main(["convert", "--from", "agui", "--to", "envelope", str(empty)]) == 2
    assert f"{empty}: error: the input is empty" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\xff\n')
    assert main(["convert", "--from", "agui", "--to", "envelope", str(bad)]) == 2
    assert "invalid UTF-8" in capsys.readouterr().err
    assert main(["validate", "--from", "agui", str(bad)]) == 2
    assert "invalid UTF-8" in capsys.readouterr().err
    assert main(["convert", "--from", "envelope", "--to", "agui", str(CASE), "-o", str(tmp_path / "no" / "x")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["validate", "--from", "agui"]) == 2
    assert "no file given" in capsys.readouterr().err
    open_at_done = ROOT / "spec" / "conformance" / "invalid" / "E120_open_block.jsonl"
    assert main(["convert", "--from", "envelope", "--to", "agui", str(open_at_done)]) == 2
    assert ": error: I205 line " in capsys.readouterr().err
    # a recording whose envelopes only warn: exit 0, or 1 with --strict
    warn = tmp_path / "warn.sse"
    seed = GOLDEN / "seed_multi_agent" / "envelopes.jsonl"
    assert main(["convert", "--from", "envelope", "--to", "vercel", str(seed), "-o", str(warn)]) == 0
    assert main(["validate", "--from", "vercel", str(warn)]) == 0
    assert main(["validate", "--strict", "--from", "vercel", str(warn)]) == 1
    assert "W163" in capsys.readouterr().out
