"""Generated, corpus-shaped envelope streams for the validator benchmarks (fixed seed).

One agent turn (meta_init aside) is built once with the codec's ``Emitter``: streamed
thinking and text in API-sized deltas, a chunked tool call and a chunked tool result,
a multimodal result with an image, citations, and a server tool round trip. The
stream repeats that turn until it reaches the asked size, so generating 200 MB costs
almost nothing and holds only the one turn.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING

from envelope import CitationData, Emitter, ImageRef, frame

if TYPE_CHECKING:
    from collections.abc import Iterator

AGENT = "5f0c6e2a-8b1d-4c3e-9a7f-2d4b6c8e0a1f"
_WORDS = [
    "the",
    "of",
    "grass",
    "green",
    "sky",
    "blue",
    "rayleigh",
    "scattering",
    "because",
    "light",
    "wavelength",
    "shorter",
    "é",
    "ü",
    "✓",
    '"quoted"',
    "new\nline",
]


def _prose(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def turn(seed: int = 7) -> list[bytes]:
    """The encoded lines of one agent turn (no meta_init, meta_final or [DONE])."""
    rng = random.Random(seed)
    em = Emitter(AGENT)
    lines: list[bytes] = []
    for kind in ("thinking", "text"):
        for _ in range(30):
            lines += em.streamed(kind, _prose(rng, rng.randint(3, 30)))
        lines.append(em.end(kind))
    lines += em.citations(
        [
            CitationData(
                cited_text=_prose(rng, 8),
                citation_type="char_location",
                document_index=0,
                start_char_index=0,
                end_char_index=40,
            ),
            CitationData(
                cited_text=_prose(rng, 8),
                citation_type="web_search_result_location",
                url="https://example.com/a",
                title="A",
            ),
        ]
    )
    lines += em.buffered("tool_call", json.dumps({"pattern": _prose(rng, 400)}), id="toolu_01", name="grep")
    lines += em.tool_result("toolu_01", "grep", _prose(rng, 1500))
    lines += em.buffered("tool_call", "{}", id="toolu_02", name="screenshot")
    lines += em.tool_result(
        "toolu_02",
        "screenshot",
        "captured",
        [ImageRef(src="data:image/png;base64," + "iVBOR" * 200, media_type="image/png")],
    )
    lines += em.buffered("server_tool_call", '{"query":"grass"}', id="srvtoolu_01", name="web_search")
    lines += em.buffered(
        "server_tool_result",
        json.dumps([{"title": _prose(rng, 5), "url": "https://example.com"}] * 20),
        id="srvtoolu_01",
        name="web_search_tool_result",
    )
    return lines


def stream_lines(total_bytes: int, seed: int = 7) -> Iterator[bytes]:
    """Envelope lines of a valid stream of about ``total_bytes``, ``[DONE]`` last."""
    em = Emitter(AGENT)
    meta = {"format": "json", "user_query": "q", "agent_uuid": AGENT, "model": "claude-sonnet-4-5"}
    yield from em.buffered("meta_init", json.dumps(meta))
    one = turn(seed)
    size = sum(len(x) + 1 for x in one)
    for _ in range(max(1, total_bytes // size)):
        yield from one
    yield from em.buffered("meta_final", json.dumps({"stop_reason": "end_turn", "total_steps": 1}))
    yield b"[DONE]"


def sse_chunks(total_bytes: int, chunk_size: int = 64 * 1024, seed: int = 7) -> Iterator[bytes]:
    """The same stream as SSE bytes, in chunks of about ``chunk_size`` (as a socket gives them)."""
    pending: list[bytes] = []
    held = 0
    for line in stream_lines(total_bytes, seed):
        event = frame(line)
        pending.append(event)
        held += len(event)
        if held >= chunk_size:
            yield b"".join(pending)
            pending, held = [], 0
    if pending:
        yield b"".join(pending)
