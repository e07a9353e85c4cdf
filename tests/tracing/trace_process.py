"""One process of the cross-process pause/resume test (``test_tracing_processes.py``): run a response, print its spans.

``python trace_process.py pause`` runs a response that pauses for a frontend tool and
prints its spans and the ``traceparent`` the state keeps, as JSON; ``python
trace_process.py resume TRACEPARENT`` resumes under a server request span of its own and
prints its spans. Each process has its own SDK provider and in-memory exporter.
"""

from __future__ import annotations

import json
import sys

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_ref.tracing import Tracing


def main(argv: list[str]) -> None:
    """Run the ``pause`` or ``resume`` half; print ``{"spans": [...], "traceparent": ...}``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(tracer_provider=provider)
    traceparent = None
    if argv[0] == "pause":
        with tracing.run(agent_id="agent-1", run_id="run-1", model="m") as run:
            spawn = tracing.tool_call(name="spawn_subagent", call_id="toolu_s", executor="subagent")
            child_run = tracing.run(agent_id="child-1", agent_name="helper", run_id="run-c", model="m")
            with tracing.step(1), spawn, child_run as child:
                child.end_run("end_turn")
            with tracing.step(2), tracing.tool_call(name="confirm", call_id="toolu_f", executor="frontend") as tool:
                tool.record_paused()
            run.end_run("awaiting_frontend_tools")
            traceparent = run.traceparent()
    else:
        request = provider.get_tracer("server").start_as_current_span("POST /agent/resume")
        resumed = tracing.run(agent_id="agent-1", run_id="run-1", model="m", response=1, resumed_from=argv[1])
        with request, resumed, tracing.step(3):
            pass
    spans = [
        {
            "name": s.name,
            "trace": f"{s.context.trace_id:032x}" if s.context else None,
            "span": f"{s.context.span_id:016x}" if s.context else None,
            "parent": f"{s.parent.span_id:016x}" if s.parent else None,
            "links": [f"{link.context.span_id:016x}" for link in s.links],
        }
        for s in exporter.get_finished_spans()
    ]
    print(json.dumps({"spans": spans, "traceparent": traceparent}))


if __name__ == "__main__":
    main(sys.argv[1:])
