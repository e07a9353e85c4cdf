"""Held secrets never reach a stream, a store or a log: tool results, tool inputs, model text (spec SC).

The gap this closes: ``secrets=`` (and the held key and environment values) redacted error
texts only; a backend tool's result holding a held secret, a tool input the model wrote
with it, or model text echoing it went out as is. Every response is validated strictly by
the autouse tee (tests/agent_ref_validating.py); each run here also searches the stream,
the SQLite file, the run log and the ``agent_ref`` log for the secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from agent_ref import (
    Agent,
    ReplayModel,
    ScriptedModel,
    SQLiteStore,
    SummarizingCompactor,
    Tool,
    ToolContext,
    default_tools,
    tool,
)
from agent_ref.policy import scrub
from agent_ref.policy.redact import MARKER, HeldStream, Redactor, touches_marker
from agent_ref.tools.context import MAX_PROGRESS_CHARS
from agent_ref.tools.core import ToolCallRequest, outcome
from agent_ref_support import blocks, drop, fast_retry, run, split_responses
from envelope import Emitter
from validating import assert_valid

SERVER_TOKEN = "srv-Tok3n-9f8e7d6c5b4a"
OTHER = "ghx_Q2w3E4r5T6y7"
SEEDS = (1, 2, 3)


@pytest.fixture(autouse=True)
def nothing_held(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no held secret (they are process-wide) and no secret in the environment."""
    monkeypatch.setattr(scrub, "_HELD", set())
    for name in scrub.SECRET_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def _everywhere(store_path: Path, lines: list[bytes], log_text: str) -> list[tuple[str, bytes]]:
    """Every place a secret could end up: the stream, the SQLite file (all tables), the log."""
    with sqlite3.connect(store_path) as db:
        tables = [row[0] for row in db.execute("select name from sqlite_master where type = 'table'")]
        dump = "\n".join(
            str(row) for t in tables for row in db.execute(f'select * from "{t}"')
        )  # names read from the file itself
    return [("stream", b"".join(lines)), ("store", dump.encode()), ("log", log_text.encode())]


def _assert_nowhere(secret: str, places: list[tuple[str, bytes]]) -> None:
    for where, data in places:
        assert secret.encode() not in data, where


# ---------------------------------------------------------------------- HeldStream


_ALPHABET = "ab-x[]"


@st.composite
def _cases(draw: st.DrawFn) -> tuple[list[str], str, list[str]]:
    """Secrets, a text holding them at any positions (overlapping too), and any split of it into pieces."""
    secrets = draw(st.lists(st.text("abx-", min_size=6, max_size=10), min_size=1, max_size=3, unique=True))
    text = draw(st.text(_ALPHABET, max_size=40))
    for secret in draw(st.lists(st.sampled_from(secrets), max_size=4)):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + secret + text[at:]
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return secrets, text, pieces


@pytest.mark.parametrize("fixed", SEEDS)
def test_SC2_a_any_split_gives_the_whole_text_redacted(fixed: int) -> None:
    """Fed in any pieces, the output joined == scrub_held(whole); at most longest-1 held back [SC2-a]."""

    @seed(fixed)
    @settings(max_examples=400, deadline=None)
    @given(_cases())
    def check(case: tuple[list[str], str, list[str]]) -> None:
        secrets, text, pieces = case
        stream = HeldStream(secrets)
        longest = max(map(len, secrets))
        out: list[str] = []
        fed = 0
        for piece in pieces:
            out.append(stream.feed(piece))
            fed += len(piece)
            assert stream.held_back <= longest - 1
            assert not any(s in "".join(out) for s in secrets)
        out.append(stream.end())
        assert stream.held_back == 0
        joined = "".join(out)
        assert joined == Redactor(secrets, common_forms=False).scrub_held(text)
        assert not any(s in joined for s in secrets)

    check()


