"""What the interop tests share: the project's streams, the strict validator, transcripts, generated runs.

Every stream a test takes from the project (goldens, conformance cases, corpus) or
generates goes through the strict validator here (``checked``) before any converter
sees it: a stream with errors is never passed off as a round trip.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from envelope import (
    CitationData,
    DecodeError,
    Emitter,
    ImageRef,
    Reconstructor,
    StreamReader,
    decode,
    validate,
)
from envelope.interop.agui import AguiToEnvelope, EnvelopeToAgui
from envelope.interop.vercel import EnvelopeToVercel, VercelToEnvelope
from streams import nasty_text, small_text

ROOT = Path(__file__).resolve().parents[2]
STREAM_FILES = sorted(
    [
        *ROOT.glob("fixtures/golden/*/input.sse"),
        *ROOT.glob("fixtures/golden/*/envelopes.jsonl"),
        *(p for p in ROOT.glob("spec/conformance/*/*") if p.suffix in (".sse", ".jsonl")),
        *ROOT.glob("fixtures/corpus/*.jsonl"),
    ]
)
PROTOCOLS = ("agui", "vercel")


def read_lines(path: Path) -> list[bytes]:
    """The envelope lines of a recording (SSE or JSON lines), ``[DONE]`` included."""
    reader = StreamReader("sse" if path.suffix == ".sse" else "jsonl")
    raw = [line.data for line in [*reader.feed(path.read_bytes()), *reader.close()]]
    return [x.encode() if isinstance(x, str) else bytes(x) for x in raw]


def profile_of(path: Path) -> str:
    return "seed" if ".seed." in path.name else "default"


def errors(lines: list[bytes], profile: str = "default") -> list[str]:
    """The strict validator's errors (codes and lines) on a stream."""
    return [f"{v.code}@{v.line}" for v in validate(lines, profile=profile) if v.severity == "error"]  # type: ignore[arg-type]


def transcript(lines: list[bytes]) -> dict[str, Any]:
    rebuilt = Reconstructor()
    for line in lines:
        rebuilt.feed(line)
    return rebuilt.transcript().to_dict()


def first_refused(lines: list[bytes]) -> int | None:
    """The 1-based number of the first line the strict decoder refuses, if any."""
    for n, line in enumerate(lines, 1):
        if line == b"[DONE]":
            continue
        try:
            decode(line)
        except DecodeError:
            return n
    return None


def to_other(protocol: str, lines: list[bytes]) -> list[Any]:
    conv = EnvelopeToAgui() if protocol == "agui" else EnvelopeToVercel()
    return [e for line in lines for e in conv.feed(line)] + conv.close()


def from_other(protocol: str, events: list[Any], *, as_text: bool = True) -> list[bytes]:
    conv = AguiToEnvelope() if protocol == "agui" else VercelToEnvelope()
    out: list[bytes] = []
    for event in events:
        out += conv.feed(json.dumps(event) if as_text and isinstance(event, dict) else event)
    return out + conv.close()


def responses(events: list[Any]) -> list[list[Any]]:
    """A Vercel recording cut into its responses at each ``[DONE]`` (the marker dropped)."""
    out: list[list[Any]] = [[]]
    for event in events:
        if event == "[DONE]":
            out.append([])
        else:
            out[-1].append(event)
    return [r for r in out if r]


# ---------------------------------------------------------------------------------------
# generated multi-agent runs


@dataclass(frozen=True)
class Run:
    """A generated run: its lines (validated), and how many agents it has."""

    lines: list[bytes]
    agents: int


