"""`agent-ref serve --otlp URL` and `--memory-store DIR` (spec ``spec/cli-agent-ref.md`` RC12), the installed script.

A collector stand-in on the loopback receives the OTLP/HTTP export of a served run; the
run's stream goes through the strict validator.
"""

from __future__ import annotations

import http.client
import json
import subprocess
from typing import TYPE_CHECKING

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agent_ref.tools.memory_store import FileMemory
from cli_support import SCRIPT, OtlpCollector, clean_env, otlp_collector, serve_refusal, start_serve, stop_serve
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def collector() -> Iterator[OtlpCollector]:
    """An OTLP/HTTP collector stand-in on the loopback."""
    with otlp_collector() as collected:
        yield collected


def _post(host: str, port: int, body: object) -> bytes:
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        conn.request("POST", "/agent/run", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        return response.read()
    finally:
        conn.close()


def test_serve_otlp_exports_the_runs_spans_and_memory_store_remembers_RC12_b(
    collector: OtlpCollector, tmp_path: Path
) -> None:
    """A served run's spans reach the collector when the server stops [RC12-b]; its memory is kept [RC12-a]."""
    proc, host, port = start_serve(tmp_path, "--otlp", collector.url, "--memory-store", str(tmp_path / "notes"))
    try:
        body = _post(host, port, {"prompt": "Please remember that the build runs at noon."})
    finally:
        stop_serve(proc, timeout=30)
    assert_valid(body)
    names = set()
    for path, _, data in collector.received:
        assert path == "/v1/traces"
        for resource_spans in ExportTraceServiceRequest.FromString(data).resource_spans:
            for scope_spans in resource_spans.scope_spans:
                names |= {span.name for span in scope_spans.spans}
    assert "invoke_agent" in names
    assert any(name.startswith("chat ") for name in names)
    files = list((tmp_path / "notes").glob("*.json"))
    assert len(files) == 1
    memory = FileMemory(tmp_path / "notes")
    agent_id = files[0].stem  # an uuid is its own encoding
    assert memory.entries(agent_id) == ["the build runs at noon"]


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("--otlp", "ftp://collector"), "--otlp: error: 'ftp://collector' is not an http:// or https:// URL"),
        (("--memory-store", "file.txt"), "file.txt: error: is not a directory"),
    ],
)
def test_serve_refuses_a_bad_otlp_or_memory_store_in_one_line_RC12_a(
    args: tuple[str, ...], start: str, tmp_path: Path
) -> None:
    """A bad --otlp URL or --memory-store is one line, exit 2, before anything listens [RC12-a] [RC12-b]."""
    (tmp_path / "file.txt").write_text("not a directory\n", encoding="utf-8")
    done = serve_refusal(tmp_path, *args)
    assert done.stderr.startswith(start), done.stderr


def test_run_memory_store_keeps_what_the_user_asked_to_remember_RC12_a(tmp_path: Path) -> None:
    """`agent-ref run --memory-store DIR`: the run's "remember that ..." is a note in DIR, for the agent [RC12-a]."""
    notes = tmp_path / "notes"

    def run(prompt: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), "run", prompt, "--db", str(tmp_path / "a.db"), "--memory-store", str(notes)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=clean_env(),
            timeout=120,
            check=False,
        )

    first = run("Please remember that the build runs at noon.")
    assert first.returncode == 0, first.stderr
    assert_valid(first.stdout.encode())
    (path,) = notes.glob("*.json")
    assert FileMemory(notes).entries(path.stem) == ["the build runs at noon"]
