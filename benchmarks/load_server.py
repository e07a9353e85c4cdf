"""Load benchmark of the agent server: runs/s, envelope lines/s and time to first byte, on loopback.

Run: ``python -m benchmarks.load_server [--runs N] [--concurrency C] [--store cli|sqlite|memory]``
(defaults 200, 50, cli). Starts a server on the scripted (offline) model in a separate
process on 127.0.0.1 (port 0), then fires N runs of "What is 5 + (10 * 2)?" with at
most C in flight, reading each SSE response to its end through the strict
``StreamValidator`` and counting its envelope lines (``data:`` events other than
``[DONE]``). The server is:

* ``cli`` (the default): the real console script, ``agent-ref serve --port 0 --db
  <tmp>/bench.db`` (SQLite store, file journal beside it), exactly as a user starts it;
* ``sqlite`` / ``memory``: ``agent_ref.server.app.create_app`` under uvicorn with that store.

Prints runs/s, lines/s and MB/s summed over all responses, time to first byte (p50,
p95, max) and the share of streams that were valid and complete. ``measure`` returns
the same figures for ``benchmarks.scaling``. Bounded: every request has a 120 s
timeout, the server must announce its port within 60 s, and it is stopped at the end.
Client and server share the machine's cores, so the figures are a floor for the
server alone; compare runs from one machine only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx2

from envelope import StreamReader, StreamValidator

if TYPE_CHECKING:
    from collections.abc import Iterator

PROMPT = "What is 5 + (10 * 2)?"
STORES = ("cli", "sqlite", "memory")
ROOT = Path(__file__).resolve().parents[1]

_SERVER = """
import sys
from agent_ref import MemoryStore, SQLiteStore, ScriptedModel
from agent_ref.server.app import create_app, serve
from agent_ref.server.streams import FileJournal, MemoryJournal
db = sys.argv[2]
if sys.argv[1] == "sqlite":
    app = create_app(store=SQLiteStore(db), model_factory=ScriptedModel, journal=FileJournal(db + ".streams"))
