"""Tracing without the ``otel`` extra, and ``configure_tracing`` exporting to an OTLP collector (spec §20.1, §20.5).

The extra's absence is simulated in a child interpreter whose import system refuses
``opentelemetry``; the collector is an HTTP server on the loopback that decodes what it
receives with the OTLP protobuf messages.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agent_ref.errors import ConfigError
from agent_ref.tracing import Tracing, configure_tracing, otlp_traces_url
from cli_support import OtlpCollector, otlp_collector
from conftest import ROOT

if TYPE_CHECKING:
    from collections.abc import Iterator

WITHOUT_OTEL = textwrap.dedent(
    """
    import sys, importlib.abc

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(f"blocked: {name}")
            return None

    sys.meta_path.insert(0, Block())
    import agent_ref.tracing as tracing
    from envelope._extras import MissingExtraError

    assert tracing.HAVE_OTEL is False
    assert not any(m == "opentelemetry" or m.startswith("opentelemetry.") for m in sys.modules)
    t = tracing.Tracing(capture_content=True)
    assert t.enabled is False
    with t.run(agent_id="a", run_id="r", model="m", resumed_from="00-x") as run:
        assert run is tracing.NOOP
        with t.step(1) as step, t.model_call(model="m") as call, t.tool_call(name="x", call_id="c") as tool:
            assert step is call is tool is tracing.NOOP
            call.record_request({"messages": []})
            call.record_response(stop_reason="end_turn", usage={})
            tool.record_result(is_error=True, result="r")
            tool.record_paused()
            tool.set("k", 1)
            tool.error("e")
        run.end_run("end_turn", usage={}, cost_usd=0.1)
        assert run.traceparent() is None
    try:
        with t.tool_call(name="x", call_id="c"):
            raise KeyError("passes through")
    except KeyError:
        pass
    assert tracing.configure_tracing(None) is None
    try:
        tracing.configure_tracing("http://127.0.0.1:4318", service_name="s")
    except MissingExtraError as exc:
        print(exc)
    """
)


def test_without_the_extra_every_helper_is_a_noop_R20_1_a() -> None:
    """[R20.1-a] with ``opentelemetry`` unimportable the module imports, helpers do nothing, --otlp names the extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(ROOT / "src")
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_OTEL], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "--otlp needs the 'otel' extra: pip install 'envelope-stream[otel]'"


@pytest.mark.parametrize(
    ("given", "endpoint"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
        ("https://collector.example:443/custom/path", "https://collector.example:443/custom/path"),
        (" http://[::1]:4318 ", "http://[::1]:4318/v1/traces"),
    ],
)
def test_otlp_url_gets_the_traces_path_when_bare_R20_5_a(given: str, endpoint: str) -> None:
    """[R20.5-a] a collector URL with no path gets ``/v1/traces``; one with a path is used as it is."""
    assert otlp_traces_url(given) == endpoint


@pytest.mark.parametrize("bad", ["", "127.0.0.1:4318", "grpc://host:4317", "http://", "file:///tmp/x"])
def test_a_bad_otlp_url_is_a_config_error_R20_5_a(bad: str) -> None:
    """[R20.5-a] anything but an http(s) URL with a host is refused, naming the option and the value."""
    with pytest.raises(ConfigError, match=r"^--otlp: .* is not an http:// or https:// URL of an OTLP collector$"):
        configure_tracing(bad)


@pytest.fixture
def collector() -> Iterator[OtlpCollector]:
    """An OTLP/HTTP collector stand-in on the loopback."""
    with otlp_collector() as collected:
        yield collected


def test_configure_tracing_exports_spans_to_an_otlp_collector_R20_5_a(collector: OtlpCollector) -> None:
    """[R20.5-a] ``--otlp URL``: spans reach the collector as OTLP protobuf, with the service name as a resource."""
    provider = configure_tracing(collector.url, service_name="agent-ref-test", set_global=False)
    assert provider is not None
    tracing = Tracing(tracer_provider=provider)
    with tracing.run(agent_id="agent-1", run_id="run-1", model="claude-x") as run:
        run.end_run("end_turn", usage={"input_tokens": 3, "output_tokens": 1})
    assert provider.force_flush(timeout_millis=20_000)
    provider.shutdown()
    assert len(collector.received) == 1
    path, content_type, body = collector.received[0]
    assert (path, content_type) == ("/v1/traces", "application/x-protobuf")
    request = ExportTraceServiceRequest.FromString(body)
    (resource_spans,) = request.resource_spans
    resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
    assert resource["service.name"] == "agent-ref-test"
    (scope_spans,) = resource_spans.scope_spans
    assert scope_spans.scope.name == "agent_ref"
    (span,) = scope_spans.spans
    assert span.name == "invoke_agent"
    attributes = {a.key: a.value for a in span.attributes}
    assert attributes["gen_ai.operation.name"].string_value == "invoke_agent"
    assert attributes["gen_ai.usage.input_tokens"].int_value == 3


def test_configure_tracing_with_no_url_sets_nothing_up_R20_5_a() -> None:
    """[R20.5-a] no ``--otlp``: no provider is made (the application's own, or none, stays)."""
    assert configure_tracing(None) is None


def test_configure_tracing_takes_an_exporter_of_the_callers_R20_5_a() -> None:
    """[R20.5-a] an exporter passed in replaces the OTLP one (how a test or an application points spans elsewhere)."""
    exporter = InMemorySpanExporter()
    provider = configure_tracing("http://127.0.0.1:9", service_name="s", set_global=False, exporter=exporter)
    assert provider is not None
    with Tracing(tracer_provider=provider).step(3):
        pass
    provider.force_flush()
    provider.shutdown()
    (span,) = exporter.get_finished_spans()
    assert span.resource.attributes["service.name"] == "s"
    assert dict(span.attributes or {}) == {"agent_ref.step": 3}
