"""Spec §4.16, §10.2-e: ``meta_status``, the 15th envelope type (routine signals, not errors).

A buffered control type like ``meta_compaction``: the emitter writes it, the strict
decoder reads it as a ``MetaStatus``, both readers rebuild it as a block of its agent with
its JSON in ``data``, the validator checks its payload by ``kind`` (E141) and that the
seed profile never sends it (E119). Every stream written here goes through the strict
validator.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from envelope import ENVELOPE_TYPES, Emitter, MetaStatus, decode, encode, reconstruct, validate
from envelope._reconstruct import Reconstructor
from validating import assert_valid

A = "abc-123"
INIT = {"format": "json", "user_query": "q", "agent_uuid": A, "model": "m"}
FINAL = {"stop_reason": "end_turn", "total_steps": 1}


def _stream(*statuses: Any, bound: int = 2048) -> list[bytes]:
    em = Emitter(A, bound)
    lines = [*em.buffered("meta_init", json.dumps(INIT))]
    for status in statuses:
        lines += em.buffered("meta_status", status if isinstance(status, str) else json.dumps(status))
    return [*lines, *em.buffered("meta_final", json.dumps(FINAL)), b"[DONE]"]


def _codes(lines: list[bytes], profile: str = "default") -> list[tuple[str, int]]:
    return [(v.code, v.line) for v in validate(lines, profile=profile)]  # type: ignore[arg-type]


GOOD: list[dict[str, Any]] = [
    {"kind": "tool_progress", "tool_use_id": "t", "name": "n", "message": "1 of 3", "fraction": 0},
    {"kind": "tool_progress", "tool_use_id": "t", "name": "n", "fraction": 1.0},
    {"kind": "step_start", "step": 1},
    {"kind": "step_finish", "step": 1, "usage": {"input_tokens": 1}, "cost": None, "stop_reason": "tool_use"},
    {"kind": "step_finish", "step": 2, "usage": {}, "cost": {"model": "m", "usd": 0.01}},
    {"kind": "compaction", "phase": "started", "trigger": "auto"},
    {"kind": "compaction", "phase": "finished"},
    {"kind": "compaction", "phase": "failed", "message": "the summary call failed"},
    {"kind": "retry", "attempt": 1, "delay": 0.5},
    {"kind": "hook", "event": "Stop", "outcome": "failed", "hook": 0},
    {"kind": "mcp_server", "state": "connected", "server": "files"},
    {"kind": "mcp_server", "state": "failed"},
]


def test_spec_4_16_a_the_15th_type_round_trips_through_the_codec() -> None:
    """[4.1-a] the 15th type, buffered; the strict decoder gives a ``MetaStatus``; encode gives the bytes back."""
    assert ENVELOPE_TYPES[-1] == "meta_status"
    (line,) = Emitter(A).buffered("meta_status", json.dumps({"kind": "step_start", "step": 1}))
    envelope = decode(line)
    assert isinstance(envelope, MetaStatus)
    assert encode(envelope) == line
    assert (
        line
        == b'{"type":"meta_status","agent":"abc-123","final":true,"delta":"{\\"kind\\": \\"step_start\\", \\"step\\": 1}"}'
    )


@pytest.mark.parametrize("status", GOOD, ids=[f"{s['kind']}-{i}" for i, s in enumerate(GOOD)])
def test_spec_4_16_a_each_kind_of_the_table_is_valid(status: dict[str, Any]) -> None:
    """[4.16-a] each kind with its keys passes, in both the one-line and a chunked form."""
    assert_valid(_stream(status))
    assert_valid(_stream(status, bound=90), max_bytes=90)


BAD = [
    ({"message": "m"}, "lacks the required key `kind`"),
    ({"kind": None}, "key `kind` must be a string"),
    ({"kind": "later", "message": []}, "key `message` must be a string"),
    ({"kind": "tool_progress", "name": "n"}, "lacks the required key `tool_use_id`"),
    ({"kind": "tool_progress", "tool_use_id": "t", "name": "n", "fraction": -0.1}, "between 0 and 1"),
    ({"kind": "tool_progress", "tool_use_id": "t", "name": "n", "fraction": "half"}, "`fraction` must be"),
    ({"kind": "tool_progress", "tool_use_id": "t", "name": "n", "fraction": True}, "`fraction` must be"),
    ({"kind": "step_start", "step": 0}, "`step` must be an integer >= 1, got 0"),
    ({"kind": "step_start", "step": 1.0}, "`step` must be an integer"),
    ({"kind": "step_finish", "step": 2}, "lacks the required key `usage`"),
    ({"kind": "step_finish", "step": 2, "usage": {}, "cost": 0.1}, "`cost` must be an object or null"),
    ({"kind": "compaction", "phase": "halfway"}, "must be one of started, finished, failed"),
    ({"kind": "compaction"}, "lacks the required key `phase`"),
    ({"kind": "retry", "attempt": 0}, "`attempt` must be an integer >= 1"),
    ({"kind": "hook", "event": "Stop"}, "lacks the required key `outcome`"),
    ({"kind": "mcp_server", "state": "up"}, "must be one of connected, failed"),
    ("[1, 2]", "must be a JSON object, got an array"),
]


@pytest.mark.parametrize(("status", "said"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_spec_4_16_a_a_wrong_shape_is_one_e141_naming_the_key(status: Any, said: str) -> None:
    """[4.16-a] each fault is exactly one E141, at the status line, saying which key and why."""
    lines = _stream(status)
    found = list(validate(lines))
    assert [(v.code, v.line) for v in found] == [("E141", 2)]
    assert said in found[0].message, found[0].message


def test_spec_4_16_b_an_unknown_kind_is_valid_with_only_kind_and_message_checked() -> None:
    """[4.16-b] a kind this version does not define passes whatever its other keys hold."""
    assert_valid(_stream({"kind": "sandbox", "message": "bwrap started", "step": -5, "phase": 3}))
    assert _codes(_stream({"kind": "sandbox", "message": 5})) == [("E141", 2)]


def test_spec_10_2_e_every_status_line_under_the_seed_profile_is_e119() -> None:
    """[10.2-e] the seed profile refuses each meta_status line (a chunked one on each line); default accepts."""
    lines = _stream({"kind": "step_start", "step": 1}, {"kind": "tool_progress", "tool_use_id": "t", "name": "n"})
    assert _codes(lines) == []
    assert _codes(lines, "seed") == [("E119", 2), ("E119", 3)]


def test_spec_7_5_a_both_python_readers_rebuild_a_status_as_data_in_its_place() -> None:
    """[7.5-a] the reconstructor (one line and chunked, fed whole or in a batch) gives the JSON in ``data``."""
    long = {"kind": "tool_progress", "tool_use_id": "t", "name": "n", "message": "x" * 400}
    lines = _stream({"kind": "step_start", "step": 1}, long, bound=200)
    assert_valid(lines, max_bytes=200)
    assert sum(b'"meta_status"' in line for line in lines) > 2  # the long one is chunked
    blocks = reconstruct(lines).to_dict()["agents"][A]["blocks"]
    assert [b["type"] for b in blocks] == ["meta_init", "meta_status", "meta_status", "meta_final"]
    assert blocks[1] == {"type": "meta_status", "complete": True, "data": {"kind": "step_start", "step": 1}}
    assert blocks[2]["data"] == long
    batch = Reconstructor()
    batch.feed_many(lines)
    assert batch.transcript().to_dict() == reconstruct(lines).to_dict()


def test_spec_4_16_d_the_validator_does_not_judge_how_steps_pair() -> None:
    """[4.16-d] a step left open, a finish of a step never started, a step started twice: all valid streams."""
    start, finish = {"kind": "step_start", "step": 2}, {"kind": "step_finish", "step": 7, "usage": {}}
    assert _codes(_stream(start, start, finish)) == []
