"""Helpers of the workspace tests: a recorded model that makes given tool calls (not a test module).

It lives beside ``conftest.py`` so that mypy and pytest both import it as ``workspace_support``.
"""

from __future__ import annotations

import json
from typing import Any


def replay_calls(calls: list[tuple[str, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """A recorded model that makes ``calls`` one per step, then answers "done"."""
    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "r", "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    start: dict[str, Any] = {"type": "message_start", "message": message}
    out: list[list[dict[str, Any]]] = []
    for n, (name, tool_input) in enumerate(calls):
        block = {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
        out.append(
            [
                start,
                {"type": "content_block_start", "index": 0, "content_block": block},
                {"type": "content_block_delta", "index": 0, "delta": delta},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}},
            ]
        )
    text = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "done"}}
    out.append(
        [
            start,
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            text,
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
        ]
    )
    return out
