"""`agent-ref serve` takes `run`'s agent options (issue 25 §2; spec/cli-agent-ref.md RC9).

The installed console script is started on a free loopback port with a database in the
test's folder, driven over HTTP with the standard library, and stopped with Ctrl-C
(SIGINT) at the end. Every stream it sends goes through ``envelope validate --strict``.
"""

from __future__ import annotations

import http.client
import json
import subprocess
from typing import TYPE_CHECKING

import pytest

from cli_support import SCRIPT, clean_env, serve_refusal, start_serve, stop_serve, strict_envelopes

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


class Served:
    """A running ``agent-ref serve``: its address, and requests to it."""

    def __init__(self, proc: subprocess.Popen[str], host: str, port: int) -> None:
        self.proc = proc
        self.host = host
        self.port = port

    def post(self, path: str, body: object, *, host_header: str | None = None) -> tuple[int, bytes]:
        """POST JSON; the status and the whole body (an SSE response is read to its end)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        try:
            headers = {"Content-Type": "application/json"}
            if host_header is not None:
                headers["Host"] = host_header
            conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()


def _start(tmp_path: Path, *args: str) -> Served:
    return Served(*start_serve(tmp_path, *args))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """A server with every agent option `run` has, each away from its default."""
    server = _start(
        tmp_path,
        "--subagents",
        "demo",
        "--memory",
        str(tmp_path / "memories"),
        "--compact-threshold",
        "300",
        "--loop-limit",
        "5",
        "--max-steps",
        "8",
    )
    try:
        yield server
    finally:
        stop_serve(server.proc)


def test_spec_rc9_a_serve_runs_the_agent_with_runs_options(served: Served, tmp_path: Path) -> None:
    """Subagents, memory and compaction through `serve`, as `run` has them (serve had none of these) [RC9-a]."""
    status, body = served.post("/agent/run", {"prompt": "Research tides and volcanoes in parallel"})
    assert status == 200
    envelopes = strict_envelopes(body, tmp_path)
    inits = [json.loads(str(e["delta"])) for e in envelopes if e["type"] == "meta_init"]
    children = [i for i in inits if i.get("parent_agent")]
    assert len(children) == 2, inits  # two researchers, each linked to its parent (envelope-v1 §8.3.1)
    assert {c["parent_agent"] for c in children} == {inits[0]["agent_uuid"]}

    status, body = served.post("/agent/run", {"prompt": "Remember that I prefer tea."})
    assert status == 200
    strict_envelopes(body, tmp_path)
    remembered = [p for p in (tmp_path / "memories").rglob("*") if p.is_file()]
    assert remembered, "the memory tool wrote under --memory"
    assert any("tea" in p.read_text(encoding="utf-8") for p in remembered)

    status, body = served.post("/agent/run", {"prompt": "keep calculating"})
    assert status == 200
    types = [e["type"] for e in strict_envelopes(body, tmp_path)]
    assert "meta_compaction" in types  # --compact-threshold 300


def test_spec_rc9_b_subagents_none_registers_no_children(tmp_path: Path) -> None:
    """`--subagents none`: the same prompt runs without children [RC9-b]."""
    server = _start(tmp_path, "--subagents", "none")
    try:
        status, body = server.post("/agent/run", {"prompt": "Research tides and volcanoes in parallel"})
    finally:
        stop_serve(server.proc)
    assert status == 200
    envelopes = strict_envelopes(body, tmp_path)
    assert len({e["agent"] for e in envelopes}) == 1


def test_spec_rc9_c_other_host_names_are_refused(served: Served, tmp_path: Path) -> None:
    """The default allowed hosts: loopback names; a rebinding page's `Host` gets no run [RC9-c]."""
    status, body = served.post("/agent/run", {"prompt": "What is 5 + (10 * 2)?"}, host_header="attacker.example")
    assert status == 421, (status, body)  # spec server §5.3-a
    assert b"meta_init" not in body
    status, body = served.post(
        "/agent/run", {"prompt": "What is 5 + (10 * 2)?"}, host_header=f"localhost:{served.port}"
    )
    assert status == 200
    strict_envelopes(body, tmp_path)