def test_SC2_a_a_marker_is_sent_as_soon_as_the_secret_is_complete() -> None:
    """The secret's last character sends the marker; the text before it went out already [SC2-a]."""
    stream = HeldStream([SERVER_TOKEN])
    assert stream.feed("the token is ") == "the token is "
    assert stream.feed(SERVER_TOKEN[:5]) == ""
    assert stream.held_back == 5
    assert stream.feed(SERVER_TOKEN[5:]) == MARKER
    assert stream.feed(" ok") == " ok"
    assert stream.end() == ""


@pytest.mark.parametrize("secret", ["]abcdefg", "acted]-zz", "zz-[reda", "[redacted]-x", "redacted"])
def test_SC2_b_a_secret_the_marker_could_complete_holds_its_block_whole(secret: str) -> None:
    """Such a secret makes the block wait for its end, then it is redacted exactly as the whole text [SC2-b]."""
    assert touches_marker(secret)
    text = f"a {secret}{secret[:3]} [redacted] {secret[2:]} end"
    stream = HeldStream([secret])
    out = [stream.feed(text[i : i + 3]) for i in range(0, len(text), 3)]
    assert "".join(out) == ""
    assert stream.end() == Redactor([secret], common_forms=False).scrub_held(text)
    assert not touches_marker(SERVER_TOKEN)


# ---------------------------------------------------------------------- scripted runs


def _leaky_tools(seen: list[dict[str, Any]]) -> list[Tool]:
    @tool(name="leak")
    def leak(what: str) -> dict[str, Any]:
        """Returns a record that holds the server token."""
        return {"asked": what, "headers": {"Authorization": f"Bearer {SERVER_TOKEN}"}, "note": f"t={SERVER_TOKEN}"}

    @tool(name="echo")
    def echo(x: str) -> str:
        """Says back what it was given."""
        seen.append({"x": x})
        return f"got {x}"

    return [leak, echo]


def _escaped(value: str) -> str:
    """``value`` as a JSON string body with every character escaped: the prompt does not hold it."""
    return "".join(f"\\u{ord(c):04x}" for c in value)


def test_SC1_a_b_a_secret_in_a_tool_result_and_a_tool_input_reaches_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool returning the token and a call the model writes with it: redacted in stream, store, log [SC1-a] [SC1-b].

    The prompt holds the token only as JSON escapes, so it is the model that writes it
    into the ``echo`` input; the tool then runs with the redacted input (SC1-b).
    """
    seen: list[dict[str, Any]] = []
    path = tmp_path / "agent.db"
    lines: list[bytes] = []
    agent = Agent(
        ScriptedModel(), tools=_leaky_tools(seen), store=SQLiteStore(path), retry=fast_retry(), secrets=[SERVER_TOKEN]
    )
    prompt = f'call leak with {{"what": "headers"}} and call echo with {{"x": "tok {_escaped(SERVER_TOKEN)}"}}'
    assert SERVER_TOKEN not in prompt
    with caplog.at_level(logging.DEBUG, logger="agent_ref"):
        result = run(agent.run(prompt, lines.append))
    assert result.stop_reason == "end_turn"
    got = blocks(lines)
    calls = {b["name"]: b["input"] for b in got if b["type"] == "tool_call"}
    assert calls["echo"] == {"x": f"tok {MARKER}"}
    assert seen == [{"x": f"tok {MARKER}"}]  # the tool ran with what the history holds
    results = [b["content"] for b in got if b["type"] == "tool_result"]
    assert json.loads(results[0]) == {
        "asked": "headers",
        "headers": {"Authorization": f"Bearer {MARKER}"},
        "note": f"t={MARKER}",
    }
    answer = "".join(b["content"] for b in got if b["type"] == "text")
    assert f"t={MARKER}" in answer  # what the model saw and quoted back
    _assert_nowhere(SERVER_TOKEN, _everywhere(path, lines, caplog.text))


def test_SC1_a_a_tool_progress_message_is_redacted_before_it_is_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A progress report naming the token (and one cut inside it) goes out with the marker [SC1-a]."""

    @tool(name="report")
    async def report(what: str, ctx: ToolContext) -> str:
        """Reports progress with the token in it."""
        ctx.progress(f"{what}: using {SERVER_TOKEN}")
        await asyncio.sleep(0)
        ctx.progress("x" * (MAX_PROGRESS_CHARS - 5) + SERVER_TOKEN)  # the cut falls inside it
        return "done"

    path = tmp_path / "a.db"
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), tools=[report], store=SQLiteStore(path), retry=fast_retry(), secrets=[SERVER_TOKEN])
    with caplog.at_level(logging.DEBUG, logger="agent_ref"):
        run(agent.run('call report with {"what": "sync"}', lines.append))
    sent = [json.loads(line) for line in lines if line != b"[DONE]"]
    statuses = [json.loads(env["delta"]) for env in sent if env["type"] == "meta_status"]
    notes = [s["message"] for s in statuses if s["kind"] == "tool_progress"]
    assert notes, "no progress was sent"
    assert all(note in (f"sync: using {MARKER}", "x" * (MAX_PROGRESS_CHARS - 5) + MARKER[:5]) for note in notes), notes
    _assert_nowhere(SERVER_TOKEN, _everywhere(path, lines, caplog.text))


