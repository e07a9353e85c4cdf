"""The golden cases: each builds a stream with the public ``Emitter`` and says what it rebuilds to.

Every JSON example of the seed (``fixtures/seed_examples/``, from its ``002_...`` document) is reproduced by one of
the ``seed_*`` cases, byte for byte; the examples that show chunking at a tiny size use
a bound equal to the length of their first line (spec §6.3: the first chunk is then
maximal). The other cases cover what the seed does not show: several agents
interleaved, escape-heavy payloads at a small bound, a frontend-tool pause.

Expected blocks come from ``streams.expected`` (written from spec §7.6), not from the
reconstructor. ``regen.py`` writes ``fixtures/golden/<case>/``; the tests only compare.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envelope import CitationData, Emitter, ImageRef
from streams import Spec, emit, expected

if TYPE_CHECKING:
    from collections.abc import Callable

A = "abc-123"


@dataclass
class Case:
    """A golden stream: its lines and the transcript it must rebuild to."""

    name: str
    about: str
    lines: list[bytes] = field(default_factory=list)
    agents: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    max_bytes: int = 2048

    def add(self, em: Emitter, spec: Spec) -> None:
        self.lines += emit(em, spec)
        self.agents.setdefault(em.agent, []).append(expected(spec))

    def blocks(self) -> dict[str, Any]:
        return {"done": True, "agents": {a: {"blocks": b} for a, b in self.agents.items()}}


def _one(name: str, about: str, spec: Spec, max_bytes: int = 2048) -> Case:
    case = Case(name, about, max_bytes=max_bytes)
    case.add(Emitter(A, max_bytes), spec)
    return case


def seed_meta_init_chunked() -> Case:
    payload = '{"format":"json","user_query":"Hello","model":"claude-sonnet-4-5"}'
    return _one("seed_meta_init_chunked", "seed §meta_init, chunked at 103 bytes", Spec("meta_init", (payload,)), 103)


def seed_thinking() -> Case:
    return _one(
        "seed_thinking", "seed §thinking", Spec("thinking", ("The user is asking about", " the color of grass."))
    )


def seed_text_with_citation() -> Case:
    spec = Spec(
        "text",
        ("Based on the document, ", "the grass is green."),
        citations=(
            CitationData(
                cited_text="The grass is green.",
                citation_type="char_location",
                document_index=0,
                document_title="My Document",
                start_char_index=0,
                end_char_index=20,
            ),
        ),
    )
    return _one("seed_text_with_citation", "seed §text, then seed §citation (one citation)", spec)


def seed_citations_multiple() -> Case:
    spec = Spec(
        "text",
        ("Two sources agree.",),
        citations=(
            CitationData(
                cited_text="First cited passage.",
                citation_type="char_location",
                document_index=0,
                start_char_index=0,
                end_char_index=20,
            ),
            CitationData(
                cited_text="Second cited passage.",
                citation_type="web_search_result_location",
                url="https://example.com",
                title="Example",
            ),
        ),
    )
    return _one("seed_citations_multiple", "seed §citation, multiple citations after a text block", spec)


_GREP = '{"pattern":"TODO","path":"src/"}'


def seed_tool_call() -> Case:
    return _one("seed_tool_call", "seed §tool_call", Spec("tool_call", (_GREP,), id="toolu_01", name="grep_search"))


def seed_tool_call_chunked() -> Case:
    spec = Spec("tool_call", (_GREP,), id="toolu_01", name="grep_search")
    return _one("seed_tool_call_chunked", "seed §tool_call, chunked at 126 bytes", spec, 126)


def seed_server_tool_call() -> Case:
    spec = Spec("server_tool_call", ('{"query":"latest ai news"}',), id="srvtoolu_01", name="web_search")
    return _one("seed_server_tool_call", "seed §server_tool_call", spec)


def seed_tool_result_text() -> Case:
    spec = Spec("tool_result", ("Found 4 matches in src/",), id="toolu_01", name="grep_search")
    return _one("seed_tool_result_text", "seed §tool_result, text only", spec)


def seed_tool_result_chunked() -> Case:
    payload = "Line 1: import os\nLine 2: import sys\nLine 3: from pathlib import Path"
    spec = Spec("tool_result", (payload,), id="toolu_02", name="read_file")
    return _one("seed_tool_result_chunked", "seed §tool_result, chunked at 136 bytes", spec, 136)


def seed_tool_result_multimodal() -> Case:
    spec = Spec(
        "tool_result",
        ("Screenshot captured successfully",),
        id="toolu_03",
        name="screenshot",
        images=(ImageRef(src="data:image/png;base64,iVBOR...", media_type="image/png"),),
    )
    return _one("seed_tool_result_multimodal", "seed §tool_result multimodal and §tool_result_image", spec)


def seed_server_tool_result_chunked() -> Case:
    spec = Spec("server_tool_result", ('[{"title":"Result 1"}]',), id="srvtoolu_01", name="web_search_tool_result")
    return _one("seed_server_tool_result_chunked", "seed §server_tool_result, chunked at 142 bytes", spec, 142)


def seed_awaiting_frontend_tools() -> Case:
    payload = '[{"tool_use_id":"toolu_01","name":"user_confirm","input":{"question":"Continue?"}}]'
    return _one(
        "seed_awaiting_frontend_tools", "seed §awaiting_frontend_tools", Spec("awaiting_frontend_tools", (payload,))
    )


_FILES = '{"files":[{"file_id":"file_01","filename":"report.pdf","storage_location":"https://..."}]}'


def seed_meta_files() -> Case:
    return _one("seed_meta_files", "seed §meta_files", Spec("meta_files", (_FILES,)))


def seed_meta_files_chunked() -> Case:
    return _one("seed_meta_files_chunked", "seed §meta_files, chunked at 141 bytes", Spec("meta_files", (_FILES,)), 141)


def seed_error() -> Case:
    return _one("seed_error", "seed §error", Spec("error", ('{"type":"api_error","message":"rate_limit"}',)))


def seed_meta_final() -> Case:
    payload = (
        '{"stop_reason":"end_turn","total_steps":3,"cost":null,'
        '"cumulative_usage":{"input_tokens":1000,"output_tokens":300}}'
    )
    return _one("seed_meta_final", "seed §meta_final", Spec("meta_final", (payload,)))


def seed_multi_agent() -> Case:
    """The seed's routing example, then the final markers it leaves out (ours)."""
    parent, child = Emitter("parent-uuid"), Emitter("child-uuid")
    case = Case("seed_multi_agent", "seed §Multi-Agent Routing, closed with final markers")
    case.lines = [
        *parent.streamed("text", "Let me search for that."),
        *child.streamed("thinking", "I need to find the file..."),
        *parent.streamed("text", " One moment."),
        *child.streamed("text", "Found the file at src/main.py"),
        parent.end("text"),
        child.end("thinking"),
        child.end("text"),
    ]
    case.agents = {
        "parent-uuid": [expected(Spec("text", ("Let me search for that. One moment.",)))],
        "child-uuid": [
            expected(Spec("thinking", ("I need to find the file...",))),
            expected(Spec("text", ("Found the file at src/main.py",))),
        ],
    }
    return case


