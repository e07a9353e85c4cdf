"""Scale-out benchmarks on one PostgreSQL: several server processes, and the journal's follower.

``python -m benchmarks.load_scaleout load [--url URL] [--processes 4] [--runs 500] [--concurrency 32]``
starts P server processes (``create_app`` with ``PostgresStore`` + ``PostgresJournal`` on the
scripted model, uvicorn on 127.0.0.1 port 0), then runs N prompts that pause for the
frontend ``confirm`` tool, each on a random process, and resumes each on a random process.
Every stream is validated strictly; at the end the store's log of every run is compared
with what the client received (no line lost or doubled). Prints runs/s and resume latency
(time to first byte, and to the end of the continuation: p50, p95, max).

``python -m benchmarks.load_scaleout follow [--url URL]`` measures how late a follower on
its own connection sees journaled lines, woken by LISTEN/NOTIFY or by polling.

Without ``--url`` a throwaway server is started with ``scripts/pg-test-server`` and stopped
at the end. Bounded: every request has a 120 s timeout; processes are stopped at the end.
Client, servers and database share the machine's cores: compare runs from one machine only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import psycopg

from agent_ref.store.postgres import PostgresJournal, PostgresStore
from envelope import SSEReader, StreamValidator, reconstruct

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent
CONFIRM = "Please confirm: delete the temp files"

_SERVER = """
import sys
from agent_ref import ScriptedModel
from agent_ref.server.app import create_app, serve
from agent_ref.store.postgres import PostgresJournal, PostgresStore
url = sys.argv[1]
app = create_app(store=PostgresStore(url), model_factory=ScriptedModel, journal=PostgresJournal(url))
serve(app, "127.0.0.1", 0, ready=lambda u: (sys.stdout.write(u + "\\n"), sys.stdout.flush()))
"""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@contextlib.contextmanager
def database(given: str | None) -> Iterator[str]:
    """A URL with a fresh schema, on ``given`` or on a throwaway server."""
    directory = None
    url = given
    if url is None:
        directory = tempfile.mkdtemp(prefix="scaleout-pg-")
        started = subprocess.run(
            [str(ROOT / "scripts" / "pg-test-server"), "start", directory], capture_output=True, text=True, check=True
        )
        url = started.stdout.strip()
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in url else "?"
        yield f"{url}{sep}options=-csearch_path%3D{schema}"
    finally:
        with contextlib.suppress(psycopg.Error), psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
        if directory is not None:
            subprocess.run([str(ROOT / "scripts" / "pg-test-server"), "stop", directory], check=False)


def _lines(raw: bytes) -> list[bytes]:
    reader = SSEReader()
    events = reader.feed(raw) + reader.close()
    return [e.data.encode() for e in events]


def _valid(raw: bytes) -> bool:
    checker = StreamValidator()  # strict: warnings count too
    return not [*checker.feed(raw), *checker.close()]


async def _post(
    client: httpx2.AsyncClient, url: str, body: dict[str, Any]
) -> tuple[float, float, httpx2.Response, bytes]:
    start = time.perf_counter()
    first: float | None = None
    raw = bytearray()
    async with client.stream("POST", url, json=body) as response:
        async for chunk in response.aiter_raw():
            if first is None:
                first = time.perf_counter() - start
            raw += chunk
    return first or 0.0, time.perf_counter() - start, response, bytes(raw)


async def _one(
    client: httpx2.AsyncClient, bases: list[str], gate: asyncio.Semaphore, rng: random.Random
) -> dict[str, Any]:
    async with gate:
        _, _, first, raw1 = await _post(client, rng.choice(bases) + "agent/run", {"prompt": CONFIRM})
        lines1 = _lines(raw1)
        blocks = reconstruct(lines1).to_dict()["agents"].popitem()[1]["blocks"]
        (pending,) = next(b["data"] for b in blocks if b["type"] == "awaiting_frontend_tools")
        answer = {
            "agent_uuid": first.headers["x-agent-uuid"],
            "tool_results": [{"tool_use_id": pending["tool_use_id"], "content": "yes"}],
        }
        ttfb, total, second, raw2 = await _post(client, rng.choice(bases) + "agent/tool_results", answer)
        return {
            "run_id": first.headers["x-run-id"],
            "ok": first.status_code == 200 and second.status_code == 200,
            "valid": _valid(raw1) and _valid(raw2),
            "received": [lines1, _lines(raw2)],
            "ttfb": ttfb,
            "total": total,
        }


def _start(url: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx2.get(line, timeout=5)
            return proc, line
        except httpx2.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


async def _load(bases: list[str], runs: int, concurrency: int, seed: int) -> tuple[list[dict[str, Any]], float]:
    rng = random.Random(seed)
    gate = asyncio.Semaphore(concurrency)
    limits = httpx2.Limits(max_connections=concurrency * 2)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as client:
        start = time.perf_counter()
        results = await asyncio.gather(*(_one(client, bases, gate, rng) for _ in range(runs)))
        return list(results), time.perf_counter() - start


async def _compare(url: str, results: list[dict[str, Any]]) -> int:
    store = PostgresStore(url)
    try:
        bad = 0
        for r in results:
            if await store.run_responses(r["run_id"]) != r["received"]:
                bad += 1
        return bad
    finally:
        await store.aclose()


def load(args: argparse.Namespace) -> None:
    """The ``load`` benchmark."""
    with database(args.url) as url:
        procs = [_start(url) for _ in range(args.processes)]
        try:
            results, elapsed = asyncio.run(_load([b for _, b in procs], args.runs, args.concurrency, args.seed))
            mismatched = asyncio.run(_compare(url, results))
        finally:
            for proc, _ in procs:
                proc.terminate()
            for proc, _ in procs:
                proc.wait(30)
                if proc.stdout is not None:
                    proc.stdout.close()
    ttfb = [r["ttfb"] * 1000 for r in results]
    total = [r["total"] * 1000 for r in results]
    print(
        json.dumps(
            {
                "processes": args.processes,
                "runs": args.runs,
                "concurrency": args.concurrency,
                "runs_per_s": round(args.runs / elapsed, 1),
                "all_ok": all(r["ok"] for r in results),
                "all_valid": all(r["valid"] for r in results),
                "runs_whose_stored_log_differs": mismatched,
                "resume_ttfb_ms": {q: round(_percentile(ttfb, p), 1) for q, p in (("p50", 0.5), ("p95", 0.95))},
                "resume_total_ms": {q: round(_percentile(total, p), 1) for q, p in (("p50", 0.5), ("p95", 0.95))},
            },
            indent=1,
        )
    )


def follow(args: argparse.Namespace) -> None:
    """The ``follow`` benchmark: LISTEN/NOTIFY against polling, lines 5 ms apart."""
    with database(args.url) as url:
        out: dict[str, Any] = {}
        for name, listen, poll in (("notify", True, 0.5), ("poll_50ms", False, 0.05), ("poll_10ms", False, 0.01)):
            writer, reader = PostgresJournal(url), PostgresJournal(url, listen=listen, poll_seconds=poll)
            sent: dict[int, float] = {}
            late: list[float] = []
            run_id = f"{name}-run"

            def write(writer: PostgresJournal = writer, sent: dict[int, float] = sent, run_id: str = run_id) -> None:
                time.sleep(0.3)
                for i in range(1, args.lines):
                    sent[i] = time.perf_counter()
                    writer.append(run_id, 0, b"[DONE]" if i == args.lines - 1 else b'{"n":%d}' % i)
                    time.sleep(0.005)

            async def read(
                reader: PostgresJournal = reader,
                sent: dict[int, float] = sent,
                late: list[float] = late,
                run_id: str = run_id,
            ) -> None:
                async for seq, _ in reader.follow(run_id, 0):
                    late.append((time.perf_counter() - sent[seq]) * 1000)

            sent[0] = time.perf_counter()
            writer.append(run_id, 0, b'{"n":0}')  # a follower follows a response that has begun
            thread = threading.Thread(target=write)
            thread.start()
            asyncio.run(read())
            thread.join()
            writer.close()
            reader.close()
            out[name] = {"p50_ms": round(_percentile(late, 0.5), 2), "p95_ms": round(_percentile(late, 0.95), 2)}
        print(json.dumps(out, indent=1))


def main() -> None:
    """Parse the arguments and run one benchmark."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load_scaleout", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    url = "the PostgreSQL server (default: a throwaway one from scripts/pg-test-server)"
    p = sub.add_parser(
        "load",
        help="runs/s and resume latency of several server processes",
        description="Several server processes on one PostgreSQL: prompts that pause, resumed on a random process.",
    )
    p.add_argument("--url", default=None, help=url)
    p.add_argument("--processes", type=int, default=4, help="server processes (default 4)")
    p.add_argument("--runs", type=int, default=500, help="prompts, each paused and resumed (default 500)")
    p.add_argument("--concurrency", type=int, default=32, help="most runs in flight (default 32)")
    p.add_argument("--seed", type=int, default=1, help="seed of the random choice of processes (default 1)")
    f = sub.add_parser(
        "follow",
        help="how late a follower sees journaled lines",
        description="How late a follower on its own connection sees journaled lines (LISTEN/NOTIFY or polling).",
    )
    f.add_argument("--url", default=None, help=url)
    f.add_argument("--lines", type=int, default=200, help="lines appended (default 200)")
    args = parser.parse_args()
    (load if args.what == "load" else follow)(args)


if __name__ == "__main__":
    main()
