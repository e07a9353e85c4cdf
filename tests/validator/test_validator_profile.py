"""The seed-compatible profile (spec §10.2, issue 12 §2): control types whole, exempt from the bound."""

from __future__ import annotations

import json

import pytest

from envelope import StreamValidator, Validator, validate
from envelope._validator import SEED_UNKNOWN_TYPES, SEED_WHOLE_TYPES

from ._streams import A, complete, env, jsonl, meta_final, meta_init, sse, text

LONG_INIT = meta_init(user_query="q" * 5000)
BIG_FILES = env(
    "meta_files", True, json.dumps({"files": [{"file_id": "f" * 3000, "filename": "a", "storage_location": "s"}]})
)
SPLIT_INIT = [
    env("meta_init", False, '{"format":"json","user_query":"q",'),
    env("meta_init", True, json.dumps({"agent_uuid": A, "model": "m"})[1:]),
]


def pairs(lines: list[str], profile: str) -> list[tuple[str, int]]:
    """(code, line) through plain lines and through the bytes path (whose fast path batches lines)."""
    plain = [(v.code, v.line) for v in validate(lines, profile=profile)]  # type: ignore[arg-type]  # both profiles
    checker = StreamValidator(profile=profile)  # type: ignore[arg-type]  # as above
    data = jsonl(*lines)
    found = checker.feed(data[:1]) + checker.feed(data[1:]) + checker.close()
    assert [(v.code, v.line) for v in found] == plain
    return plain


def test_spec_10_2_b_oversize_control_lines_are_exempt_in_the_seed_profile() -> None:
    """[10.2-b] one long meta_init or meta_files line: E107 by default, nothing under the seed profile."""
    lines = [LONG_INIT, BIG_FILES, meta_final(), "[DONE]"]
    assert pairs(lines, "default") == [("E107", 1), ("E107", 2)]
    assert pairs(lines, "seed") == []


def test_spec_10_2_a_other_types_keep_the_bound_in_the_seed_profile() -> None:
    """[10.2-a] only the control types are sent whole; text over the bound stays E107."""
    lines = complete(env("text", False, "y" * 2100), env("text", True, ""))
    assert pairs(lines, "seed") == [("E107", 2)]
    control = {"meta_init", "meta_files", "error", "awaiting_frontend_tools", "meta_final", "meta_compaction"}
    control.add("meta_status")  # [10.2-e]: sent whole there too, were it sent
    assert control == SEED_WHOLE_TYPES


def test_spec_10_2_c_chunked_control_envelope_is_w129_once_per_block() -> None:
    """[10.2-c] a meta_init in two lines: W129 at its first line under the seed profile, quiet by default."""
    lines = [*SPLIT_INIT, *text("hi"), meta_final(), "[DONE]"]
    assert pairs(lines, "default") == []
    assert pairs(lines, "seed") == [("W129", 1)]


@pytest.mark.parametrize("kind", sorted(SEED_WHOLE_TYPES - {"meta_init"}))
def test_each_control_type_split_is_w129(kind: str) -> None:
    payload = "[]" if kind == "awaiting_frontend_tools" else json.dumps({"type": "x", "message": "m"})
    if kind == "meta_files":
        payload = json.dumps({"files": []})
    if kind == "meta_final":
        payload = json.dumps({"stop_reason": "end_turn", "total_steps": 1})
    if kind == "meta_compaction":
        payload = json.dumps({"trigger": "auto", "pre_tokens": 1})
    if kind == "meta_status":
        payload = json.dumps({"kind": "step_start", "step": 1})
    split = [env(kind, False, payload[:3]), env(kind, True, payload[3:])]
    body = [meta_init(), *split] + ([] if kind == "meta_final" else [meta_final()])
    # meta_compaction and meta_status are no seed types at all: E119 on each of their lines besides (§10.2-d, e)
    unknown = [("E119", 2), ("W129", 2), ("E119", 3)] if kind in SEED_UNKNOWN_TYPES else [("W129", 2)]
    assert pairs([*body, "[DONE]"], "seed") == unknown


def test_sse_batches_give_w129_too() -> None:
    checker = StreamValidator(profile="seed")
    data = sse(*SPLIT_INIT, *text("hi"), meta_final(), "[DONE]")
    found = [v for i in range(0, len(data), 64) for v in checker.feed(data[i : i + 64])] + checker.close()
    assert [(v.code, v.line) for v in found] == [("W129", 1)]


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        Validator(profile="strict")  # type: ignore[arg-type]  # the mistake under test
