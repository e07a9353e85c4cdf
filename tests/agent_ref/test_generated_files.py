"""Files server tools generate belong to their run: reported once, kept across a pause (spec/agent-ref.md §5.6-c).

Issue 24 §7: the files of one run were reported again by every later run of the same
``Agent`` (they were a list on the object), and a run that paused and was resumed by a
fresh ``Agent`` (another process) lost the files generated before the pause. Every
response is validated strictly by the autouse tee (tests/agent_ref_validating.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent_ref import Agent, MemoryStore, ReplayModel, default_tools
from agent_ref.store.record import files_api_path
from agent_ref_support import fast_retry, run
from envelope import reconstruct
from validating import assert_valid

SERVER_TOOLS = [{"type": "code_execution_20250825", "name": "code_execution"}]


def _start() -> dict[str, Any]:
    message: dict[str, Any] = {"id": "m1", "type": "message", "role": "assistant", "model": "files-x", "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
    return {"type": "message_start", "message": message}


def _end(reason: str) -> list[dict[str, Any]]:
    return [
        {"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]


def _text(index: int, text: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": index},
    ]


def _code_execution(index: int, n: int, file_ids: list[str]) -> list[dict[str, Any]]:
    """A server tool call and its result, which names ``file_ids`` (code execution's output files)."""
    call = {"type": "server_tool_use", "id": f"srvtoolu_{n}", "name": "bash_code_execution", "input": {}}
    output = [{"type": "bash_code_execution_output", "file_id": f} for f in file_ids]
    content = {"type": "bash_code_execution_result", "content": output, "return_code": 0, "stdout": "", "stderr": ""}
    result = {"type": "bash_code_execution_tool_result", "tool_use_id": f"srvtoolu_{n}", "content": content}
    return [
        {"type": "content_block_start", "index": index, "content_block": call},
        {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_stop", "index": index},
        {"type": "content_block_start", "index": index + 1, "content_block": result},
        {"type": "content_block_stop", "index": index + 1},
    ]


def _confirm_call(index: int) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "toolu_confirm", "name": "confirm", "input": {}}
    delta = {"type": "input_json_delta", "partial_json": json.dumps({"question": "Send the invoice?"})}
    return [
        {"type": "content_block_start", "index": index, "content_block": block},
        {"type": "content_block_delta", "index": index, "delta": delta},
        {"type": "content_block_stop", "index": index},
    ]


def _files_of(lines: list[bytes]) -> list[list[str]]:
    """The file ids of each ``meta_files`` block of a stream, in order."""
    blocks = next(iter(reconstruct(lines).to_dict()["agents"].values()))["blocks"]
    return [[f["file_id"] for f in b["data"]["files"]] for b in blocks if b["type"] == "meta_files"]


def _generated(lines: list[bytes]) -> Any:
    blocks = next(iter(reconstruct(lines).to_dict()["agents"].values()))["blocks"]
    return next(b for b in blocks if b["type"] == "meta_final")["data"]["generated_files"]


def test_spec_5_6_c_the_next_run_of_the_same_agent_does_not_report_the_files_again() -> None:
    """Run 1 generates a file and reports it; run 2 generates none and reports none [R5.6-c].

    Before: run 2's meta_files and generated_files repeated run 1's file.
    """
    model = ReplayModel(
        [
            [_start(), *_code_execution(0, 1, ["file_A"]), *_text(2, "Made it."), *_end("end_turn")],
            [_start(), *_text(0, "Nothing to make."), *_end("end_turn")],
            [_start(), *_code_execution(0, 2, ["file_B", "file_A"]), *_text(2, "Again."), *_end("end_turn")],
        ]
    )
    agent = Agent(model, tools=default_tools(), server_tools=SERVER_TOOLS, retry=fast_retry())
    first: list[bytes] = []
    second: list[bytes] = []
    third: list[bytes] = []
    run(agent.run("Make an invoice", first.append))
    run(agent.run("Thanks", second.append))
    run(agent.run("Make two", third.append))
    assert _files_of(first) == [["file_A"]]
    assert _generated(first) == [
        {"file_id": "file_A", "filename": "file_A", "storage_location": files_api_path("file_A")}
    ]
    assert _files_of(second) == []
    assert _generated(second) is None
    assert _files_of(third) == [["file_B", "file_A"]]  # generated again in run 3: that run's own


def test_spec_5_6_c_files_before_a_pause_are_reported_by_the_resumed_response_in_another_process() -> None:
    """Files of the step that paused are saved with the pause; a fresh Agent's resume reports them once [R5.6-c].

    Before: the resumed response (a new Agent, as in another process) had no meta_files.
    """
    calls = [
        [_start(), *_code_execution(0, 1, ["file_A"]), *_confirm_call(2), *_end("tool_use")],
        [_start(), *_code_execution(0, 2, ["file_B"]), *_text(2, "Sent."), *_end("end_turn")],
        [_start(), *_text(0, "Hello again."), *_end("end_turn")],
    ]
    model = ReplayModel(calls)
    store = MemoryStore()
    config: dict[str, Any] = {"tools": default_tools(), "server_tools": SERVER_TOOLS, "retry": fast_retry()}
    paused: list[bytes] = []
    agent = Agent(model, store=store, **config)
    result = run(agent.run("Make an invoice and send it", paused.append))
    assert result.stop_reason == "awaiting_frontend_tools"
    assert _files_of(paused) == []  # a pause reports nothing: the run has not ended

    stored = asyncio.run(store.load(agent.agent_uuid))
    assert stored is not None
    assert stored.run is not None
    assert [f["file_id"] for f in stored.run.files] == ["file_A"]  # saved with the pause

    resumed: list[bytes] = []
    fresh = asyncio.run(Agent.load(agent.agent_uuid, store, model, **config))
    answers = [{"tool_use_id": "toolu_confirm", "content": "yes"}]
    done = run(fresh.continue_with_tool_results(answers, resumed.append))
    assert done.stop_reason == "end_turn"
    assert _files_of(resumed) == [["file_A", "file_B"]]
    assert [f["file_id"] for f in _generated(resumed)] == ["file_A", "file_B"]
    assert_valid(paused + resumed)  # the recording of the run (pause, then resume) is one valid stream

    later: list[bytes] = []
    run(fresh.run("Hi", later.append))
    assert _files_of(later) == []
    assert _generated(later) is None
    log = asyncio.run(store.run_log(done.run_id))
    assert sum(1 for line in log if b'"meta_files"' in line) >= 1
    assert _files_of(log[len(paused) :]) == [["file_A", "file_B"]]
