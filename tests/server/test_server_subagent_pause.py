"""A run paused through a subagent, resumed with one POST (spec/agent-ref.md §13.5, spec/server.md §1.2).

The server needs nothing of its own: ``agent_config`` registers the children, the pause's
elements name the child's agent, and ``/agent/tool_results`` on the root agent continues
the child, then the root. Every stream is validated strictly as raw SSE bytes.
"""

from __future__ import annotations

import json

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.run.subagents import demo_subagents
from agent_ref.server.app import create_app
from server_support import data_lines, post, running
from validating import assert_valid

PROMPT = "Research tides and volcanoes (confirm first) in parallel, then confirm"


def _of(lines: list[bytes], kind: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in lines if x != b"[DONE]" and json.loads(x)["type"] == kind]


def test_spec_13_5_c_a_post_resume_continues_the_child_then_the_root() -> None:
    """POST /agent/tool_results with the root's and the child's answers finishes both [R13.5-c] [R13.5-b]."""
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, agent_config={"subagents": demo_subagents()})
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": PROMPT})
        assert first.status_code == 200
        assert_valid(first.content)
        (pause,) = _of(data_lines(first.content), "awaiting_frontend_tools")
        assert pause["agent"] == first.headers["x-agent-uuid"]
        pending = json.loads(str(pause["delta"]))
        assert ["agent" in p for p in pending] == [False, True]
        answer = {
            "agent_uuid": first.headers["x-agent-uuid"],
            "tool_results": [{"tool_use_id": p["tool_use_id"], "content": "yes"} for p in pending],
        }
        second = post(base, "/agent/tool_results", answer)
    assert second.status_code == 200
    assert_valid(second.content)
    lines = data_lines(second.content)
    finals = {str(f["agent"]): json.loads(str(f["delta"]))["stop_reason"] for f in _of(lines, "meta_final")}
    assert finals == {first.headers["x-agent-uuid"]: "end_turn", pending[1]["agent"]: "end_turn"}
    assert lines.count(b"[DONE]") == 1
