"""Recordings of several responses back to back (issue 12 §1): after ``[DONE]`` a ``meta_init`` starts the next.

A run log holds a paused response and the response that resumes it (spec §8.4); the
reconstructor reads them as one recording in which the agents go on. Anything but a
``meta_init`` after ``[DONE]`` is still refused [8.2-a].
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from envelope import Reconstructor, SequenceError, StreamReader, frame
from validating import assert_valid

A = "3f2c9a1e-0000-4000-8000-000000000001"


def _env(kind: str, final: bool, delta: str = "", agent: str = A, **extra: Any) -> str:
    return json.dumps({"type": kind, "agent": agent, "final": final, **extra, "delta": delta}, separators=(",", ":"))


def _init(**extra: Any) -> str:
    payload = {"format": "json", "user_query": "Continue?", "agent_uuid": A, "model": "claude-sonnet-4-5", **extra}
    return _env("meta_init", True, json.dumps(payload))


PAUSED = [
    _init(),
    _env("text", False, "I will ask the browser."),
    _env("text", True),
    _env("tool_call", True, '{"q":1}', id="toolu_1", name="ask_user"),
    _env(
        "awaiting_frontend_tools",
        True,
        json.dumps([{"tool_use_id": "toolu_1", "name": "ask_user", "input": {"q": 1}}]),
    ),
    "[DONE]",
]
RESUMED = [
    _init(resume={"tool_use_ids": ["toolu_1"]}),
    _env("tool_result", True, "yes", id="toolu_1", name="ask_user"),
    _env("text", False, "Thanks."),
    _env("text", True),
    _env("meta_final", True, json.dumps({"stop_reason": "end_turn", "total_steps": 2})),
    "[DONE]",
]


def _blocks(rec: Reconstructor) -> list[tuple[str, Any]]:
    return [(b["type"], b.get("content", b.get("data"))) for b in rec.transcript().to_dict()["agents"][A]["blocks"]]


@pytest.mark.parametrize("batch", [False, True])
def test_a_meta_init_after_done_starts_the_next_response_of_the_same_agent(batch: bool) -> None:
    """[8.5-a] only a meta_init may follow [DONE]; the reconstructor keeps the agent's blocks in one list."""
    rec = Reconstructor()
    if batch:
        rec.feed_many(PAUSED + RESUMED)
    else:
        for line in PAUSED + RESUMED:
            rec.feed(line)
    assert rec.done
    kinds = [kind for kind, _ in _blocks(rec)]
    assert kinds == [
        "meta_init",
        "text",
        "tool_call",
        "awaiting_frontend_tools",
        "meta_init",
        "tool_result",
        "text",
        "meta_final",
    ]
    assert _blocks(rec)[6] == ("text", "Thanks.")


def test_each_response_of_the_recording_is_itself_valid() -> None:
    """The recording used here is two responses, each valid on its own (so the test is about joining them)."""
    assert_valid(PAUSED)
    assert_valid(RESUMED)


def test_the_recording_read_from_sse_bytes() -> None:
    data = b"".join(frame(x.encode()) if x != "[DONE]" else b"data: [DONE]\n\n" for x in PAUSED + RESUMED)
    reader = StreamReader()
    rec = Reconstructor()
    rec.feed_many(reader.feed_batch(data))
    rec.feed_many(reader.close())
    assert rec.done
    assert len(_blocks(rec)) == 8


def test_done_is_false_inside_the_next_response() -> None:
    rec = Reconstructor()
    rec.feed_many([*PAUSED, RESUMED[0]])
    assert not rec.done
    assert rec.transcript().done is False


@pytest.mark.parametrize(
    "after",
    [
        "[DONE]",
        _env("text", True, "late"),
        _env("meta_final", True, "{}"),
        '{"type":"meta_init"',
        "not json",
    ],
)
@pytest.mark.parametrize("batch", [False, True])
def test_anything_else_after_done_is_refused(after: str, batch: bool) -> None:
    """[8.5-b] [8.2-a] a second [DONE], another type, or an unreadable line after [DONE] is a sequence error."""
    rec = Reconstructor()

    def run() -> None:
        if batch:
            rec.feed_many([*PAUSED, after, RESUMED[0]])
        else:
            for line in [*PAUSED, after]:
                rec.feed(line)

    with pytest.raises(SequenceError, match=r"content after \[DONE\]") as caught:
        run()
    assert caught.value.position.index == len(PAUSED)
    assert caught.value.section == "8.2-a"


def test_a_block_left_open_at_done_stays_incomplete_and_does_not_continue() -> None:
    """[8.5-a] blocks open at [DONE] belong to the response that ended: the next response's text opens a new block."""
    rec = Reconstructor()
    rec.feed_many(
        [
            _env("meta_init", True, "{}"),
            _env("text", False, "cut "),
            "[DONE]",
            _env("meta_init", True, "{}"),
            _env("text", True, "fresh"),
            "[DONE]",
        ]
    )
    texts = [b for b in rec.transcript().agents[A] if b.type == "text"]
    assert [(b.content, b.complete) for b in texts] == [("cut ", False), ("fresh", True)]
    assert rec.close() == []


def test_a_citation_in_the_next_response_cites_the_agents_last_text() -> None:
    rec = Reconstructor()
    rec.feed_many(
        [
            *PAUSED,
            RESUMED[0],
            _env("citation", True, "quoted", citation_type="char_location"),
        ]
    )
    cited = [b for b in rec.transcript().agents[A] if b.citations]
    assert [b.content for b in cited] == ["I will ask the browser."]


def test_the_recording_machine_is_its_table() -> None:
    """[8.2-a] PHASES is the recording's machine: each pair in it is taken, each pair missing is refused."""
    from envelope._reconstruct import PHASES, Mark, Phase

    lines = {Mark.LINE: RESUMED[1], Mark.META_INIT: RESUMED[0], Mark.TERMINATOR: "[DONE]"}
    for phase in Phase:
        for mark in Mark:
            rec = Reconstructor()
            rec.feed(RESUMED[0])
            if phase is Phase.DONE:
                rec.feed("[DONE]")
            if (phase, mark) in PHASES:
                rec.feed(lines[mark])
                assert rec.done is (PHASES[(phase, mark)] is Phase.DONE)
            else:
                with pytest.raises(SequenceError, match=r"content after \[DONE\]"):
                    rec.feed(lines[mark])
