"""Corpus replays through the agent, the stores, and the CLI (spec/agent-ref.md §4, §8, §9)."""

from __future__ import annotations

import asyncio
import warnings
from typing import TYPE_CHECKING

import pytest

from agent_ref import Agent, ConflictError, MemoryStore, ReplayModel, SQLiteStore, default_tools
from agent_ref.store.state import AgentState
from agent_ref_support import CALCULATOR_RUN_TYPES, blocks, drop, fast_retry, meta, run, sse_lines, types
from cli_support import module_cli as _cli
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


def test_spec_8_corpus_calculator_run_replays_three_calls(corpus: Path) -> None:
    """The corpus calculator run through the agent [R8.2-a] [R5.3-a]."""
    model = ReplayModel.from_file(corpus / "anthropic_events_0.json")
    lines: list[bytes] = []
    with warnings.catch_warnings():
        # The recording's model (claude-sonnet-4-5-20250929) is on the SDK's deprecation list;
        # the SDK warns when a request names it, and pytest turns warnings into errors.
        warnings.simplefilter("ignore", DeprecationWarning)
        result = run(Agent(model, tools=default_tools(), retry=fast_retry()).run("What is 5 + (10 * 2)?", lines.append))
    assert result.stop_reason == "end_turn"
    assert result.steps == 3
    rebuilt = blocks(lines)
    calls = [(b["name"], b["input"]) for b in rebuilt if b["type"] == "tool_call"]
    assert calls == [("multiply", {"a": 10, "b": 2}), ("add", {"a": 5, "b": 20})]
    assert [b["content"] for b in rebuilt if b["type"] == "tool_result"] == ["20", "25"]
    assert result.final_text.startswith("The answer is **25**.")
    assert meta(lines, "meta_final")["cumulative_usage"]["input_tokens"] == 984 + 1123 + 1204
    cost = meta(lines, "meta_final")["cost"]
    assert cost["total_usd"] == pytest.approx(((984 + 1123 + 1204) * 3 + (126 + 68 + 39) * 15) / 1e6)
    # the requests sent back the tool results in order
    sent = model.server.requests
    assert len(sent) == 3
    assert sent[1]["messages"][-1]["content"][0]["content"][0]["text"] == "20"


def test_spec_8_corpus_server_tools_and_files(corpus: Path) -> None:
    """Server tools and produced files from the corpus [R5.6-a] [R5.6-b] [R8.2-a]."""
    model = ReplayModel.from_file(corpus / "anthropic_events_1.json")
    lines: list[bytes] = []
    server_tools = [{"type": "code_execution_20250825", "name": "code_execution"}]
    agent = Agent(model, tools=default_tools(), server_tools=server_tools, retry=fast_retry())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # see the test above
        result = run(agent.run("Make an invoice", lines.append))
    assert result.stop_reason == "end_turn"
    kinds = types(lines)
    assert "server_tool_call" in kinds
    assert "server_tool_result" in kinds
    assert kinds[-2:] == ["meta_files", "meta_final"]
    files = meta(lines, "meta_files")["files"]
    assert [f["file_id"] for f in files] == ["file_011CVnuVwfnHui7DMm9FwZM5"]
    # spec §5.6-b: strings, never null (the envelope spec's §4.12; the validator's E141)
    assert files[0]["filename"] == "file_011CVnuVwfnHui7DMm9FwZM5"
    assert files[0]["storage_location"] == "/v1/files/file_011CVnuVwfnHui7DMm9FwZM5/content"
    assert all(len(line) <= 2048 for line in lines)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_spec_4_3_optimistic_concurrency(kind: str, tmp_path: Path) -> None:
    """Stale saves conflict, in both stores [R4.3-a] [R4.2-a]."""
    store = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")

    async def scenario() -> None:
        state = AgentState(agent_uuid="a1", model="m")
        await store.save(state)
        assert state.version == 1
        stale = await store.load("a1")
        fresh = await store.load("a1")
        assert stale is not None
        assert fresh is not None
        fresh.status = "running"
        await store.save(fresh)
        stale.status = "idle"
        with pytest.raises(ConflictError):
            await store.save(stale)
        loaded = await store.load("a1")
        assert loaded is not None
        assert loaded.status == "running"
        assert loaded.version == 2
        with pytest.raises(ConflictError):
            await store.save(AgentState(agent_uuid="a1", model="m"))  # insert over an existing agent

    asyncio.run(scenario())


def test_spec_9_default_command_offline_without_a_key(tmp_path: Path) -> None:
    """The default command, offline, stdout only the stream [R9.1-a] [R8.1-a]."""
    done = _cli("run", "What is 5 + (10 * 2)?", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = sse_lines(done.stdout)
    assert_valid(lines)
    assert types(lines) == CALCULATOR_RUN_TYPES
    assert lines[-1] == b"[DONE]"
    assert (tmp_path / "agent-ref.db").exists()
    assert "end_turn" in done.stderr  # human summary on stderr only
    pretty = _cli("run", "What is 5 + (10 * 2)?", "--pretty", "--db", "p.db", cwd=tmp_path)
    assert "→ calculator(" in pretty.stdout
    assert "5 + (10 * 2) = 25." in pretty.stdout
    assert "data:" not in pretty.stdout


def test_spec_9_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    """CLI errors: one line, exit 2, no traceback [R9.1-a] [R6.3-a]."""
    no_key = _cli("run", "hi", "--model", "claude-sonnet-4-5", cwd=tmp_path)
    assert no_key.returncode == 2
    assert "ANTHROPIC_API_KEY" in no_key.stderr
    assert "Traceback" not in no_key.stderr
    assert no_key.stdout == ""
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    run(Agent(ReplayModel([[{"type": "message_start"}]]), store=SQLiteStore(tmp_path / "agent-ref.db")).run("x", drop))
    resumed = _cli("resume", "00000000-0000-0000-0000-000000000000", "--results", str(bad), cwd=tmp_path)
    assert resumed.returncode == 2
    assert "bad.json:1:" in resumed.stderr
    assert "Traceback" not in resumed.stderr
    missing = _cli("replay-nothing", cwd=tmp_path)
    assert missing.returncode == 2