def test_SC1_a_a_subagent_result_passes_the_same_redaction() -> None:
    """A result that is not a tool's own (a subagent's answer) goes through the same outcome path [SC1-a]."""
    scrub.hold([SERVER_TOKEN])
    done = outcome(Emitter("a"), ToolCallRequest(id="t1", name="sub", input={}), f"found {SERVER_TOKEN}!")
    assert done.text == f"found {MARKER}!"
    assert SERVER_TOKEN not in json.dumps(done.block)
    assert all(SERVER_TOKEN.encode() not in line for line in done.lines)


def test_SC1_f_common_forms_in_data_stay_only_held_values_go() -> None:
    """A result's key=value and Bearer forms are data: only the held value is replaced [SC1-f]."""
    scrub.hold([SERVER_TOKEN])
    data = f'password=hunter2hunter2 "api_key": "k-123456789abc" Bearer abcdef123456 cache?key=photos/cat.jpg {SERVER_TOKEN}'
    done = outcome(Emitter("a"), ToolCallRequest(id="t1", name="t", input={}), data)
    assert done.text == data.replace(SERVER_TOKEN, MARKER)


def test_SC1_d_a_frontend_result_with_the_secret_is_stored_redacted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A client's result for a frontend call, quoting the server token: stream and store get the marker [SC1-d]."""
    path = tmp_path / "agent.db"
    lines: list[bytes] = []
    agent = Agent(
        ScriptedModel(), tools=default_tools(), store=SQLiteStore(path), retry=fast_retry(), secrets=[SERVER_TOKEN]
    )
    with caplog.at_level(logging.DEBUG, logger="agent_ref"):
        first = run(agent.run("Please confirm the order", lines.append))
        assert first.stop_reason == "awaiting_frontend_tools"
        (pending,) = first.pending_frontend_tools
        results = [{"tool_use_id": pending.tool_use_id, "content": f"yes, token {SERVER_TOKEN}"}]
        run(agent.continue_with_tool_results(results, lines.append))
    second = split_responses(lines)[1]
    (result,) = [b for b in blocks(second) if b["type"] == "tool_result"]
    assert result["content"] == f"yes, token {MARKER}"
    _assert_nowhere(SERVER_TOKEN, _everywhere(path, lines, caplog.text))


# ---------------------------------------------------------------------- replayed streams, any split


def _message(content_events: list[dict[str, Any]], stop: str) -> list[dict[str, Any]]:
    start: dict[str, Any] = {"id": "m1", "type": "message", "role": "assistant", "model": "replay-x", "content": []}
    start |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
    return [
        {"type": "message_start", "message": start},
        *content_events,
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]


def _block(index: int, block: dict[str, Any], kind: str, field: str, pieces: list[str]) -> list[dict[str, Any]]:
    deltas = [
        {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: piece}} for piece in pieces
    ]
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        *deltas,
        {"type": "content_block_stop", "index": index},
    ]


def _pieces(text: str, cuts: list[int]) -> list[str]:
    ends = sorted({min(c, len(text)) for c in cuts})
    return [text[a:b] for a, b in zip([0, *ends], [*ends, len(text)], strict=True)]


