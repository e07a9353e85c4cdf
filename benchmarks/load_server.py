"""Load benchmark of the agent server: runs per second and time to first byte, on loopback.

Run: ``python -m benchmarks.load_server [--runs N] [--concurrency C] [--store memory|sqlite]``
(defaults 200, 50, sqlite). Starts ``agent_ref.server.create_app`` on the scripted model
under uvicorn in a separate process on 127.0.0.1 (port 0), then fires N runs of
"What is 5 + (10 * 2)?" with at most C in flight, reading each SSE response to its end.
Prints runs/s, time to first byte (p50, p95, max) and the share of streams that were
valid and complete. Bounded: every request has a 120 s timeout, and the server process
is stopped at the end. Client and server share the machine's cores, so the numbers are
a floor for the server alone; compare runs from one machine only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

from envelope import StreamValidator

PROMPT = "What is 5 + (10 * 2)?"

_SERVER = """
import sys
from agent_ref import MemoryStore, SQLiteStore, ScriptedModel
from agent_ref.server import create_app, serve
from agent_ref.server_streams import FileJournal, MemoryJournal
db = sys.argv[2]
if sys.argv[1] == "sqlite":
    app = create_app(store=SQLiteStore(db), model_factory=ScriptedModel, journal=FileJournal(db + ".streams"))
else:
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, journal=MemoryJournal())
serve(app, "127.0.0.1", 0, ready=lambda url: (sys.stdout.write(url + "\\n"), sys.stdout.flush()))
"""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _one(client: httpx2.AsyncClient, url: str, gate: asyncio.Semaphore) -> tuple[float, float, bool]:
    async with gate:
        start = time.perf_counter()
        first: float | None = None
        checker = StreamValidator()
        findings = []
        async with client.stream("POST", url + "agent/run", json={"prompt": PROMPT}) as response:
            async for chunk in response.aiter_raw():
                if first is None:
                    first = time.perf_counter() - start
                findings += checker.feed(chunk)
        findings += checker.close()
        total = time.perf_counter() - start
        return first if first is not None else total, total, response.status_code == 200 and not findings


async def _load(url: str, runs: int, concurrency: int) -> tuple[float, list[tuple[float, float, bool]]]:
    gate = asyncio.Semaphore(concurrency)
    limits = httpx2.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as client:
        await _one(client, url, gate)  # warm up: imports, first connection
        start = time.perf_counter()
        results = await asyncio.gather(*(_one(client, url, gate) for _ in range(runs)))
        return time.perf_counter() - start, list(results)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the report. Returns 1 if any stream was invalid."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--store", choices=("memory", "sqlite"), default="sqlite")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(Path(__file__).resolve().parents[1] / "src"), env.get("PYTHONPATH", "")]
        )
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVER, args.store, str(Path(tmp) / "bench.db")],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            if not url.startswith("http://"):
                print("load_server: the server did not start", file=sys.stderr)
                return 2
            elapsed, results = asyncio.run(_load(url, args.runs, args.concurrency))
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.communicate(timeout=10)
    ttfb = [r[0] * 1000 for r in results]
    totals = [r[1] * 1000 for r in results]
    valid = sum(r[2] for r in results)
    print(f"server load: {args.runs} runs, {args.concurrency} in flight, store {args.store}, scripted model, loopback")
    print(f"  runs/s             {args.runs / elapsed:8.1f}")
    print(
        f"  TTFB p50 / p95     {_percentile(ttfb, 0.5):8.1f} / {_percentile(ttfb, 0.95):.1f} ms (max {max(ttfb):.1f})"
    )
    print(f"  run time p50 / p95 {_percentile(totals, 0.5):8.1f} / {_percentile(totals, 0.95):.1f} ms")
    print(f"  valid, complete    {valid}/{args.runs}")
    return 0 if valid == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