def test_spec_rc9_c_allowed_host_adds_a_name(tmp_path: Path) -> None:
    """`--allowed-host` adds a name to the loopback ones (spec server §5.3-a); others stay refused [RC9-c]."""
    server = _start(tmp_path, "--allowed-host", "agents.example.org")
    try:
        named, body = server.post("/agent/run", {"prompt": "What is 5 + (10 * 2)?"}, host_header="agents.example.org")
        local, local_body = server.post("/agent/run", {"prompt": "What is 5 + (10 * 2)?"}, host_header="localhost")
        other, _ = server.post("/agent/run", {"prompt": "hi"}, host_header="attacker.example")
    finally:
        stop_serve(server.proc)
    assert (named, local, other) == (200, 200, 421)
    strict_envelopes(body, tmp_path)
    strict_envelopes(local_body, tmp_path)


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("--loop-limit", "1"), "--loop-limit: error: 1 is not a limit"),
        (("--compact-threshold", "0"), "--compact-threshold: error: 0 is not a token count"),
        (("--model",), "agent-ref serve: error: model 'claude-"),
        (("--memory", "file.txt"), "file.txt: error: is not a directory"),
        (("--allowed-host", "exa mple.org"), "--allowed-host: error: not a host name or address: 'exa mple.org'"),
        (("--keepalive", "0"), "--keepalive: error: 0 is not a number of seconds"),
        (("--host", "my host"), "--host: error: not a host name or address: 'my host'"),
    ],
)
def test_spec_rc9_d_serve_refuses_bad_options_before_listening(
    args: tuple[str, ...], start: str, tmp_path: Path
) -> None:
    """Each bad agent option is one line, exit 2, before the port is bound or the database made [RC9-d]."""
    (tmp_path / "file.txt").write_text("not a directory\n", encoding="utf-8")
    done = serve_refusal(tmp_path, *args)
    assert done.stderr.startswith(start), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "a.db").exists()


def test_spec_rc9_a_serve_and_run_share_the_agent_options() -> None:
    """The agent options of `serve` are exactly `run`'s: written once, so neither falls behind [RC9-a]."""
    from agent_ref.cli.commands import _parser

    sub = next(a for a in _parser()._actions if a.dest == "command")
    choices = sub.choices
    assert isinstance(choices, dict)

    def options(command: str) -> set[str]:
        return {s for a in choices[command]._actions for s in a.option_strings}

    run_only = {"--pretty", "--agent", "--fork"}  # the terminal view; continuing or forking a stored agent (RCSE1-a)
    # --pace: a delay per streamed event so a person can watch the page (spec server PC-a)
    serve_only = {"--host", "--port", "--token", "--allowed-host", "--keepalive", "--otlp", "--pace"}
    serve_only |= {"--inbox-messages", "--inbox-bytes", "--inbox-message-bytes", "--storage-timeout"}  # IB1, SL1
    serve_only |= {"--jwt-secret-file", "--jwks-file", "--jwt-issuer", "--jwt-audience"}  # spec server PR1, RC13-a
    serve_only |= {"--link-key-file", "--max-runs-in-flight", "--messages-per-minute", "--budget-usd"}  # RL1, QU1
    assert options("run") - run_only == options("serve") - serve_only
    assert {"--subagents", "--memory", "--compact-threshold", "--loop-limit", "--model", "--replay"} <= options("serve")
    assert {"--workspace", "--unsandboxed-bash", "--files-dir"} <= options("serve") & options("run")  # RCW2, RCF1-a


def test_spec_rc4_a_serve_help_has_a_description_and_examples() -> None:
    """`serve --help`: what it does, the token advice, examples [RC4-a]."""
    done = subprocess.run(
        [str(SCRIPT), "serve", "--help"], capture_output=True, text=True, env=clean_env(), timeout=60, check=False
    )
    assert done.returncode == 0
    assert "Serve the reference agent over HTTP" in done.stdout
    assert "--token" in done.stdout
    assert "--allowed-host" in done.stdout
    assert "examples:" in done.stdout
    assert "agent-ref serve --subagents demo" in done.stdout