def two_agents_lifecycle() -> Case:
    """A parent and a subagent, full lifecycle each, lines interleaved round-robin."""
    parent, child = "7d0f8a52-5a3e-4c0b-9a57-1f2b3c4d5e6f", "c41d9e0a-2b7f-4e8a-b1c3-0d9e8f7a6b5c"
    pe, ce = Emitter(parent), Emitter(child)
    p_specs = [
        Spec(
            "meta_init",
            (
                json.dumps(
                    {
                        "format": "json",
                        "user_query": "Summarise the repo",
                        "agent_uuid": parent,
                        "model": "claude-sonnet-4-5",
                    }
                ),
            ),
        ),
        Spec("thinking", ("I should delegate ", "the file search.")),
        Spec("tool_call", ('{"task":"find the entry point"}',), id="toolu_01", name="spawn_subagent"),
        Spec("tool_result", ("The entry point is src/main.py",), id="toolu_01", name="spawn_subagent"),
        Spec(
            "text",
            ("The entry point is ", "`src/main.py`."),
            citations=(
                CitationData(
                    cited_text="def main():",
                    citation_type="char_location",
                    document_index=0,
                    start_char_index=10,
                    end_char_index=21,
                ),
            ),
        ),
        Spec(
            "meta_files",
            ('{"files":[{"file_id":"file_9","filename":"summary.md","storage_location":"/files/file_9"}]}',),
        ),
        Spec(
            "meta_final",
            (
                '{"stop_reason":"end_turn","total_steps":2,"cost":null,"cumulative_usage":{"input_tokens":10,"output_tokens":5}}',
            ),
        ),
    ]
    c_specs = [
        Spec(
            "meta_init",
            (
                json.dumps(
                    {
                        "format": "json",
                        "user_query": "find the entry point",
                        "agent_uuid": child,
                        "model": "claude-haiku-4-5",
                    }
                ),
            ),
        ),
        Spec("server_tool_call", ('{"command":"ls src"}',), id="srvtoolu_01", name="bash_code_execution"),
        Spec(
            "server_tool_result",
            ('{"stdout":"main.py\\n","return_code":0}',),
            id="srvtoolu_01",
            name="bash_code_execution_tool_result",
        ),
        Spec(
            "tool_result",
            ("captured",),
            id="toolu_c1",
            name="screenshot",
            images=(ImageRef(src="https://example.com/a.png", media_type="image/png"),),
        ),
        Spec("text", ("Found ", "src/main.py")),
        Spec(
            "meta_final",
            (
                '{"stop_reason":"end_turn","total_steps":1,"cost":null,"cumulative_usage":{"input_tokens":3,"output_tokens":2}}',
            ),
        ),
    ]
    p_lines = [line for s in p_specs for line in emit(pe, s)]
    c_lines = [line for s in c_specs for line in emit(ce, s)]
    case = Case("two_agents_lifecycle", "parent and subagent, full lifecycle, round-robin interleaving")
    while p_lines or c_lines:
        if p_lines:
            case.lines.append(p_lines.pop(0))
        if c_lines:
            case.lines.append(c_lines.pop(0))
    case.agents = {parent: [expected(s) for s in p_specs], child: [expected(s) for s in c_specs]}
    return case