_WORDS = st.text("abc d\n", max_size=30)


@st.composite
def _turns(draw: st.DrawFn) -> tuple[str, str, str, list[int], list[int], list[int]]:
    """Thinking, text and a tool input holding the secrets anywhere, and cut points for each."""

    def holding() -> str:
        parts = draw(st.lists(st.one_of(_WORDS, st.sampled_from([SERVER_TOKEN, OTHER])), max_size=6))
        return "x" + "".join(parts)

    thinking, text, value = holding(), holding(), holding()
    arguments = json.dumps({"expression": value})
    cuts = [draw(st.lists(st.integers(0, 200), max_size=10)) for _ in range(3)]
    return thinking, text, arguments, cuts[0], cuts[1], cuts[2]


@pytest.mark.parametrize("fixed", SEEDS)
def test_SC2_a_agent_runs_split_any_way_publish_and_store_no_secret(
    fixed: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Real runs of replayed streams, the secrets anywhere in thinking, text and a tool input, deltas cut anywhere.

    The streamed text joined equals the whole text redacted; no line, log record or stored
    byte holds a secret; every line keeps the byte bound (the tee validates each response
    strictly, and ``max_bytes`` is small so long pieces are chunked) [SC2-a] [SC1-b] [SC1-c].
    """
    redactor = Redactor([SERVER_TOKEN, OTHER], common_forms=False)

    @seed(fixed)
    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_turns())
    def check(turn: tuple[str, str, str, list[int], list[int], list[int]]) -> None:
        thinking, text, arguments, cut_thinking, cut_text, cut_input = turn
        call = [
            *_block(0, {"type": "thinking", "thinking": "", "signature": ""}, "thinking_delta", "thinking",
                    _pieces(thinking, cut_thinking)),
            *_block(1, {"type": "text", "text": ""}, "text_delta", "text", _pieces(text, cut_text)),
            *_block(2, {"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": {}}, "input_json_delta",
                    "partial_json", _pieces(arguments, cut_input)),
        ]  # fmt: skip
        answer = _block(0, {"type": "text", "text": ""}, "text_delta", "text", _pieces(text, cut_text[::-1]))
        model = ReplayModel([_message(call, "tool_use"), _message(answer, "end_turn")])

        @tool(name="calculator")
        def calculator(expression: str) -> str:
            """Says back the expression."""
            return expression

        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "a.db"
            lines: list[bytes] = []
            agent = Agent(
                model,
                tools=[calculator],
                store=SQLiteStore(path),
                retry=fast_retry(),
                secrets=[SERVER_TOKEN, OTHER],
                max_bytes=256,
            )
            caplog.clear()
            result = run(agent.run("go", lines.append))
            assert result.stop_reason == "end_turn"
            assert_valid(lines, max_bytes=256)
            got = blocks(lines)
            streamed = {b["type"]: b for b in got if b["type"] in ("thinking", "tool_call")}
            texts = [b["content"] for b in got if b["type"] == "text"]
            assert texts == [redactor.scrub_held(text)] * 2
            assert streamed["thinking"]["content"] == redactor.scrub_held(thinking)
            sent = streamed["tool_call"]["input"]
            assert sent == {"expression": redactor.scrub_held(json.loads(arguments)["expression"])}
            places = _everywhere(path, lines, caplog.text)
        for secret in (SERVER_TOKEN, OTHER):
            _assert_nowhere(secret, places)

    with caplog.at_level(logging.DEBUG, logger="agent_ref"):
        check()


def test_SC1_e_the_prompt_is_kept_as_the_client_sent_it(tmp_path: Path) -> None:
    """The prompt is the client's own words: stored as sent, though it holds a held value [SC1-e]."""
    agent = Agent(ScriptedModel(), store=SQLiteStore(tmp_path / "a.db"), retry=fast_retry(), secrets=[SERVER_TOKEN])
    lines: list[bytes] = []
    result = run(agent.run(f"hello, my token is {SERVER_TOKEN}", lines.append))
    assert result.conversation_history[0]["content"][0]["text"] == f"hello, my token is {SERVER_TOKEN}"
    holding = [json.loads(line)["type"] for line in lines if SERVER_TOKEN.encode() in line]
    assert holding == ["meta_init"]  # its user_query: the prompt as sent; the greeting does not quote it


def test_SC1_c_a_summary_that_names_the_secret_enters_the_context_redacted(tmp_path: Path) -> None:
    """The compaction summary (model text not streamed) becomes the stored context: redacted too [SC1-c]."""
    store = SQLiteStore(tmp_path / "a.db")
    agent = Agent(
        ScriptedModel(), store=store, compactor=SummarizingCompactor(), retry=fast_retry(), secrets=[SERVER_TOKEN]
    )
    run(agent.run(f"hello, my token is {SERVER_TOKEN}", drop))
    agent.compact()
    lines: list[bytes] = []
    run(agent.run("hello again", lines.append))
    state = run(store.load(agent.agent_uuid))
    assert state is not None
    summary = state.messages[0]["content"][0]["text"]
    assert summary.startswith("<summary>")
    assert f"my token is {MARKER}" in summary
    assert SERVER_TOKEN not in json.dumps(state.messages)


def _tool_events(partials: list[str]) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}}
    return _block(0, block, "input_json_delta", "partial_json", partials)


