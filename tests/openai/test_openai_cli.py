"""``envelope convert --from openai-chat|openai-responses --to envelope`` (spec/openai-adapter.md [O10-a])."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from envelope import reconstruct
from envelope.cli import main
from openai_support import CHAT, FIXTURES, RESPONSES, chat_run, responses_run
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


def _source(path: Path) -> str:
    return "openai-chat" if path.parent.name == "chat" else "openai-responses"


def _blocks(lines: list[bytes]) -> list[dict[str, object]]:
    agents = reconstruct(lines).to_dict()["agents"]
    (agent,) = agents.values()
    return [b for b in agent["blocks"] if b["type"] not in ("meta_init", "meta_final")]


@pytest.mark.parametrize(
    "path", [p for p in CHAT + RESPONSES if p.stem != "two_choices"], ids=lambda p: f"{p.parent.name}-{p.stem}"
)
@pytest.mark.parametrize("framing", ["sse", "jsonl"])
def test_every_capture_converts_to_a_strictly_valid_stream(tmp_path: Path, path: Path, framing: str) -> None:
    """[O10-a] the capture's SSE, to a whole stream ending in [DONE]: the blocks of the SDK replay."""
    out = tmp_path / f"out.{framing}"
    assert (
        main(
            [
                "convert",
                "--from",
                _source(path),
                "--to",
                "envelope",
                "--output-format",
                framing,
                str(path),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    body = out.read_bytes()
    assert_valid(body)
    lines = [line for line in body.split(b"\n") if line.strip()]
    if framing == "sse":
        lines = [line.removeprefix(b"data: ") for line in lines]
    assert lines[-1] == b"[DONE]"
    replay = chat_run(path) if _source(path) == "openai-chat" else responses_run(path)
    assert _blocks(lines) == _blocks(replay.lines)


def test_a_capture_as_json_lines_converts_too(tmp_path: Path) -> None:
    """[O10-a] one chunk per line (a capture's JSON lines) gives the same envelopes as its SSE."""
    capture = tmp_path / "capture.jsonl"
    events = (FIXTURES / "chat" / "tool_calls.sse").read_text().split("\n\n")
    capture.write_text("\n".join(e.removeprefix("data: ") for e in events if e.startswith("data: ")) + "\n")
    a, b = tmp_path / "a.sse", tmp_path / "b.sse"
    assert main(["convert", "--from", "openai-chat", "--to", "envelope", str(capture), "-o", str(a)]) == 0
    assert (
        main(
            [
                "convert",
                "--from",
                "openai-chat",
                "--to",
                "envelope",
                str(FIXTURES / "chat" / "tool_calls.sse"),
                "-o",
                str(b),
            ]
        )
        == 0
    )
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize(
    ("args", "body", "said"),
    [
        (["--to", "envelope"], 'data: {"object": "chat.completion.chunk"\n\n', "line 1: not JSON"),
        (["--to", "envelope"], "data: [1, 2]\n\n", "line 1: a JSON list, not an object"),
        (["--to", "agui"], "data: {}\n\n", "converts to envelopes only"),
        (["--to", "envelope"], (FIXTURES / "chat" / "two_choices.sse").read_text(), "line 1: choice 1"),
        (["--to", "envelope"], "", "the input is empty"),
    ],
    ids=["not-json", "not-object", "to-agui", "two-choices", "empty"],
)
def test_bad_captures_are_one_clear_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], body: str, said: str
) -> None:
    """[O10-a] [O5-a] FILE:LINE: error: what, exit 2, never a traceback."""
    bad = tmp_path / "bad.sse"
    bad.write_text(body)
    assert main(["convert", "--from", "openai-chat", *args, str(bad)]) == 2
    err = capsys.readouterr().err
    assert said in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_agent_id_is_fixed_per_source(tmp_path: Path) -> None:
    """[O10-a] converting twice gives the same bytes."""
    outs = []
    for n in (1, 2):
        out = tmp_path / f"{n}.sse"
        assert (
            main(["convert", "--from", "openai-responses", "--to", "envelope", str(RESPONSES[0]), "-o", str(out)]) == 0
        )
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    first = json.loads(outs[0].split(b"\n")[0].removeprefix(b"data: "))
    assert first["type"] == "meta_init"