def _block(
    draw: st.DrawFn, em: Emitter, kind: Any, n: int, calls: list[tuple[str, str, str]], *, edit_it: bool = False
) -> list[bytes]:
    """The lines of one block of ``kind`` (valid payloads: the validator must accept the run).

    A ``tool_result`` of a client call not answered yet is sometimes preceded by the call's
    edit (envelope-v1 §4.6-a: a second ``tool_call`` of the id, the input that ran, right
    before the result); the two are one block here, so nothing is interleaved between them.
    """
    if kind in ("text", "thinking"):
        lines = [line for piece in draw(st.lists(nasty_text, max_size=3)) for line in em.streamed(kind, piece)]
        lines.append(em.end(kind))
        if kind == "text" and draw(st.booleans()):
            cites = draw(st.lists(st.builds(_cite, small_text, st.booleans(), small_text), min_size=1, max_size=2))
            lines += em.citations(cites)
        return lines
    if kind in ("tool_call", "server_tool_call"):
        tid = f"call-{em.agent}-{n}"
        name = draw(st.sampled_from(["search", "get_weather", "spawn_subagent"]))
        calls.append((tid, name, kind))
        args = json.dumps(draw(st.dictionaries(small_text, nasty_text, max_size=3)))
        return em.buffered(kind, args, id=tid, name=name)
    if kind == "edited_call":
        # a client call, its edit and its result (envelope-v1 §4.6-a), in one block
        return _block(draw, em, "tool_call", n, calls) + _block(draw, em, "tool_result", n, calls, edit_it=True)
    if kind == "tool_result":
        tid, name, called = calls[-1] if calls else (f"call-{em.agent}-x", "search", "")
        edit: list[bytes] = []
        if called == "tool_call" and (edit_it or draw(st.booleans())):
            ran = json.dumps(draw(st.dictionaries(small_text, nasty_text, max_size=3)))
            edit = em.buffered("tool_call", ran, id=tid, name=name)
        if called:
            calls[-1] = (tid, name, "answered")  # no edit after its result (E168)
        images = draw(
            st.lists(
                st.one_of(
                    st.builds(lambda b: ImageRef(src=f"data:image/png;base64,{b}", media_type="image/png"), small_text),
                    st.just(ImageRef(src="https://example.invalid/a.png", media_type="image/png")),
                ),
                max_size=2,
            )
        )
        return edit + em.tool_result(tid, name, draw(nasty_text), images)
    if kind == "server_tool_result":
        return em.buffered(
            kind,
            json.dumps([{"type": "web_search_result", "url": draw(small_text)}]),
            id=f"srv-{n}",
            name="web_search_tool_result",
        )
    if kind == "meta_files":
        files = [{"file_id": f"f{i}", "filename": draw(small_text), "storage_location": "/tmp/x"} for i in range(2)]
        return em.buffered(kind, json.dumps({"files": files}))
    if kind == "error":
        return em.buffered(kind, json.dumps({"type": "overloaded_error", "message": draw(nasty_text)}))
    if kind == "meta_compaction":
        return em.buffered(kind, json.dumps({"trigger": "auto", "pre_tokens": draw(st.integers(0, 10**6))}))
    if kind == "meta_status":
        return em.buffered(kind, json.dumps(draw(_statuses)))
    raise AssertionError(kind)


#: Status objects (envelope-v1 §4.16): steps that may start twice, finish unstarted or stay
#: open (AG-UI's verifier must still accept the crossing, interop I4-g), progress, a later kind.
_statuses = st.one_of(
    st.builds(lambda n: {"kind": "step_start", "step": n}, st.integers(1, 3)),
    st.builds(lambda n: {"kind": "step_finish", "step": n, "usage": {"input_tokens": 1}}, st.integers(1, 3)),
    st.builds(lambda m: {"kind": "tool_progress", "message": m, "tool_use_id": "t", "name": "n"}, small_text),
    st.builds(lambda m: {"kind": "later", "message": m}, small_text),
)


def _cite(text: str, web: bool, title: str) -> CitationData:
    if web:
        return CitationData(
            cited_text=text, citation_type="web_search_result_location", url="https://x.invalid/", title=title
        )
    return CitationData(
        cited_text=text, citation_type="char_location", document_index=0, start_char_index=0, end_char_index=3
    )