else:
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, journal=MemoryJournal())
serve(app, "127.0.0.1", 0, ready=lambda url: (sys.stderr.write("serving on " + url + "\\n"), sys.stderr.flush()))
"""


@dataclass(frozen=True)
class Load:
    """What one load run measured (all counts over the timed runs, the warm-up excluded).

    Attributes:
        store: how the server was started (see the module docstring).
        runs: agent runs fired.
        concurrency: the most runs in flight at once.
        seconds: wall time of the timed runs.
        lines: envelope lines received over all responses.
        nbytes: SSE bytes received over all responses.
        ttfb_ms: time to first byte of each run, in milliseconds.
        run_ms: time of each whole run, in milliseconds.
        valid: runs whose response was 200 and passed the validator clean.
    """

    store: str
    runs: int
    concurrency: int
    seconds: float
    lines: int
    nbytes: int
    ttfb_ms: list[float]
    run_ms: list[float]
    valid: int

    @property
    def runs_per_s(self) -> float:
        """Agent runs completed per second."""
        return self.runs / self.seconds

    @property
    def lines_per_s(self) -> float:
        """Envelope lines delivered per second, summed over every response."""
        return self.lines / self.seconds

    @property
    def mb_per_s(self) -> float:
        """SSE megabytes (10^6) delivered per second, summed over every response."""
        return self.nbytes / 1e6 / self.seconds


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank, no interpolation)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _one(client: httpx2.AsyncClient, url: str, gate: asyncio.Semaphore) -> tuple[float, float, bool, int, int]:
    async with gate:
        start = time.perf_counter()
        first: float | None = None
        checker = StreamValidator()
        reader = StreamReader()
        findings = []
        lines = nbytes = 0
        async with client.stream("POST", url + "agent/run", json={"prompt": PROMPT}) as response:
            async for chunk in response.aiter_raw():
                if first is None:
                    first = time.perf_counter() - start
                nbytes += len(chunk)
                findings += checker.feed(chunk)
                lines += sum(1 for event in reader.feed(chunk) if event.data != "[DONE]")
        findings += checker.close()
        reader.close()
        total = time.perf_counter() - start
        ok = response.status_code == 200 and not findings
        return first if first is not None else total, total, ok, lines, nbytes


async def _load(url: str, runs: int, concurrency: int) -> tuple[float, list[tuple[float, float, bool, int, int]]]:
    gate = asyncio.Semaphore(concurrency)
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as client:
        await _one(client, url, gate)  # warm up: imports, first connection
        start = time.perf_counter()
        results = await asyncio.gather(*(_one(client, url, gate) for _ in range(runs)))
        return time.perf_counter() - start, list(results)


def _server_command(store: str, db: Path) -> list[str]:
    if store == "cli":
        script = Path(sys.executable).parent / "agent-ref"
        if script.is_file():  # the console script the package installs: what a user runs
            return [str(script), "serve", "--port", "0", "--db", str(db)]
        return [sys.executable, "-m", "agent_ref.cli.serve", "--port", "0", "--db", str(db)]  # the same command
    return [sys.executable, "-c", _SERVER, store, str(db)]


def _wait_for_url(log: Path, server: subprocess.Popen[bytes], timeout: float = 60.0) -> str | None:
    """The URL the server announces on stderr (``... serving on http://...``), or ``None``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
            if "serving on http://" in line:
                return line.split("serving on ", 1)[1].split()[0]
        if server.poll() is not None:
            return None
        time.sleep(0.05)
    return None


@contextmanager
def _server(store: str, tmp: Path) -> Iterator[str]:
    """Start the server, yield its URL, stop it."""
    env = dict(os.environ)
    env.pop("AGENT_REF_TOKEN", None)  # no bearer token: the client sends none
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    log = tmp / "server.log"
    with log.open("wb") as err:
        server = subprocess.Popen(
            _server_command(store, tmp / "bench.db"), stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tmp
        )
    try:
        url = _wait_for_url(log, server)
        if url is None:
            raise RuntimeError(f"the server did not start: {log.read_text(errors='replace')[-1000:]}")
        yield url
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def measure(runs: int, concurrency: int, store: str = "cli") -> Load:
    """Start a server, fire ``runs`` runs with ``concurrency`` in flight, stop it.

    Args:
        runs: agent runs to time (one more runs first, untimed, as a warm-up).
        concurrency: the most runs in flight at once.
        store: ``cli`` (the ``agent-ref serve`` command), ``sqlite`` or ``memory``.

    Returns:
        The figures.

    Raises:
        RuntimeError: the server did not start.
    """
    tmp = Path(tempfile.mkdtemp(prefix="load-server-"))
    try:
        with _server(store, tmp) as url:
            elapsed, results = asyncio.run(_load(url, runs, concurrency))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Load(
        store=store,
        runs=runs,
        concurrency=concurrency,
        seconds=elapsed,
        lines=sum(r[3] for r in results),
        nbytes=sum(r[4] for r in results),
        ttfb_ms=[r[0] * 1000 for r in results],
        run_ms=[r[1] * 1000 for r in results],
        valid=sum(r[2] for r in results),
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the report. Returns 1 if any stream was invalid, 2 if no server."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.load_server", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--runs", type=int, default=200, help="runs of the prompt (default 200)")
    parser.add_argument("--concurrency", type=int, default=50, help="most runs in flight (default 50)")
    parser.add_argument(
        "--store",
        choices=STORES,
        default="cli",
        help="cli: the agent-ref serve command on SQLite (default); sqlite, memory: the app under uvicorn "
        "with that store",
    )
    args = parser.parse_args(argv)
    try:
        load = measure(args.runs, args.concurrency, args.store)
    except RuntimeError as exc:
        print(f"load_server: {exc}", file=sys.stderr)
        return 2
    how = "agent-ref serve (SQLite)" if load.store == "cli" else f"create_app, store {load.store}"
    print(f"server load: {load.runs} runs, {load.concurrency} in flight, {how}, scripted model, loopback")
    print(f"  runs/s             {load.runs_per_s:8.1f}")
    print(f"  lines/s            {load.lines_per_s:8.0f} ({load.lines / load.runs:.0f} lines per run)")
    print(f"  MB/s               {load.mb_per_s:8.2f}")
    print(
        f"  TTFB p50 / p95     {percentile(load.ttfb_ms, 0.5):8.1f} / {percentile(load.ttfb_ms, 0.95):.1f} ms"
        f" (max {max(load.ttfb_ms):.1f})"
    )
    print(f"  run time p50 / p95 {percentile(load.run_ms, 0.5):8.1f} / {percentile(load.run_ms, 0.95):.1f} ms")
    print(f"  valid, complete    {load.valid}/{load.runs}")
    return 0 if load.valid == load.runs else 1


if __name__ == "__main__":
    sys.exit(main())