def escape_heavy_small_bound() -> Case:
    """Quotes, backslashes, controls, separators and astral characters at a 112-byte bound."""
    nasty = 'quote " backslash \\ nl \n tab \t nul \x00 bell \x07 sep \u2028\u2029 cjk 中文 emoji 😀🎉 \\u0041'
    em = Emitter(A, 112)
    case = Case(
        "escape_heavy_small_bound", "escape-heavy payloads of every chunkable kind at a 112-byte bound", max_bytes=112
    )
    case.add(em, Spec("thinking", (nasty, nasty[::-1])))
    case.add(em, Spec("text", (nasty * 2,)))
    case.add(em, Spec("tool_call", (json.dumps({"q": nasty}, ensure_ascii=False),), id="t1", name="search"))
    case.add(em, Spec("tool_result", (nasty,), id="t1", name="search"))
    case.add(em, Spec("error", (json.dumps({"type": "api_error", "message": nasty}),)))
    return case


def frontend_pause() -> Case:
    """A step that pauses for a frontend tool after a backend tool ran (seed 000's flow)."""
    em = Emitter(A)
    case = Case("frontend_pause", "backend tool result, then awaiting_frontend_tools; the response ends with [DONE]")
    case.add(em, Spec("thinking", ("Check the weather, then ask the user.",)))
    case.add(em, Spec("tool_call", ('{"city":"Paris"}',), id="toolu_w", name="get_weather"))
    case.add(em, Spec("tool_call", ('{"question":"Book the trip?"}',), id="toolu_c", name="user_confirm"))
    case.add(em, Spec("tool_result", ('{"temp_c":21}',), id="toolu_w", name="get_weather"))
    case.add(
        em,
        Spec(
            "awaiting_frontend_tools",
            ('[{"tool_use_id":"toolu_c","name":"user_confirm","input":{"question":"Book the trip?"}}]',),
        ),
    )
    return case


CASES: list[Callable[[], Case]] = [
    seed_meta_init_chunked,
    seed_thinking,
    seed_text_with_citation,
    seed_citations_multiple,
    seed_tool_call,
    seed_tool_call_chunked,
    seed_server_tool_call,
    seed_tool_result_text,
    seed_tool_result_chunked,
    seed_tool_result_multimodal,
    seed_server_tool_result_chunked,
    seed_awaiting_frontend_tools,
    seed_meta_files,
    seed_meta_files_chunked,
    seed_error,
    seed_meta_final,
    seed_multi_agent,
    two_agents_lifecycle,
    escape_heavy_small_bound,
    frontend_pause,
]
