"""Everything the ``Emitter`` and ``chunk`` write for a generated corpus, as one digest per case.

``python tests/speedups/emitter_corpus.py`` prints ``{case: sha256}`` (one digest per group of
cases) as JSON for the ``envelope`` it imports. ``emitter_golden.json`` beside it holds the digests the emitter
gave before it was compiled and rewritten for speed (issue 31): ``test_emitter_pin.py``
checks that both builds still give exactly those bytes, so a faster emitter cannot be a
different one. Regenerate the golden only for a change of output that the spec asks for,
and say so in the commit.

Cases (fixed seed, public API only; new cases go last, so that the earlier ones keep
their random draws): streamed deltas of every shape the chunker must cut
(ASCII, quotes and backslash runs, control characters, U+2028/U+2029, CJK, emoji, mixed)
at lengths around each bound; the final markers; every buffered type, with and without
``id``/``name``, empty and long, at bounds from the smallest workable to the default and
below it (oversize reports); the ``seed`` profile; multimodal tool results; citations;
``chunk`` of each envelope type; payloads over 8,192 characters (their digests too were
made by the emitter before issue 31); and the errors (lone surrogates, strict oversize) with
their messages.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import envelope
from envelope import CitationData, Emitter, ImageRef

#: Text alphabets the chunker treats differently (escaped, multi-byte, plain).
_ALPHABETS: dict[str, str] = {
    "ascii": "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ 0123456789.,;:!?-_",
    "escapes": '"\\\\\\"\n\t\r\b\f/',
    "control": "".join(chr(c) for c in range(32)) + "\x7f",
    "separators": "\u2028\u2029a",
    "cjk": "漢字仮名交じり文한국어",
    "emoji": "\U0001f600\U0001f680\U0001f9e0\U00010348",
    "mixed": 'a"\\\n\x01é漢\U0001f600\u2028 ',
}
_AGENTS = ("abc-123", "0f8fad5b-d9cb-469f-a165-70867728950e", 'a"g\\ent\n漢')
_BOUNDS = (2048, 512, 200, 97, 80, 64)
_BUFFERED_PLAIN = ("meta_init", "meta_final", "meta_files", "meta_compaction", "error", "awaiting_frontend_tools")
_BUFFERED_ID = ("tool_call", "server_tool_call", "tool_result", "server_tool_result")
#: Types whose payload is JSON (spec §7.5): a strict emitter refuses other text (issue 25.5),
#: so under ``strict`` the corpus gives them the text as a JSON string.
_JSON_TYPES = frozenset(_BUFFERED_PLAIN) | {"tool_call", "server_tool_call"}


def _text(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _outcome(call: Any, *args: Any, **kwargs: Any) -> list[Any]:
    """What ``call(*args, **kwargs)`` gives: its lines (as text), or its error's type and message."""
    try:
        out = call(*args, **kwargs)
    except envelope.EnvelopeError as exc:
        return ["error", type(exc).__name__, str(exc)]
    if isinstance(out, bytes):
        out = [out]
    return [line.decode("utf-8") for line in out]


def _reports(em: Emitter) -> list[Any]:
    return [[r.type, r.agent, r.size, r.max_bytes, r.reason] for r in em.oversize]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def cases() -> dict[str, list[Any]]:
    """``{case: outputs}``: what the emitter gives for each case of the corpus.

    The helpers below fill ``out`` in this order with one shared ``rng``: the order of
    the cases and of the random draws is what the golden digests were made from.
    """
    rng = random.Random(31)
    out: dict[str, list[Any]] = {}
    for agent_no, agent in enumerate(_AGENTS):
        for bound in _BOUNDS:
            for strict in (False, True):
                _emitter_cases(rng, out, agent_no, agent, bound, strict)
            _seed_profile_cases(rng, out, agent_no, agent, bound)
    _chunk_cases(rng, out)
    _long_cases(rng, out)
    return out