_KINDS = (
    "text",
    "thinking",
    "tool_call",
    "server_tool_call",
    "tool_result",
    "server_tool_result",
    "meta_files",
    "error",
    "edited_call",
    "meta_status",
)


@st.composite
def runs(draw: st.DrawFn) -> Run:
    """One response of 1-3 agents, interleaved line by line; subagents name their parent."""
    n_agents = draw(st.integers(1, 3))
    bound = draw(st.sampled_from([160, 400, 2048]))
    agents = [f"agent-{i}" for i in range(n_agents)]
    rng = random.Random(draw(st.integers(0, 2**32)))
    tracks: list[list[bytes]] = []
    calls_of: dict[str, list[tuple[str, str, str]]] = {}
    for i, agent in enumerate(agents):
        em = Emitter(agent, bound)
        init: dict[str, Any] = {"format": "json", "user_query": draw(small_text), "agent_uuid": agent, "model": "m"}
        if i > 0:
            parent = agents[draw(st.integers(0, i - 1))]
            parent_calls = calls_of.get(parent) or [("call-none", "spawn_subagent", "")]
            init["parent_agent"] = parent
            init["parent_tool_use_id"] = parent_calls[0][0]
        calls: list[tuple[str, str, str]] = []
        blocks = [em.buffered("meta_init", json.dumps(init))]
        for n, kind in enumerate(draw(st.lists(st.sampled_from(_KINDS), max_size=6))):
            blocks.append(_block(draw, em, kind, n, calls))
        if draw(st.booleans()):
            blocks.append(_block(draw, em, "meta_compaction", 99, calls))
        calls_of[agent] = calls
        track = _interleave_within(blocks, rng)
        if draw(st.booleans()) and calls:
            pending = [{"tool_use_id": calls[-1][0], "name": calls[-1][1], "input": {}}]
            track += em.buffered("awaiting_frontend_tools", json.dumps(pending))
        else:
            final = {"stop_reason": "end_turn", "total_steps": 1, "cumulative_usage": {"input_tokens": 1}}
            track += em.buffered("meta_final", json.dumps(final))
        tracks.append(track)
    lines = [*_merge(tracks, rng), b"[DONE]"]
    problems = errors(lines)
    assert not problems, problems  # a generated run the validator refuses is a bug in the generator
    return Run(lines, n_agents)


def _types(block: list[bytes]) -> set[str]:
    return {json.loads(line)["type"] for line in block}


def _interleave_within(blocks: list[list[bytes]], rng: random.Random) -> list[bytes]:
    """An agent's blocks in order, two neighbours sometimes interleaved line by line.

    Only blocks of different keys that the spec lets overlap: never a text followed by
    its citations, never a compaction (spec §8.1-b), never meta_init (it opens the agent),
    never a tool_call and the result that answers it.
    """
    out: list[bytes] = []
    i = 0
    while i < len(blocks):
        a = blocks[i]
        if i + 1 < len(blocks) and i > 0 and rng.random() < 0.5:
            b = blocks[i + 1]
            ta, tb = _types(a), _types(b)
            # a call and the result after it (it answers the latest call) stay in order: a
            # tool_call after its own result is E168 (envelope-v1 §4.6-a)
            answers = "tool_call" in ta and "tool_result" in tb
            edited = any(len(t) > 1 and "tool_result" in t for t in (ta, tb))  # an edit stays before its result
            if (
                not (ta & tb)
                and not answers
                and not edited
                and not ({"citation", "meta_compaction", "tool_result_image"} & (ta | tb))
            ):
                out += _merge([a, b], rng)
                i += 2
                continue
        out += a
        i += 1
    return out


def _merge(tracks: list[list[bytes]], rng: random.Random) -> list[bytes]:
    """The tracks interleaved at random, each keeping its own order."""
    pos = [0] * len(tracks)
    out: list[bytes] = []
    while True:
        live = [k for k, t in enumerate(tracks) if pos[k] < len(t)]
        if not live:
            return out
        k = rng.choice(live)
        out.append(tracks[k][pos[k]])
        pos[k] += 1
