"""A secret inside a URL never reaches a tool result, a store or a log (issue 24 §6; spec/agent-ref.md §6.3).

The field case: a tool posting to a Slack webhook failed, and its error (httpx's
"Client error '404 Not Found' for url '...'") carried the webhook URL, token included, into
the ``tool_result`` the model and the browser saw. Every response is validated strictly by
the autouse tee (tests/agent_ref_validating.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import msgspec
import pytest

from agent_ref import Agent, MemoryStore, ScriptedModel, Tool, tool
from agent_ref_support import blocks, fast_retry, run

if TYPE_CHECKING:
    from collections.abc import Callable

SLACK_TOKEN = "q1W2e3R4t5Y6u7I8o9P0a1S2"
SLACK_URL = f"https://hooks.slack.com/services/T0AB12CD3/B0EF45GH6/{SLACK_TOKEN}"
DISCORD_TOKEN = "Xy-9_Zq8Wv7Ut6Sr5Qp4On3Ml2"
DISCORD_URL = f"https://discord.com/api/webhooks/112233445566778899/{DISCORD_TOKEN}"
AMZ_SIGNATURE = "fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024"
S3_URL = (
    "https://b.s3.amazonaws.com/report.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=600"
    f"&X-Amz-SignedHeaders=host&X-Amz-Signature={AMZ_SIGNATURE}"
)
SAS_SIG = "9pQ%2BxYz%2FabCdEf%3D"
SAS_URL = f"https://acct.blob.core.windows.net/c/b.txt?sv=2021-08-06&sp=r&sig={SAS_SIG}"


def _failing(message: Callable[[str], str]) -> Tool:
    @tool(name="calculator")
    def post(expression: str) -> str:
        """Posts the expression to a webhook, and fails."""
        raise RuntimeError(message(expression))

    return post


@pytest.mark.parametrize(
    ("url", "secret", "kept"),
    [
        (SLACK_URL, SLACK_TOKEN, "https://hooks.slack.com/services/[redacted]"),
        (DISCORD_URL, DISCORD_TOKEN, "https://discord.com/api/webhooks/112233445566778899/[redacted]"),
        (S3_URL, AMZ_SIGNATURE, "X-Amz-SignedHeaders=host&X-Amz-Signature=[redacted]"),
        (SAS_URL, SAS_SIG, "sv=2021-08-06&sp=r&sig=[redacted]"),
    ],
    ids=["slack", "discord", "s3", "azure-sas"],
)
def test_spec_6_3_a_a_url_secret_in_a_tool_error_reaches_no_result_store_or_log(
    url: str, secret: str, kept: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The tool_result says which URL failed, without its secret; so do the store and the log [R6.3-c] [R2.4-b]."""
    leaky = _failing(lambda expression: f"Client error '404 Not Found' for url '{url}' ({expression})")
    store = MemoryStore()
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), tools=[leaky], store=store, retry=fast_retry())
    with caplog.at_level(logging.DEBUG, logger="agent_ref"):
        logging.getLogger("agent_ref").warning("posting to %s", url)
        result = run(agent.run("What is 1 + 1?", lines.append))
    assert result.stop_reason == "end_turn"
    res = next(b for b in blocks(lines) if b["type"] == "tool_result")
    assert res["content"].startswith("RuntimeError: Client error '404 Not Found' for url '")
    assert kept in res["content"]  # the model still learns which endpoint failed
    assert result.conversation_history[2]["content"][0]["is_error"] is True
    everything = {
        "stream": b"".join(lines),
        "state": msgspec.json.encode(asyncio.run(store.load(agent.agent_uuid))),
        "runs": msgspec.json.encode(asyncio.run(store.runs(agent.agent_uuid))),
        "log": b"".join(asyncio.run(store.run_log(result.run_id))),
        "logger": caplog.text.encode(),
    }
    for where, data in everything.items():
        assert secret.encode() not in data, where