def _payload_cases(rng: random.Random, out: dict[str, list[Any]], em: Emitter, tag: str, strict: bool) -> int:
    """Streamed and buffered payloads of every alphabet at lengths around the bound; the last length."""
    bound = em.max_bytes
    n = 0
    for name, alphabet in _ALPHABETS.items():
        lengths = sorted({0, 1, 2, 5, 19, 20, bound // 6, bound // 2, bound - 60, bound, 3 * bound + 7})
        for n in (x for x in lengths if x >= 0):
            text = _text(rng, alphabet, n)
            for kind in ("text", "thinking"):
                out[f"{tag} streamed {kind} {name} {n}"] = _outcome(em.streamed, kind, text)
            as_json = json.dumps(text, ensure_ascii=False)
            for kind in _BUFFERED_PLAIN:
                payload = as_json if strict and kind in _JSON_TYPES else text
                out[f"{tag} buffered {kind} {name} {n}"] = _outcome(em.buffered, kind, payload)
            for kind in _BUFFERED_ID:
                payload = as_json if strict and kind in _JSON_TYPES else text
                out[f"{tag} buffered {kind} {name} {n}"] = _outcome(
                    em.buffered, kind, payload, id="toolu_01" + "x" * (n % 7), name="read_file"
                )
    return n


def _emitter_cases(
    rng: random.Random, out: dict[str, list[Any]], agent_no: int, agent: str, bound: int, strict: bool
) -> None:
    """One default-profile emitter: payloads, markers, oversize, images, citations, surrogates, reports."""
    em = Emitter(agent, bound, strict=strict)
    tag = f"agent{agent_no} bound{bound} strict{int(strict)}"
    n = _payload_cases(rng, out, em, tag, strict)
    for kind in ("text", "thinking"):
        out[f"{tag} end {kind}"] = _outcome(em.end, kind)
    big_id = "i" * (bound + 5)
    out[f"{tag} oversize id"] = _outcome(em.buffered, "tool_call", "{}", id=big_id, name="n")
    images = [ImageRef(src="data:image/png;base64," + "A" * (bound // 3 * k), media_type="image/png") for k in (1, 4)]
    payload = _text(rng, _ALPHABETS["mixed"], bound)
    out[f"{tag} tool_result images"] = _outcome(em.tool_result, "toolu_9", "shot", payload, images)
    out[f"{tag} tool_result no images"] = _outcome(em.tool_result, "toolu_9", "shot", payload)
    cites = [
        CitationData(
            cited_text=_text(rng, _ALPHABETS["mixed"], 30),
            citation_type="char_location",
            document_index=0,
            start_char_index=3,
            end_char_index=33,
        ),
        CitationData(
            cited_text="x" * bound, citation_type="web_search_result_location", url="https://e.x/a", title="T"
        ),
    ]
    out[f"{tag} citations"] = _outcome(em.citations, cites)
    out[f"{tag} citations none"] = _outcome(em.citations, [])
    out[f"{tag} surrogate streamed"] = _outcome(em.streamed, "text", "ok\ud800ok")
    out[f"{tag} surrogate buffered"] = _outcome(em.buffered, "error", "x" * n + "\udfff")
    out[f"{tag} surrogate short"] = _outcome(em.buffered, "tool_result", "\ud83d", id="i", name="n")
    out[f"{tag} reports"] = _reports(em)


def _seed_profile_cases(rng: random.Random, out: dict[str, list[Any]], agent_no: int, agent: str, bound: int) -> None:
    """The ``seed`` profile: control types whole, the rest bounded."""
    seed = Emitter(agent, bound, profile="seed")
    for kind in _BUFFERED_PLAIN:
        text = _text(rng, _ALPHABETS["mixed"], 2 * bound)
        out[f"agent{agent_no} bound{bound} seed {kind}"] = _outcome(seed.buffered, kind, text)
    text = _text(rng, _ALPHABETS["mixed"], 2 * bound)
    out[f"agent{agent_no} bound{bound} seed tool_call"] = _outcome(seed.buffered, "tool_call", text, id="t", name="n")
    out[f"agent{agent_no} bound{bound} seed reports"] = _reports(seed)


def _chunk_cases(rng: random.Random, out: dict[str, list[Any]]) -> None:
    """``chunk`` of each envelope type at each bound, reporting and strict."""
    for bound in _BOUNDS:
        text = _text(rng, _ALPHABETS["mixed"], 3 * bound)
        envs: list[envelope.Envelope] = [
            envelope.Text(agent="a", final=True, delta=text),
            envelope.Thinking(agent="a", final=False, delta=text),
            envelope.ToolCall(agent="a", final=True, id="t", name="n", delta=text),
            envelope.ToolResult(agent="a", final=False, id="t", name="n", delta=text),
            envelope.MetaFinal(agent="a", final=True, delta=text),
            envelope.ToolResultImage(
                agent="a", final=False, id="t", name="n", delta="", src="x" * bound, media_type="image/png"
            ),
            envelope.Citation(agent="a", final=True, delta=text, citation_type="page_location", start_page_number=1),
        ]
        for i, env in enumerate(envs):
            reported: list[Any] = []
            out[f"chunk {bound} {i}"] = _outcome(envelope.chunk, env, bound, on_oversize=reported.append)
            out[f"chunk {bound} {i} reports"] = [[r.type, r.size, r.reason] for r in reported]
            out[f"chunk {bound} {i} strict"] = _outcome(envelope.chunk, env, bound, strict=True)


def _long_cases(rng: random.Random, out: dict[str, list[Any]]) -> None:
    """Long payloads (over 8192 characters), at lengths around multiples of 8192."""
    for bound in (2048, 200, 97):
        em = Emitter(_AGENTS[1], bound)
        for name, alphabet in _ALPHABETS.items():
            for n in (8191, 8192, 8193, 16385, 20000 + bound):
                text = _text(rng, alphabet, n)
                tag = f"long bound{bound}"
                out[f"{tag} tool_result {name} {n}"] = _outcome(em.buffered, "tool_result", text, id="t", name="n")
                out[f"{tag} error {name} {n}"] = _outcome(em.buffered, "error", text)
                out[f"{tag} images {name} {n}"] = _outcome(
                    em.tool_result, "t", "n", text, [ImageRef(src="data:,", media_type="image/png")]
                )
        out[f"long bound{bound} surrogate"] = _outcome(em.buffered, "error", "a" * 20000 + "\ud800")


def _group(name: str) -> str:
    """A case's group: its name without the trailing alphabet and length (``... streamed text``)."""
    words = name.split()
    while words and (words[-1].isdigit() or words[-1] in _ALPHABETS):
        words.pop()
    return " ".join(words)


def digests() -> dict[str, str]:
    """``{group: sha256}``: the cases of ``cases()`` digested per group, in case order."""
    groups: dict[str, list[Any]] = {}
    for name, value in cases().items():
        groups.setdefault(_group(name), []).append([name, value])
    return {group: _digest(values) for group, values in groups.items()}


if __name__ == "__main__":
    print(json.dumps(digests(), indent=0, sort_keys=True))
