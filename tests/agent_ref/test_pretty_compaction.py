"""``agent-ref run --pretty`` shows the compaction boundary (issue 24 §7; spec/agent-ref.md §15.2-c).

The pretty view printed every buffered envelope but ``meta_compaction``, so a human
watching a long run never saw that its context had been summarised. The agent's
response is validated strictly by the autouse tee (tests/agent_ref_validating.py).
"""

from __future__ import annotations

import io
import json
import re

from agent_ref import Agent, ScriptedModel, SummarizingCompactor, default_tools
from agent_ref.cli.commands import PrettyPrinter
from agent_ref_support import fast_retry, run


def test_spec_15_2_c_the_pretty_view_shows_each_compaction_where_it_happened() -> None:
    """One boundary line per meta_compaction, with its numbers, between the steps it separates [R15.2-e] [R15.2-c]."""
    lines: list[bytes] = []
    agent = Agent(
        ScriptedModel(),
        tools=default_tools(),
        retry=fast_retry(),
        max_steps=8,
        compactor=SummarizingCompactor(threshold=300),
    )
    result = run(agent.run("keep calculating", lines.append))
    assert result.compactions, "the run must compact for this test to mean anything"
    out = io.StringIO()
    printer = PrettyPrinter(out, color=False)
    for line in lines:
        printer(line)
    shown = re.findall(
        r"^── context compacted \((\w+), (\w+)\): (\d+) → (\d+) messages, ([\d,]+) tokens before ──$",
        out.getvalue(),
        re.M,
    )
    sent = [json.loads(json.loads(line)["delta"]) for line in lines if b'"type":"meta_compaction"' in line]
    assert len(sent) == len(result.compactions) >= 1
    assert shown == [
        (c["trigger"], c["strategy"], str(c["messages_before"]), str(c["messages_after"]), f"{c['pre_tokens']:,}")
        for c in sent
    ]
    # where it happened: after a calculator result, before the next step's output
    text = out.getvalue()
    boundary = text.index("── context compacted")
    assert "← calculator" in text[:boundary]
    assert "done (" in text[boundary:]


def test_spec_15_2_c_a_boundary_without_its_numbers_is_still_shown() -> None:
    """A meta_compaction from another producer, with fields missing, is shown, not dropped [R15.2-e]."""
    from envelope import Emitter

    emitter = Emitter("a1", 2048)
    meta = {"format": "json", "user_query": "q", "agent_uuid": "a1", "model": "m"}
    lines = [
        *emitter.buffered("meta_init", json.dumps(meta)),
        *emitter.buffered("meta_compaction", json.dumps({"strategy": "custom"})),
    ]
    out = io.StringIO()
    printer = PrettyPrinter(out, color=False)
    for line in lines:
        printer(line)
    assert out.getvalue().splitlines()[-1] == "── context compacted (?, custom) ──"
