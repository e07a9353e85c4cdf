"""Mutational fuzzing of ``AnthropicTranslator`` over every recorded event file (issue 18 §5).

Each case takes a recording (the corpus's ``anthropic_events_*.json`` and the
hand-written files in ``data/``), applies a few structural mutations a broken proxy,
a hostile recording or a future API could produce (a value of another JSON type, a
deleted key, a lone surrogate, data nested a thousand levels deep, a cut or doubled
tool input, dropped, doubled or swapped events), and feeds it as a relay does: on an
``EnvelopeError`` from ``feed()`` it calls ``abort()``, otherwise ``finish()``.

Checked (STYLE §5, spec/anthropic-adapter.md [A5.3-a]):
- nothing but an ``EnvelopeError`` escapes ``feed()``; nothing at all escapes
  ``abort()``, ``finish()``, ``close()`` or ``finalize()``, whose result is JSON data;
- the lines written, ending included, carry no validator *error*: whatever the input,
  the translator never writes an invalid stream (warnings are allowed: a fragment has
  no ``meta_init`` or ``[DONE]``, and a mutated citation type is only a warning).

Runs under several fixed seeds (``random.Random``), so CI, which runs hypothesis
derandomised, explores as many cases as a developer's run.
"""

from __future__ import annotations

import copy
import json
import random
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref.models.replay import load_events
from anthropic_support import AGENT, DATA
from envelope import EncodeError, EnvelopeError, OversizeError
from envelope.anthropic import AnthropicTranslator
from validating import violations

if TYPE_CHECKING:
    from pathlib import Path

SEEDS = [0, 1, 2, 3, 4, 5]
CASES_PER_SEED = 120
MAX_BYTES = 512  # small, so that chunking is exercised too


def _deep_list() -> Any:
    value: Any = []
    for _ in range(1000):
        value = [value]
    return value


def _deep_dict() -> Any:
    value: Any = {}
    for _ in range(1000):
        value = {"a": value}
    return value


#: Values a mutation may put anywhere: every JSON type, and the hostile cases.
HOSTILE: list[Any] = [
    None,
    True,
    0,
    -1,
    7,
    2**70,
    1.5,
    float("nan"),
    "",
    "x",
    "\ud800",
    "ok\ud83d",
    "\ude00ok",
    '"\\',
    "\x00\x1f\u2028",
    "é" * 700,
    [],
    [1, "a"],
    {},
    {"x": 1},
    {"type": "text"},
    {"type": {"x": 1}},
    _deep_list,
    _deep_dict,
]
TYPES = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
    "error",
    "ping",
    "text",
    "compaction",
    "text_delta",
    "input_json_delta",
    "citations_delta",
    "tool_use",
    "server_tool_use",
    "web_search_tool_result",
    "thinking",
    "redacted_thinking",
]
PARTIAL_JSON = ['{"a": ', "[" * 1000, "]" * 1000, '"\ud800"', "}", '{"q": "x"}', "nul", "\ud83d", "\ude00"]


def _sources(corpus: Path) -> list[list[dict[str, Any]]]:
    files = sorted(corpus.glob("anthropic_events_*.json")) + sorted(DATA.glob("*.json"))
    assert len(files) >= 5, files
    return [load_events(path) for path in files]


def _hostile(rng: random.Random, choices: list[Any] = HOSTILE) -> Any:
    """A fresh hostile value: the mutations change containers in place, so none is shared."""
    value = rng.choice(choices)
    return value() if callable(value) else copy.deepcopy(value)


def _containers(value: Any, out: list[Any], depth: int = 0) -> None:
    """The dicts and lists inside ``value``, down to 20 levels (the deep values are not entered)."""
    if depth > 20:
        return
    if isinstance(value, dict):
        out.append(value)
        for item in value.values():
            _containers(item, out, depth + 1)
    elif isinstance(value, list):
        out.append(value)
        for item in value:
            _containers(item, out, depth + 1)


def _mutate(rng: random.Random, events: list[Any]) -> None:
    """Apply one mutation to ``events`` in place."""
    kind = rng.randrange(8)
    if kind == 0 and events:  # drop, double or swap events
        i, j = rng.randrange(len(events)), rng.randrange(len(events))
        choice = rng.randrange(3)
        if choice == 0:
            del events[i]
        elif choice == 1:
            events.insert(i, copy.copy(events[j]))  # shallow: a deep value cannot be deep-copied
        else:
            events[i], events[j] = events[j], events[i]
        return
    if kind == 1 and events:  # cut the stream
        del events[rng.randrange(len(events)) :]
        return
    found: list[Any] = []
    _containers(events, found)
    found = [c for c in found if c and c is not events] or [events]
    target = rng.choice(found)
    if isinstance(target, list):
        if target:
            target[rng.randrange(len(target))] = _hostile(rng)
        return
    key = rng.choice(list(target))
    if kind == 2:
        del target[key]
    elif (kind == 3 and key == "type") or (kind == 3 and rng.random() < 0.3):
        target["type"] = rng.choice(TYPES)
    elif kind == 4 and isinstance(target.get(key), str):  # a lone surrogate inside a string
        text = target[key]
        at = rng.randrange(len(text) + 1)
        target[key] = text[:at] + rng.choice(["\ud800", "\udfff", "\ud83d"]) + text[at:]
    elif kind == 5 and isinstance(target.get("partial_json"), str):  # a cut, doubled or hostile tool input
        text = target["partial_json"]
        target["partial_json"] = rng.choice([text[: rng.randrange(len(text) + 1)], text * 2, rng.choice(PARTIAL_JSON)])
    elif kind == 6 and key in ("index", "content", "input"):
        target[key] = _hostile(rng, [_deep_list, _deep_dict, -1, 99, "0", None])
    else:
        target[key] = _hostile(rng)


