"""Delivery at fleet scale on PostgreSQL: ``python -m benchmarks.fleet_delivery``.

Three measurements, each in processes of their own, on one throwaway PostgreSQL (or ``--pg-url``):

* **appends**: P processes (``--processes``, default 1 and 4), each with W writer threads
  (``--writers``), each thread appending L lines (``--lines``) of a realistic size to its own
  response through its process's one ``PostgresJournal``, all processes released together.
  The figure is lines per second over all processes, and its ratio to the reference in the
  same run: the same lines as bare one-statement ``INSERT``s, each writer thread on a
  connection of its own (no journal, no lock, no ``NOTIFY``), which is what the database
  takes at this concurrency when nothing stands between it and the writers. Each append's
  latency (call to return) is shown too: p50 and p95.
* **fan-out**: one process writes a response (a line every ``--gap-ms``); another holds F
  followers of it (``--followers``, default 1, 100, 1000), each an ``async for`` over
  ``PostgresJournal.follow``. Added latency is from ``append`` returning in the writer to a
  follower having the line (both processes read ``CLOCK_MONOTONIC``), p50 and p95 over every
  (line, follower), as a ratio to the append's own round trip (p50); CPU per line is the
  follower process's CPU time over lines x followers. Followers that could not follow (the
  database refused a connection) are counted, not hidden.
* **memory per open stream**: a server process (``Delivery`` on a ``MemoryJournal``, uvicorn)
  holds one live response; C clients (``--streams``, default 1,000) follow it over HTTP, each
  on its own connection, until every one has its first event. The figures are counts: KiB of
  resident memory and file descriptors per open stream (``/proc/PID/status`` ``VmRSS``,
  ``/proc/PID/fd``), measured from 10 open streams to C.

Client, servers and database share the machine's cores: compare runs from one machine only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG_SCRIPT = ROOT / "scripts" / "pg-test-server"
#: A line the size of a typical text delta envelope.
LINE = json.dumps({"type": "text", "agent": "main", "final": False, "data": "x" * 60}).encode()


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _more_files() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# -- the workers (each in a process of its own) ------------------------------------------


def _appender(url: str, writers: int, lines: int, mode: str) -> dict[str, Any]:
    """Wait for a line on stdin, then append from ``writers`` threads; report wall, CPU and latencies."""
    import psycopg

    from envelope.delivery.postgres import PostgresJournal

    if mode == "served":
        return _served(url, writers, lines)
    journal = PostgresJournal(url) if mode == "journal" else None
    conns = [psycopg.connect(url, autocommit=True) for _ in range(writers)] if mode == "bare" else []
    latencies: list[list[float]] = [[] for _ in range(writers)]

    def write(index: int) -> None:
        run = f"r{uuid.uuid4().hex[:12]}"
        took = latencies[index]
        for seq in range(lines):
            started = time.perf_counter()
            if journal is not None:
                journal.append(run, 0, LINE)
            else:
                conns[index].execute(
                    "INSERT INTO stream_journal (run_id, response, seq, line) VALUES (%s, 0, %s, %s)", (run, seq, LINE)
                )
            took.append(time.perf_counter() - started)
        if journal is not None:
            journal.append(run, 0, b"[DONE]")

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    print("ready", flush=True)
    sys.stdin.readline()
    cpu, wall = time.process_time(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if journal is not None:
        journal.close()
    for conn in conns:
        conn.close()
    return {"wall": wall, "cpu": cpu, "latencies": [x for each in latencies for x in each]}


def _served(url: str, writers: int, lines: int) -> dict[str, Any]:
    """As a server writes: ``writers`` live streams on one event loop, each line journaled (off the loop) and sent
    before the next (``LiveStream.write``)."""
    from envelope.delivery import LiveStream
    from envelope.delivery.postgres import PostgresJournal

    journal = PostgresJournal(url)
    latencies: list[float] = []

    async def write() -> None:
        stream = LiveStream(f"s{uuid.uuid4().hex[:12]}", 0, journal)
        for _ in range(lines):
            started = time.perf_counter()
            await stream.write(LINE)
            latencies.append(time.perf_counter() - started)
        await stream.write(b"[DONE]")

    async def main() -> None:
        await asyncio.gather(*(write() for _ in range(writers)))

    print("ready", flush=True)
    sys.stdin.readline()
    cpu, wall = time.process_time(), time.perf_counter()
    asyncio.run(main())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    journal.close()
    return {"wall": wall, "cpu": cpu, "latencies": latencies}


def _writer(url: str, run: str, lines: int, gap: float) -> dict[str, Any]:
    """Append line 0, wait on stdin (the followers have it), then a line every ``gap`` s; report return times."""
    from envelope.delivery.postgres import PostgresJournal

    journal = PostgresJournal(url)
    journal.append(run, 0, LINE)
    print("ready", flush=True)
    sys.stdin.readline()
    returned: list[float] = []
    trips: list[float] = []
    for _ in range(lines):
        started = time.monotonic()
        journal.append(run, 0, LINE)
        returned.append(time.monotonic())
        trips.append(returned[-1] - started)
        time.sleep(gap)
    journal.append(run, 0, b"[DONE]")
    journal.close()
    return {"returned": returned, "trips": trips}


async def _followers(url: str, run: str, count: int) -> dict[str, Any]:
    """``count`` followers of ``run``; say "ready" once each has line 0; report arrival times and CPU."""
    from envelope.delivery.postgres import PostgresJournal

    journal = PostgresJournal(url)
    arrivals: list[list[float]] = [[] for _ in range(count)]
    first = asyncio.Semaphore(0)
    failed = 0

    async def follow(index: int) -> None:
        nonlocal failed
        try:
            async for seq, _line in journal.follow(run, 0):
                if seq == 0:
                    first.release()
                else:
                    arrivals[index].append(time.monotonic())
        except Exception:  # counted: a follower the database refused
            failed += 1
            first.release()

    tasks = [asyncio.create_task(follow(i)) for i in range(count)]
    for _ in range(count):
        await first.acquire()
    print("ready", flush=True)
    cpu = time.process_time()
    await asyncio.gather(*tasks)
    cpu = time.process_time() - cpu
    journal.close()
    return {"arrivals": arrivals, "cpu": cpu, "failed": failed}


_SERVER = """
import asyncio, sys
from starlette.applications import Starlette
from starlette.routing import Route
import uvicorn
from envelope.delivery import MemoryJournal
from envelope.delivery.asgi import Delivery
from benchmarks.fleet_delivery import LINE, _more_files