@pytest.mark.parametrize(
    "written",
    [
        json.dumps({"x": f"a {SERVER_TOKEN} b"}),
        json.dumps({"x": f"a {SERVER_TOKEN} b", SERVER_TOKEN: 1}),
        '{"x": "a ' + _escaped(SERVER_TOKEN) + ' b"}',
        '{"x": "a ' + SERVER_TOKEN[:4] + _escaped(SERVER_TOKEN[4:]) + ' b"}',
    ],
    ids=["raw", "as-a-key", "all-escaped", "partly-escaped"],
)
def test_SC2_c_a_tool_input_is_gathered_and_redacted_at_its_stop(written: str) -> None:
    """Input deltas are held to the stop, then given as one, redacted even through escapes [SC2-c] [SC1-b]."""
    scrubber = scrub.EventScrubber([SERVER_TOKEN])
    start, *deltas, stop = _tool_events([written[i : i + 7] for i in range(0, len(written), 7)])
    assert scrubber.feed(start) == [start]
    assert all(scrubber.feed(delta) == [] for delta in deltas)
    given, same = scrubber.feed(stop)
    assert same is stop
    text = given["delta"]["partial_json"]
    assert SERVER_TOKEN not in json.dumps(json.loads(text))
    assert json.loads(text)["x"] == f"a {MARKER} b"


def test_SC1_b_a_cut_input_with_escapes_is_redacted_and_means_the_same() -> None:
    """A call cut by max_tokens (no closing brace) hides no value behind escapes; other escapes stay [SC1-b]."""
    scrubber = scrub.EventScrubber([SERVER_TOKEN])
    written = '{"q": "say \\"hi\\" \\\\u0041 \\u00e9", "x": "a ' + _escaped(SERVER_TOKEN) + " b"
    start, delta, stop = _tool_events([written])
    scrubber.feed(start)
    scrubber.feed(delta)
    given, _ = scrubber.feed(stop)
    text = given["delta"]["partial_json"]
    assert text == '{"q": "say \\"hi\\" \\\\u0041 \u00e9", "x": "a ' + MARKER + " b"
    assert json.loads(text + '"}')["q"] == json.loads(written + '"}')["q"]


# ---------------------------------------------------------------------- the fast path


def test_SC4_a_nothing_held_means_no_scrubber_and_events_pass_untouched() -> None:
    """With nothing held, the model call has no scrubber; with secrets, an event without one passes as is [SC4-a]."""
    assert scrub.event_scrubber() is None
    scrub.hold([SERVER_TOKEN])
    scrubber = scrub.event_scrubber()
    assert scrubber is not None
    start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "plain words here"}}
    assert scrubber.feed(start) == [start]
    (same,) = scrubber.feed(delta)
    assert same is delta