def _run(events: list[Any]) -> list[bytes]:
    t = AnthropicTranslator(AGENT, MAX_BYTES)
    lines: list[bytes] = []
    try:
        for event in events:
            lines.extend(t.feed(event))
    except EnvelopeError as exc:
        lines.extend(t.abort(exc))
    else:
        lines.extend(t.finish())
    t.close()
    json.dumps(t.finalize())  # JSON data, whatever came in
    return lines


@pytest.mark.parametrize("seed", SEEDS)
def test_mutated_recordings_raise_only_envelope_errors_and_write_valid_streams_A5_3_a(corpus: Path, seed: int) -> None:
    """[A5.3-a] [A8.2-a] only ``EnvelopeError`` escapes, and no stream written has a validator error."""
    rng = random.Random(seed)
    sources = _sources(corpus)
    for case in range(CASES_PER_SEED):
        events = copy.deepcopy(rng.choice(sources))
        for _ in range(rng.randint(1, 4)):
            _mutate(rng, events)
        lines = _run(events)
        if not lines:
            continue  # a complete message with no content (E167 is about empty input, not a bug)
        errors = [v for v in violations(lines, max_bytes=MAX_BYTES) if v.code.startswith("E")]
        assert not errors, f"seed {seed} case {case}:\n" + "\n".join(str(v) for v in errors)


def test_the_cases_the_issue_names_A5_3_a() -> None:
    """[A5.3-a] issue 18 §2: a non-string event type is passed over with a warning."""
    t = AnthropicTranslator("a")
    assert t.feed({"type": {"x": 1}}) == []
    assert t.feed({"type": ["message_start"]}) == []
    assert len(t.warnings) == 2
    assert "not a string" in t.warnings[0]


def test_warnings_never_repr_a_callers_container_A5_3_a() -> None:
    """[A5.3-a] found by the fuzzer: a deep list as ``index`` made the warning's ``repr`` raise ``RecursionError``."""
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    t = AnthropicTranslator("a")
    t.feed({"type": "content_block_delta", "index": deep, "delta": {"type": "text_delta", "text": "x"}})
    t.feed({"type": "content_block_start", "index": deep, "content_block": {"type": "text"}})
    t.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "text"}})
    t.feed({"type": "content_block_delta", "index": 0, "delta": {"type": deep}})
    assert len(t.warnings) == 3
    assert all("<list>" in w for w in t.warnings)


def test_block_data_nested_too_deep_or_with_a_lone_surrogate_is_coded_A5_3_a() -> None:
    """[A5.3-a] a server tool result's content: too deep is ``EncodeError`` A5.3-a, a surrogate §6.4."""
    deep: Any = {}
    for _ in range(1000):
        deep = {"a": deep}
    for content, section in [(deep, "A5.3-a"), ([{"text": "x\ud800"}], "6.4")]:
        t = AnthropicTranslator("a")
        t.feed({"type": "message_start", "message": {"id": "m"}})
        block = {"type": "web_search_tool_result", "tool_use_id": "s", "content": content}
        t.feed({"type": "content_block_start", "index": 0, "content_block": block})
        with pytest.raises(EncodeError) as info:
            t.feed({"type": "content_block_stop", "index": 0})
        assert info.value.section == section
        assert [json.loads(line)["type"] for line in t.abort(info.value)] == ["error"]


def test_abort_with_an_unsendable_reason_still_ends_with_an_error_A5_3_a() -> None:
    t = AnthropicTranslator("a")
    lines = t.abort(RuntimeError("bad \ud800 text"))
    (payload,) = [json.loads(json.loads(line)["delta"]) for line in lines]
    assert payload["type"] == "unsendable_error"
    assert "U+D800" in payload["message"]


def test_abort_in_strict_mode_raises_only_oversize_A5_3_a() -> None:
    t = AnthropicTranslator("a" * 300, max_bytes=100, strict=True)
    with pytest.raises(OversizeError):
        t.abort(RuntimeError("x"))


def test_block_data_too_deep_fails_at_its_stop_never_in_finalize_A5_3_a() -> None:
    """[A5.3-a] found by the fuzzer: a compaction delta nested 1000 deep made ``finalize()`` raise."""
    t = AnthropicTranslator("a")
    t.feed({"type": "message_start", "message": {"id": "m"}})
    t.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "compaction"}})
    t.feed({"type": "content_block_delta", "index": 0, "delta": {"type": "compaction_delta", "content": _deep_list()}})
    with pytest.raises(EncodeError):
        t.feed({"type": "content_block_stop", "index": 0})
    assert t.finalize() == []
    assert t.finish() != []  # the cut block makes the stream incomplete