_more_files()
delivery = Delivery(MemoryJournal(), keepalive_seconds=600)
done = asyncio.Event()

async def lines():
    yield LINE
    await done.wait()
    yield b"[DONE]"

stream = None

async def follow(request):
    global stream
    if stream is None:
        stream = delivery.start("rmemory", lines())
    return delivery.response(stream)

async def finish(request):
    from starlette.responses import Response
    done.set()
    return Response("ok")

app = Starlette(routes=[Route("/follow", follow), Route("/finish", finish, methods=["POST"])])
config = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", backlog=4096)
uvicorn.Server(config).run()
"""


# -- the driver ---------------------------------------------------------------------------


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.fleet_delivery", *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def _release(procs: list[subprocess.Popen[str]]) -> list[dict[str, Any]]:
    """Wait for every process's "ready", release them together, and read each one's JSON report."""
    for proc in procs:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"a worker failed to start (exit {proc.wait()})")
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        reports.append(json.loads(out.strip().splitlines()[-1]))
    return reports


def bench_appends(url: str, processes: int, writers: int, lines: int, rounds: int = 2) -> dict[str, Any]:
    """Lines per second through the journal and bare, P processes of W writers each."""
    result: dict[str, Any] = {"processes": processes, "writers": writers}
    for mode in ("bare", "journal", "served") * rounds:  # alternated; the best round of each kept
        procs = [_spawn("_appender", url, str(writers), str(lines), mode) for _ in range(processes)]
        reports = _release(procs)
        total = processes * writers * lines
        rate = total / max(r["wall"] for r in reports)
        lat = [x for r in reports for x in r["latencies"]]
        best = result.get(mode)
        if best is None or rate > best["rate"]:
            result[mode] = {"rate": rate, "p50": _pct(lat, 0.5), "p95": _pct(lat, 0.95)}
    result["ratio"] = result["journal"]["rate"] / result["bare"]["rate"]
    result["served_ratio"] = result["served"]["rate"] / result["bare"]["rate"]
    return result


def bench_fanout(url: str, followers: int, lines: int, gap: float) -> dict[str, Any]:
    """Added latency and CPU per line of ``followers`` followers of one response written elsewhere."""
    run = f"f{uuid.uuid4().hex[:12]}"
    writer = _spawn("_writer", url, run, str(lines), str(gap))
    assert writer.stdout is not None
    if writer.stdout.readline().strip() != "ready":
        raise SystemExit("the writer failed to start")
    follow = _spawn("_followers", url, run, str(followers))
    assert follow.stdout is not None
    assert writer.stdin is not None
    if follow.stdout.readline().strip() != "ready":
        raise SystemExit("the followers failed to start")
    writer.stdin.write("go\n")
    writer.stdin.flush()
    wrote = json.loads(writer.communicate(timeout=600)[0].strip().splitlines()[-1])
    got = json.loads(follow.communicate(timeout=600)[0].strip().splitlines()[-1])
    added = [
        arrived - wrote["returned"][seq]
        for each in got["arrivals"]
        for seq, arrived in enumerate(each[: len(wrote["returned"])])
    ]
    ok = followers - got["failed"]
    trip = statistics.median(wrote["trips"])
    return {
        "followers": followers,
        "following": ok,
        "p50": _pct(added, 0.5),
        "p95": _pct(added, 0.95),
        "trip": trip,
        "cpu_per_line": got["cpu"] / max(1, lines * ok),
    }


def _status(pid: int) -> tuple[int, int]:
    """(VmRSS in KiB, open descriptors) of ``pid``."""
    rss = 0
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            rss = int(row.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


async def _open_streams(port: int, count: int) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    async def one() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /follow HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
        await writer.drain()
        seen = b""
        while b"data:" not in seen:
            chunk = await reader.read(4096)
            if not chunk:
                raise SystemExit("a stream closed before its first event")
            seen += chunk
        return reader, writer

    opened = []
    for start in range(0, count, 100):  # in waves, so the listen backlog is never the limit
        opened += await asyncio.gather(*(one() for _ in range(min(100, count - start))))
    return opened


def bench_memory(streams: int) -> dict[str, Any]:
    """KiB and descriptors per open stream of one server process."""
    import socket

    _more_files()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-c", _SERVER, str(port)], cwd=ROOT)
    try:
        for _ in range(600):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.05)

        async def measure() -> dict[str, Any]:
            few = await _open_streams(port, 10)
            rss0, fd0 = _status(server.pid)
            many = await _open_streams(port, streams - 10)
            await asyncio.sleep(0.5)  # let the server settle its buffers (a reading, not a synchronisation)
            rss1, fd1 = _status(server.pid)
            for _, writer in few + many:
                writer.close()
            n = len(many)
            return {"streams": streams, "kib_per_stream": (rss1 - rss0) / n, "fds_per_stream": (fd1 - fd0) / n}

        return asyncio.run(measure())
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextlib.contextmanager
def _database(url: str | None) -> Any:
    if url is not None:
        yield url
        return
    where = tempfile.mkdtemp(prefix="fleet-bench.")
    started = subprocess.run(["bash", str(PG_SCRIPT), "start", where], capture_output=True, text=True, check=True)
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(PG_SCRIPT), "stop", where], capture_output=True, check=False)


def _prepare(url: str) -> None:
    import psycopg

    from envelope.delivery.postgres import create_journal_table

    with psycopg.connect(url, autocommit=True) as conn:
        create_journal_table(conn)


def report(args: argparse.Namespace) -> str:
    """Run the measurements asked for; the Markdown tables."""
    out = []
    with _database(args.pg_url) as url:
        _prepare(url)
        out += [
            "| processes | writers each | bare INSERT lines/s | journal, threads: lines/s | / bare "
            "| append p50 ms | p95 ms | journal, live streams: lines/s | / bare | write p50 ms | p95 ms |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for p in args.processes:
            r = bench_appends(url, p, args.writers, args.lines, args.rounds)
            j, v = r["journal"], r["served"]
            out.append(
                f"| {p} | {args.writers} | {r['bare']['rate']:,.0f} | {j['rate']:,.0f} | {r['ratio']:.2f} "
                f"| {j['p50'] * 1e3:.2f} | {j['p95'] * 1e3:.2f} | {v['rate']:,.0f} | {r['served_ratio']:.2f} "
                f"| {v['p50'] * 1e3:.2f} | {v['p95'] * 1e3:.2f} |"
            )
        out += [
            "",
            "| followers | following | added p50 ms | added p95 ms | p50 / append round trip "
            "| follower CPU per line us |",
            "|---|---|---|---|---|---|",
        ]
        for f in args.followers:
            r = bench_fanout(url, f, args.fanout_lines, args.gap_ms / 1000)
            out.append(
                f"| {f:,} | {r['following']:,} | {r['p50'] * 1e3:.2f} | {r['p95'] * 1e3:.2f} "
                f"| {r['p50'] / r['trip']:.1f} | {r['cpu_per_line'] * 1e6:.1f} |"
            )
    if args.streams:
        m = bench_memory(args.streams)
        out += [
            "",
            "| open streams | KiB per stream | descriptors per stream |",
            "|---|---|---|",
            f"| {m['streams']:,} | {m['kib_per_stream']:.1f} | {m['fds_per_stream']:.2f} |",
        ]
    return "\n".join(out)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> None:
    """The command line (the three private verbs are the worker processes)."""
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        verb, *rest = sys.argv[1:]
        if verb == "_appender":
            out = _appender(rest[0], int(rest[1]), int(rest[2]), rest[3])
        elif verb == "_writer":
            out = _writer(rest[0], rest[1], int(rest[2]), float(rest[3]))
        else:
            _more_files()
            out = asyncio.run(_followers(rest[0], rest[1], int(rest[2])))
        print(json.dumps(out), flush=True)
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet_delivery", description=__doc__.split("\n")[0])
    parser.add_argument("--pg-url", default=None, help="a PostgreSQL URL (default: a throwaway server)")
    parser.add_argument("--processes", type=_ints, default=[1, 4], help="appending processes (default 1,4)")
    parser.add_argument("--writers", type=int, default=16, help="writer threads per process (default 16)")
    parser.add_argument("--lines", type=int, default=300, help="lines per writer (default 300)")
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds of the appends, best kept (2)")
    parser.add_argument("--followers", type=_ints, default=[1, 100, 1000], help="followers (default 1,100,1000)")
    parser.add_argument("--fanout-lines", type=int, default=100, help="lines the fan-out writer appends (100)")
    parser.add_argument("--gap-ms", type=float, default=20.0, help="ms between its lines (default 20)")
    parser.add_argument("--streams", type=int, default=1000, help="open HTTP streams; 0 skips (default 1000)")
    print(report(parser.parse_args()))


if __name__ == "__main__":
    main()
