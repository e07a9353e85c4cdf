"""Mutational fuzzer: nothing but an ``EnvelopeError`` escapes the migrator (STYLE §5, issue 18 §2, §5).

Seeds: the legacy capture of the corpus (raw SSE, and as decoded tag text), the golden
envelopes of ``fixtures/legacy`` (JSON lines, which the migrator must refuse cleanly),
and later-era streams written by ``_legacy_writer``. Each case mutates one seed a few
times (bytes flipped, tokens of the legacy syntax inserted, spans deleted or repeated,
and a nesting mutation that wraps a JSON payload in hundreds or thousands of brackets,
which plain byte mutation cannot reach), picks options, and feeds the result in random
chunks. Runs under fixed seeds, so CI is deterministic; a failure names its seed and case.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any, Final

import pytest

from envelope import EnvelopeError, XmlMigrator

from ._legacy_writer import frame_raw_sse, write

GOLDEN: Final = Path(__file__).resolve().parents[2] / "fixtures" / "legacy" / "envelopes.jsonl"
AGENT: Final = "dbe25a6e-0493-4c70-9a0b-e906c03584b5"
#: Cases per seed: the five seeds take about 40 s together on a shared CI machine.
CASES: Final = 400
SEEDS: Final = (1, 2, 3, 4, 5)

TOKENS: Final = (
    b"<",
    b">",
    b'"',
    b"'",
    b"&",
    b"&amp;",
    b"&#xD800;",
    b"&#99999999;",
    b"&bogus;",
    b"\\",
    b"\\n",
    b"\\x",
    b"\n",
    b"\r",
    b"\n\ndata: ",
    b"data: ",
    b"[DONE]",
    b"]]>",
    b"<![CDATA[",
    b"]]><![CDATA[",
    b"<content-block-text>",
    b"</content-block-text>",
    b"<content-block-thinking>",
    b"</content-block-tool_result>",
    b'<content-block-tool_call id="t" name="n" arguments="{}">',
    b"<citations>",
    b'<citation type="char_location" start_char_index="x">',
    b"</citations>",
    b"<text>",
    b'<image src="a" media_type="image/png"/>',
    b"<!DOCTYPE x [<!ENTITY a 'b'>]>",
    b"<" + b"n" * 200,
    b"\x80",
    b"\xc3",
    b"\xf0\x9f",
    b"\x00",
)
#: Where a JSON payload starts: its value is wrapped in brackets by the nesting mutation.
PAYLOAD: Final = re.compile(rb'(?:arguments|data)="([^"]*)"|<!\[CDATA\[(.*?)\]\]>', re.S)


def _seeds(capture: bytes) -> list[bytes]:
    records = capture.decode("utf-8")[len("data: ") : -2].split("\n\ndata: ")
    tags = "".join(records[:-1]).encode("utf-8")
    later = write(
        [
            {"type": "meta_init", "data": {"format": "xml", "user_query": "q", "agent_uuid": AGENT, "model": "m"}},
            {"type": "thinking", "deltas": ["a \\ b", "\\n c"]},
            {"type": "text", "deltas": ["x <y> & z"], "citations": []},
            {"type": "tool_call", "id": "toolu_1", "name": "f", "input": {"p": "a\\b\nc"}},
            {"type": "tool_result", "id": "toolu_1", "name": "f", "content": "l1\nl2 ]]> x", "images": []},
            {"type": "error", "data": {"type": "e", "message": "m\\n"}},
            {"type": "meta_final", "data": {"stop_reason": "end_turn"}},
        ],
        "later",
    )
    return [capture, tags, GOLDEN.read_bytes(), frame_raw_sse(later), "".join(later).encode("utf-8")]


def _nest(rnd: random.Random, data: bytes) -> bytes:
    found = list(PAYLOAD.finditer(data))
    if not found:
        return data
    m = rnd.choice(found)
    group = 1 if m.group(1) is not None else 2
    depth = rnd.choice((250, 256, 257, 1000, 5000))
    start, end = m.span(group)
    return data[:start] + b"[" * depth + data[start:end] + b"]" * depth + data[end:]


def _mutate(rnd: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.random()
        at = rnd.randrange(len(out) + 1)
        if op < 0.2 and out:
            out[min(at, len(out) - 1)] = rnd.randrange(256)
        elif op < 0.55:
            out[at:at] = rnd.choice(TOKENS)
        elif op < 0.7:
            del out[at : at + rnd.randint(1, 64)]
        elif op < 0.8:
            out[at:at] = out[at : at + rnd.randint(1, 64)] * rnd.randint(2, 5)
        else:
            out = bytearray(_nest(rnd, bytes(out)))
    return bytes(out)


def _options(rnd: random.Random) -> dict[str, Any]:
    options: dict[str, Any] = {
        "lenient": rnd.random() < 0.5,
        "era": rnd.choice(("auto", "auto", "early", "later")),
        "keep_labels": rnd.random() < 0.2,
        "input": rnd.choice(("auto", "auto", "raw-sse", "tags")),
    }
    if rnd.random() < 0.5:
        options["agent"] = AGENT
    if rnd.random() < 0.2:
        options["max_bytes"] = rnd.choice((64, 200))
    return options


def _chunks(rnd: random.Random, data: bytes) -> list[bytes]:
    top = rnd.choice((1, 16, 512, 8192, len(data) + 1))
    out: list[bytes] = []
    at = 0
    while at < len(data):
        size = rnd.randint(1, max(1, top))
        out.append(data[at : at + size])
        at += size
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_mutated_legacy_streams_raise_only_envelope_errors(corpus: Path, seed: int) -> None:
    """Any exception other than an EnvelopeError from feed() or close() is a bug."""
    seeds = _seeds((corpus / "legacy_xml_sse_capture.txt").read_bytes())
    rnd = random.Random(seed)
    outcomes = {"ok": 0, "error": 0}
    for case in range(CASES):
        data = _mutate(rnd, rnd.choice(seeds))
        options = _options(rnd)
        chunks = _chunks(rnd, data)
        try:
            migrator = XmlMigrator(**options)
            lines: list[bytes] = []
            for chunk in chunks:
                lines += migrator.feed(chunk)
            lines += migrator.close()
        except EnvelopeError:
            outcomes["error"] += 1
        except Exception as exc:  # the bug this test looks for
            pytest.fail(f"seed {seed}, case {case}: {type(exc).__name__}: {exc} (options {options})")
        else:
            outcomes["ok"] += 1
            assert all(isinstance(line, bytes) for line in lines)
    # Both outcomes occur, so the mutations neither break every input nor leave them all intact.
    assert outcomes["ok"] > CASES // 10, outcomes
    assert outcomes["error"] > CASES // 10, outcomes
