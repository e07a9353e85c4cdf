"""Scaling benchmark: time and peak memory against input size and number of agents, plus the server.

Run (from the checkout, with the ``bench`` extra installed)::

    python -m benchmarks.scaling --max-size 1GB --out bench-out

It answers "what does it cost me at my size?": for the read path (``StreamReader`` +
``Reconstructor``, the transcript kept), the streaming read (``SSEReader`` + decode, no
transcript), the validator (``StreamValidator``) and the migrator (``XmlMigrator``), it
measures wall time and peak RSS

* at inputs of 1 MB, 10 MB, 100 MB and 1 GB (10^6 bytes; ``--max-size`` cuts the
  ladder, ``--sizes`` replaces it): the 4-agent stream of ``envelope bench``
  (``benchmarks.inputs``) and, for the migrator, the real legacy capture repeated
  (``benchmarks.engine.legacy_input``'s layout, written piece by piece);
* with 1, 10, 100 and 1,000 agents interleaved in one stream of ``--agents-size``
  (100 MB by default): each agent the same lifecycle as in ``benchmarks.inputs``
  (meta_init, turns of thinking, text, citations, tool call and result, meta_final),
  lines interleaved at random in runs of 1 to 8, each agent's order kept (spec §8.3);

and the server path: envelope lines/s through the SSE responses of the real
``agent-ref serve`` under load (``benchmarks.load_server``), at each ``--server-concurrency``.

How each point is measured: the input is generated once into a temporary file (never
held in memory, deleted after its points), then every (path, input) point runs in a
**fresh process** (``python -m benchmarks.scaling --child PATH FILE``) that reads the
file in 64 KiB pieces through the same function ``envelope bench`` times
(``benchmarks.engine.read_ours`` and friends), times the loop (imports excluded) and
reports its own peak RSS (``VmHWM``; a fresh process makes it that point's). A
``baseline`` child reads and copies the same pieces and nothing else: the interpreter,
the imports and the reads. Points are repeated ``--repeat`` times (fresh process each;
the median is kept), inputs over 256 MB once. Writes ``scaling.json``, ``scaling.md``
and ``scaling.png`` into ``--out``.

Owns: the scaling sweep, its N-agent input, its report and plot. Does not own: the
candidates or the 4-agent input (``benchmarks.engine``, ``benchmarks.inputs``), the
server load client (``benchmarks.load_server``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

ROOT: Final = Path(__file__).resolve().parent.parent
#: The migrator's input, in the checkout (``fixtures/corpus/README.md``).
LEGACY_CAPTURE: Final = ROOT / "fixtures" / "corpus" / "legacy_xml_sse_capture.txt"
READ_SIZE: Final = 64 * 1024
#: Inputs above this size run once, not ``--repeat`` times (a 1 GB point takes tens of seconds).
ONCE_ABOVE: Final = 256 * 10**6
SIZE_LADDER: Final = (10**6, 10**7, 10**8, 10**9)
AGENT_LADDER: Final = (1, 10, 100, 1000)

#: Each measured path: its label and what it does. ``baseline`` always runs.
PATHS: Final[dict[str, tuple[str, str]]] = {
    "read": ("read: StreamReader + Reconstructor", "SSE -> envelopes -> blocks; the transcript is kept"),
    "read-stream": ("read, streaming: SSEReader + decode", "SSE -> envelopes, nothing kept"),
    "validate": ("validate: StreamValidator", "every check of spec/validation.md"),
    "migrate": ("migrate: XmlMigrator", "the legacy capture repeated -> envelope lines, warnings to a callback"),
    "baseline": ("baseline: 64 KiB reads copied", "interpreter, imports and the reads alone"),
}
SSE_PATHS: Final = ("read", "read-stream", "validate")
DEFAULT_PATHS: Final = (*SSE_PATHS, "migrate")


# --------------------------------------------------------------------------- inputs


def agent_ids(count: int, *, seed: int) -> list[str]:
    """``count`` distinct UUID4 texts from a fixed seed, as the reference agent writes agent ids."""
    rng = random.Random(seed)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(count)]


def agents_lines(agents: int, total_bytes: int, *, seed: int = 20_240_611) -> Iterator[bytes]:
    """Envelope lines of ``agents`` interleaved agents, until about ``total_bytes`` of SSE.

    The lifecycle of each agent is ``benchmarks.inputs``' (the same generator class,
    so one agent here writes what one of the comparison stream's four writes). Lines are
    interleaved at random in runs of 1 to 8 lines of one agent; each agent keeps its own
    order. At the budget, every agent runs on until its text or tool result block is
    final, then writes ``meta_final``: every block ends complete, and every agent
    appears at least once (1,000 agents at 1 MB overshoot the budget: the report gives
    the real size).

    Args:
        agents: how many agents (at least 1).
        total_bytes: the SSE size to stop at, ``[DONE]`` excluded.
        seed: the random seed.

    Yields:
        Unframed envelope lines (pass each to ``envelope.frame``).
    """
    from benchmarks.inputs import stream_lines  # the comparison stream's lifecycle and interleaving

    return stream_lines(total_bytes, seed=seed, agent_ids=agent_ids(agents, seed=seed))


def write_agents_sse(out: BinaryIO, agents: int, total_bytes: int, *, seed: int = 20_240_611) -> int:
    """Write ``agents_lines`` as SSE to ``out``, ``[DONE]`` last. Returns the bytes written."""
    from envelope import DONE, frame

    written = 0
    buf: list[bytes] = []
    for line in agents_lines(agents, total_bytes, seed=seed):
        buf.append(frame(line))
        if len(buf) >= 512:
            written += out.write(b"".join(buf))
            buf = []
    buf.append(DONE)
    return written + out.write(b"".join(buf))


def write_sse(out: BinaryIO, total_bytes: int) -> int:
    """Write the comparison run's 4-agent stream (``benchmarks.inputs.iter_sse``) to ``out``."""
    from benchmarks.inputs import write_sse as write

    return write(out, total_bytes)


def write_legacy(out: BinaryIO, capture: bytes, total_bytes: int) -> int:
    """Write the legacy capture repeated to about ``total_bytes``, as ``engine.legacy_input`` lays it out.

    The first record (``meta_init``) once, the records up to ``[DONE]`` repeated, then
    ``[DONE]``: one long turn. Written piece by piece, never held whole.
    """
    done = capture.rfind(b"data: [DONE]")
    body = capture if done < 0 else capture[:done]
    head, sep, rest = body.partition(b"\n\n")
    if not rest:
        head, sep, rest = b"", b"", body
    times = max(1, (total_bytes - len(head) - len(sep)) // len(rest)) if rest else 1
    written = out.write(head + sep)
    block = max(1, (1 << 20) // len(rest))  # about 1 MiB per write
    while times > 0:
        n = min(block, times)
        written += out.write(rest * n)
        times -= n
    return written + out.write(b"data: [DONE]\n\n")


# --------------------------------------------------------------------------- the child


def _peak_rss() -> int:
    """This process's peak RSS in bytes (``VmHWM``: per process, reset by exec)."""
    try:
        for row in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) * 1024
    except OSError:
        pass
    import resource  # not Linux: ru_maxrss (bytes on macOS)

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _runner(path: str) -> Callable[[Iterable[bytes]], int]:
    from benchmarks import engine

    runners: dict[str, Callable[[Iterable[bytes]], int]] = {
        "read": engine.read_ours,
        "read-stream": engine.read_ours_stream,
        "validate": engine.validate_ours,
        "migrate": engine.migrate_ours,
        "baseline": engine.read_copy,
    }
    return runners[path]


def run_child(path: str, file: str) -> dict[str, Any]:
    """One point, in this (fresh) process: ``path`` over ``file`` in 64 KiB reads.

    Returns:
        ``seconds`` (wall time of the loop, imports excluded), ``cpu_seconds`` (this
        process's CPU time over the same loop), ``peak_rss`` (bytes, whole process),
        ``result`` (events read, violations found or lines written: what the path returns).
    """
    run = _runner(path)
    gc.collect()
    with open(file, "rb", buffering=0) as f:
        pieces = iter(lambda: f.read(READ_SIZE), b"")
        start, cpu = time.perf_counter(), time.process_time()
        result = run(pieces)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_rss": _peak_rss(), "result": result}


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    return env


def _in_child(path: str, file: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.scaling", "--child", path, str(file)],
        capture_output=True,
        text=True,
        env=_child_env(),
        cwd=ROOT,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{path} on {file.name} failed: {proc.stderr.strip()[-2000:]}")
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


# --------------------------------------------------------------------------- points


@dataclass
class Point:
    """One measured point: a path over one input, median of its repetitions.

    Attributes:
        sweep: ``size`` or ``agents``.
        path: a key of ``PATHS``.
        agents: agents interleaved in the input (the legacy capture: 1).
        target_bytes: the size asked for.
        input_bytes: the size of the input file.
        seconds: median wall time of the loop.
        cpu_seconds: median CPU time of the loop (the figure the growth fit uses: on a
            shared machine wall time also counts the time other jobs held the CPU).
        peak_rss: median peak RSS of the process, bytes.
        result: what the path returned (events, violations or lines), the same every time.
        repeats: the fresh processes run for this point.
        all_seconds: every repetition's time.
    """

    sweep: str
    path: str
    agents: int
    target_bytes: int
    input_bytes: int
    seconds: float
    cpu_seconds: float
    peak_rss: int
    result: int
    repeats: int
    all_seconds: list[float] = field(default_factory=list)

    @property
    def mb(self) -> float:
        """The input in MB (10^6 bytes)."""
        return self.input_bytes / 1e6

    @property
    def mb_per_s(self) -> float:
        """Input MB per second of CPU time."""
        return self.mb / self.cpu_seconds

    @property
    def ms_per_mb(self) -> float:
        """CPU milliseconds per input MB: flat when cost grows linearly."""
        return 1000 * self.cpu_seconds / self.mb


def measure_point(sweep: str, path: str, file: Path, agents: int, target: int, repeat: int) -> Point:
    """Run ``path`` over ``file`` in ``repeat`` fresh processes (once above 256 MB); keep the medians."""
    size = file.stat().st_size
    times = 1 if size > ONCE_ABOVE else repeat
    docs = [_in_child(path, file) for _ in range(times)]
    results = {d["result"] for d in docs}
    if len(results) != 1:
        raise RuntimeError(f"{path} on {file.name}: repetitions disagree: {sorted(results)}")
    return Point(
        sweep=sweep,
        path=path,
        agents=agents,
        target_bytes=target,
        input_bytes=size,
        seconds=statistics.median(d["seconds"] for d in docs),
        cpu_seconds=statistics.median(d["cpu_seconds"] for d in docs),
        peak_rss=int(statistics.median(d["peak_rss"] for d in docs)),
        result=results.pop(),
        repeats=times,
        all_seconds=[d["seconds"] for d in docs],
    )


@dataclass
class ServerPoint:
    """The server path at one load level (``benchmarks.load_server.Load``, summarised)."""

    concurrency: int
    runs: int
    seconds: float
    lines: int
    nbytes: int
    runs_per_s: float
    lines_per_s: float
    mb_per_s: float
    ttfb_p50_ms: float
    ttfb_p95_ms: float
    valid: int


def measure_server(runs: int, concurrency: int) -> ServerPoint:
    """``agent-ref serve`` (a fresh server process) under ``runs`` runs, ``concurrency`` in flight."""
    from benchmarks import load_server

    load = load_server.measure(runs, concurrency, "cli")
    return ServerPoint(
        concurrency=concurrency,
        runs=runs,
        seconds=load.seconds,
        lines=load.lines,
        nbytes=load.nbytes,
        runs_per_s=load.runs_per_s,
        lines_per_s=load.lines_per_s,
        mb_per_s=load.mb_per_s,
        ttfb_p50_ms=load_server.percentile(load.ttfb_ms, 0.5),
        ttfb_p95_ms=load_server.percentile(load.ttfb_ms, 0.95),
        valid=load.valid,
    )


@dataclass
class Report:
    """Everything one run measured, and how."""

    settings: dict[str, Any]
    machine: dict[str, str]
    points: list[Point] = field(default_factory=list)
    server: list[ServerPoint] = field(default_factory=list)

    def of(self, sweep: str, path: str) -> list[Point]:
        """The points of one sweep and path, smallest input (or fewest agents) first."""
        chosen = [p for p in self.points if p.sweep == sweep and p.path == path]
        return sorted(chosen, key=lambda p: (p.agents, p.input_bytes) if sweep == "agents" else (p.input_bytes,))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (``scaling.json``)."""
        return {
            "settings": self.settings,
            "machine": self.machine,
            "points": [asdict(p) for p in self.points],
            "server": [asdict(s) for s in self.server],
            "fits": {path: fit(self.of("size", path)) for path in PATHS if self.of("size", path)},
        }


def fit(points: Sequence[Point]) -> dict[str, float | None]:
    """How time and memory grow with size over ``points`` (one path's size sweep).

    Returns:
        ``time_exponent``: k in CPU time ~ size^k (least squares on log-log; 1 is linear,
        ``None`` with fewer than two sizes); ``ms_per_mb_spread``: the largest over the
        smallest ms per MB among inputs of 10 MB and more (the 1 MB point carries fixed
        costs); ``rss_growth``: peak RSS at the largest input over the smallest.
    """
    if len(points) < 2:
        return {"time_exponent": None, "ms_per_mb_spread": None, "rss_growth": None}
    xs = [math.log(p.input_bytes) for p in points]
    ys = [math.log(p.cpu_seconds) for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else None
    big = [p.ms_per_mb for p in points if p.input_bytes >= 10**7] or [p.ms_per_mb for p in points]
    return {
        "time_exponent": slope,
        "ms_per_mb_spread": max(big) / min(big),
        "rss_growth": points[-1].peak_rss / points[0].peak_rss,
    }


# --------------------------------------------------------------------------- the sweep


def parse_size(text: str) -> int:
    """``1MB`` -> 1,000,000; ``64KB``, ``1GB``, ``2.5MB`` and plain byte counts too (SI units).

    Raises:
        ValueError: not a positive size.
    """
    units = {"GB": 10**9, "MB": 10**6, "KB": 10**3, "B": 1}
    raw = text.strip().upper().replace(" ", "")
    factor = 1
    for unit, scale in units.items():
        if raw.endswith(unit):
            raw, factor = raw[: -len(unit)], scale
            break
    try:
        value = float(raw) * factor
    except ValueError:
        raise ValueError(f"not a size: {text!r} (for example 10MB or 1GB)") from None
    if not value >= 1:
        raise ValueError(f"not a positive size: {text!r}")
    return int(value)


def size_label(n: int) -> str:
    """A size as the report names it: ``1 GB``, ``100 MB``, ``20 KB`` (10^3 units)."""
    for unit, factor in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= factor:
            value = n / factor
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


def _progress(text: str) -> None:
    if sys.stderr.isatty():
        print(f"scaling: {text}", file=sys.stderr, flush=True)


def _machine() -> dict[str, str]:
    import msgspec

    return {
        "cpus": str(os.cpu_count()),
        "python": platform.python_version(),
        "msgspec": msgspec.__version__,
        "platform": platform.platform(),
    }


def run(args: argparse.Namespace) -> Report:
    """The whole sweep for parsed options (see ``main``)."""
    report = Report(settings=_settings(args), machine=_machine())
    report.settings["load"] = [_load()]
    capture = LEGACY_CAPTURE.read_bytes() if "migrate" in args.paths else b""
    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        folder = Path(tmp)
        for size in args.sizes:
            sse = folder / f"sse-{size}.sse"
            with sse.open("wb") as out:
                write_sse(out, size)
            for path in ("baseline", *[p for p in args.paths if p in SSE_PATHS]):
                _progress(f"{path} on {size_label(size)}")
                report.points.append(measure_point("size", path, sse, 4, size, args.repeat))
            sse.unlink()
            if "migrate" in args.paths:
                legacy = folder / f"legacy-{size}.sse"
                with legacy.open("wb") as out:
                    write_legacy(out, capture, size)
                _progress(f"migrate on {size_label(size)}")
                report.points.append(measure_point("size", "migrate", legacy, 1, size, args.repeat))
                legacy.unlink()
        for agents in args.agents:
            sse = folder / f"agents-{agents}.sse"
            with sse.open("wb") as out:
                write_agents_sse(out, agents, args.agents_size)
            for path in ("baseline", *[p for p in args.paths if p in SSE_PATHS]):
                _progress(f"{path} with {agents} agents")
                report.points.append(measure_point("agents", path, sse, agents, args.agents_size, args.repeat))
            sse.unlink()
    for concurrency in args.server_concurrency:
        _progress(f"server, {concurrency} in flight")
        report.server.append(measure_server(args.server_runs, concurrency))
    report.settings["load"].append(_load())
    return report


def _load() -> float:
    """The 1-minute load average (how busy the machine was), ``nan`` where unknown."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def _without_out(argv: list[str]) -> list[str]:
    """``argv`` less ``--out DIR``: where the files went is no setting of the measurement."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            kept.append(arg)
    return kept


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "sizes": args.sizes,
        "agents": args.agents,
        "agents_size": args.agents_size,
        "paths": list(args.paths),
        "repeat": args.repeat,
        "once_above": ONCE_ABOVE,
        "server_runs": args.server_runs,
        "server_concurrency": args.server_concurrency,
        "command": " ".join(["python -m benchmarks.scaling", *_without_out(args.argv)]),
    }


# --------------------------------------------------------------------------- report


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def _size_rows(report: Report) -> list[str]:
    rows = [
        "| path | input | wall s | CPU s | MB/s (CPU) | CPU ms per MB | peak RSS MiB | over baseline MiB "
        "| over baseline KiB per MB | result |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    base = {p.target_bytes: p.peak_rss for p in report.of("size", "baseline")}
    for path in PATHS:
        for p in report.of("size", path):
            floor = base.get(p.target_bytes)  # the baseline process on the SSE input of the same size
            over = per_mb = "-"
            if floor is not None and path != "baseline":
                over, per_mb = _mib(p.peak_rss - floor), f"{(p.peak_rss - floor) / 1024 / p.mb:.0f}"
            rows.append(
                f"| {PATHS[path][0]} | {size_label(p.input_bytes)} | {p.seconds:.3f} | {p.cpu_seconds:.3f} | "
                f"{p.mb_per_s:.1f} | {p.ms_per_mb:.2f} | {_mib(p.peak_rss)} | {over} | {per_mb} | {_result(p)} |"
            )
    return rows


def _result(p: Point) -> str:
    what = {
        "read": "events",
        "read-stream": "events",
        "validate": "violations",
        "migrate": "lines",
        "baseline": "reads",
    }
    return f"{p.result:,} {what[p.path]}"


def _agent_rows(report: Report) -> list[str]:
    rows = [
        "| path | agents | input | wall s | CPU s | CPU ms per MB | peak RSS MiB | over baseline MiB | result |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    base = {p.agents: p.peak_rss for p in report.of("agents", "baseline")}
    for path in PATHS:
        for p in report.of("agents", path):
            floor = base.get(p.agents)
            over = "-" if floor is None or path == "baseline" else _mib(p.peak_rss - floor)
            rows.append(
                f"| {PATHS[path][0]} | {p.agents:,} | {size_label(p.input_bytes)} | {p.seconds:.3f} | "
                f"{p.cpu_seconds:.3f} | {p.ms_per_mb:.2f} | {_mib(p.peak_rss)} | {over} | {_result(p)} |"
            )
    return rows


def _fit_rows(report: Report) -> list[str]:
    rows = [
        "| path | CPU time ~ size^k, k | CPU ms per MB, largest / smallest (>= 10 MB) "
        "| peak RSS, largest / smallest input |",
        "|---|---|---|---|",
    ]
    for path in PATHS:
        f = fit(report.of("size", path))
        if f["time_exponent"] is None:
            continue
        rows.append(
            f"| {PATHS[path][0]} | {f['time_exponent']:.2f} | {f['ms_per_mb_spread']:.2f} | {f['rss_growth']:.2f} |"
        )
    return rows


def _server_rows(report: Report) -> list[str]:
    rows = [
        "| in flight | runs | runs/s | lines/s | MB/s | lines per run | TTFB p50 / p95 ms | valid |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in report.server:
        rows.append(
            f"| {s.concurrency} | {s.runs} | {s.runs_per_s:.1f} | {s.lines_per_s:,.0f} | {s.mb_per_s:.2f} | "
            f"{s.lines / s.runs:.0f} | {s.ttfb_p50_ms:.0f} / {s.ttfb_p95_ms:.0f} | {s.valid}/{s.runs} |"
        )
    return rows


def render_markdown(report: Report) -> str:
    """The report as Markdown: settings, the two sweeps, the growth fits and the server."""
    st, m = report.settings, report.machine
    lines = [
        "## Scaling",
        "",
        f"Command: `{st['command']}`. Machine: {m['cpus']} CPUs, Python {m['python']}, msgspec {m['msgspec']}, "
        f"{m['platform']}.",
        f"Each point in a fresh process; median of {st['repeat']} processes (inputs over "
        f"{size_label(st['once_above'])}: one). Time: the read loop, imports excluded; CPU time is the process's "
        "own (wall time also counts other jobs on a shared machine), and the per-MB and growth figures use it. "
        f"Load average (1 min) at start and end: {st['load'][0]:.1f}, {st['load'][1]:.1f}. Peak RSS: the process's "
        "`VmHWM`; *over baseline*: minus the baseline process on the same input (interpreter, imports, reads). "
        "MB = 10^6 bytes; MiB = 2^20.",
        "",
        "### Input size (the 4-agent stream of `envelope bench`; migrate: the legacy capture repeated)",
        "",
        *_size_rows(report),
        "",
        "### How cost grows with size",
        "",
        *_fit_rows(report),
        "",
    ]
    if report.of("agents", "baseline"):
        lines += [
            f"### Interleaved agents ({size_label(st['agents_size'])} asked for; every agent ends its blocks, "
            "so 1,000 agents overshoot)",
            "",
            *_agent_rows(report),
            "",
        ]
    if report.server:
        lines += [
            f"### Server: `agent-ref serve` (SQLite, scripted model) on loopback, {st['server_runs']} runs per level",
            "",
            *_server_rows(report),
            "",
            "Lines/s: envelope lines received over all responses per second of wall time; client and server share "
            "the machine's CPUs, so it is a floor for the server alone.",
            "",
        ]
    return "\n".join(lines)


_COLOURS: Final = {
    "read": "#1f77b4",
    "read-stream": "#2ca02c",
    "validate": "#d62728",
    "migrate": "#9467bd",
    "baseline": "#7f7f7f",
}


def _log_axes(ax: Any, ticker: Any) -> None:
    """Log-log, ticks as plain numbers (0.1, 10, 1000; y also 2 and 5), no labels on minor ticks."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: f"{v:g}"))
        axis.set_minor_formatter(ticker.NullFormatter())


def render_png(report: Report, out: Path) -> None:
    """The plot: size sweep (time, ms per MB, peak RSS), agents sweep (ms per MB, peak RSS), server.

    Raises:
        ImportError: matplotlib is not installed (the ``bench`` extra).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    (t_ax, r_ax, m_ax), (a_ax, am_ax, s_ax) = axes
    _plot_sweeps(report, t_ax, r_ax, m_ax, a_ax, am_ax)
    _label_axes(report, ticker, t_ax, r_ax, m_ax, a_ax, am_ax)
    _plot_server(report, ticker, s_ax)
    handles, labels = t_ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
    fig.suptitle("envelope scaling: each point in a fresh process (medians)")
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _plot_sweeps(report: Report, t_ax: Any, r_ax: Any, m_ax: Any, a_ax: Any, am_ax: Any) -> None:
    """One line per path on the size panels and the agents panels, and the slope-1 guide."""
    for path in PATHS:
        pts = report.of("size", path)
        if pts:
            kw: dict[str, Any] = {"color": _COLOURS[path], "marker": "o", "label": PATHS[path][0]}
            if path == "baseline":
                kw["linestyle"] = "--"
            x = [p.mb for p in pts]
            t_ax.plot(x, [p.cpu_seconds for p in pts], **kw)
            r_ax.plot(x, [p.ms_per_mb for p in pts], **kw)
            m_ax.plot(x, [p.peak_rss / 2**20 for p in pts], **kw)
        apts = report.of("agents", path)
        if apts:
            kw = {"color": _COLOURS[path], "marker": "s", "label": PATHS[path][0]}
            if path == "baseline":
                kw["linestyle"] = "--"
            a_ax.plot([p.agents for p in apts], [p.ms_per_mb for p in apts], **kw)
            am_ax.plot([p.agents for p in apts], [p.peak_rss / 2**20 for p in apts], **kw)
    sizes = [p.mb for p in report.of("size", "baseline")]
    read = report.of("size", "read")
    if sizes and read:  # a line of slope 1 through the read path's smallest point
        t_ax.plot(
            [sizes[0], sizes[-1]],
            [read[0].cpu_seconds, read[0].cpu_seconds * sizes[-1] / sizes[0]],
            color="black",
            linestyle=":",
            label="linear (slope 1)",
        )


def _label_axes(report: Report, ticker: Any, t_ax: Any, r_ax: Any, m_ax: Any, a_ax: Any, am_ax: Any) -> None:
    """Log scales, titles, axis labels and grids of the five sweep panels."""
    for ax, title, ylabel in (
        (t_ax, "CPU time vs input size", "CPU seconds (log)"),
        (r_ax, "CPU time per MB vs input size", "CPU ms per MB (log)"),
        (m_ax, "peak RSS vs input size", "peak RSS, MiB (log)"),
    ):
        _log_axes(ax, ticker)
        ax.set_xlabel("input, MB (log)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    agents_mb = size_label(report.settings["agents_size"])
    for ax, title, ylabel in (
        (a_ax, f"CPU time per MB vs agents ({agents_mb})", "CPU ms per MB (log)"),
        (am_ax, f"peak RSS vs agents ({agents_mb})", "peak RSS, MiB (log)"),
    ):
        _log_axes(ax, ticker)
        ax.set_xlabel("agents interleaved in one stream (log)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    for ax in (m_ax, am_ax):  # at least a decade, so a flat line looks flat and the axis has labels
        low, high = ax.get_ylim()
        ax.set_ylim(min(low, 10.0), max(high, 100.0))


def _plot_server(report: Report, ticker: Any, s_ax: Any) -> None:
    """The server panel: SSE lines/s per concurrency, or an empty panel when not measured."""
    if not report.server:
        s_ax.set_axis_off()
        return
    conc = [s.concurrency for s in report.server]
    s_ax.plot(conc, [s.lines_per_s for s in report.server], color="#ff7f0e", marker="D", label="lines/s")
    s_ax.set_xscale("log")
    s_ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: f"{v:g}"))
    s_ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    s_ax.set_xticks(conc)
    s_ax.set_xlabel("runs in flight (log)")
    s_ax.set_ylabel("envelope lines/s, all responses")
    s_ax.set_ylim(bottom=0)
    s_ax.set_title("server: agent-ref serve, SSE lines/s under load")
    s_ax.grid(True, which="both", alpha=0.3)


# --------------------------------------------------------------------------- command


def _int_list(text: str) -> list[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise ValueError(f"give positive integers separated by commas, got {text!r}")
    return values


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scaling",
        description="Time and peak memory of read, validate and migrate against input size and agents; "
        "lines/s of agent-ref serve under load. Each point in a fresh process.",
        epilog="example: python -m benchmarks.scaling --max-size 1GB --out bench-out",
    )
    parser.add_argument("--max-size", default="1GB", help="largest input of the ladder 1MB..1GB (default 1GB)")
    parser.add_argument("--sizes", help="input sizes instead of the ladder, comma separated (e.g. 20KB,200KB)")
    parser.add_argument("--agents", default="1,10,100,1000", help="agents per stream (default 1,10,100,1000)")
    parser.add_argument("--agents-size", default="100MB", help="stream size of the agents sweep (default 100MB)")
    parser.add_argument(
        "--paths", default=",".join(DEFAULT_PATHS), help=f"paths to measure (default {','.join(DEFAULT_PATHS)})"
    )
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per point, median kept (default 3)")
    parser.add_argument("--server-runs", type=int, default=200, help="runs per server load level (default 200)")
    parser.add_argument(
        "--server-concurrency", default="1,10,50", help="runs in flight, one server per level (default 1,10,50)"
    )
    parser.add_argument("--no-server", action="store_true", help="leave out the server path")
    parser.add_argument("--out", default="bench-out", help="where to write scaling.{json,md,png} (default bench-out)")
    parser.add_argument("--child", nargs=2, metavar=("PATH", "FILE"), help=argparse.SUPPRESS)
    return parser


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace, argv: list[str]) -> None:
    """Turn the option strings into values; ``parser.error`` (exit 2) on a bad one."""
    try:
        max_size = parse_size(args.max_size)
        args.sizes = sorted({parse_size(s) for s in args.sizes.split(",")}) if args.sizes else []
        args.agents = sorted(set(_int_list(args.agents)))
        args.agents_size = min(parse_size(args.agents_size), max([max_size, *args.sizes]))
        args.server_concurrency = [] if args.no_server else _int_list(args.server_concurrency)
    except ValueError as exc:
        parser.error(str(exc))
    if not args.sizes:
        args.sizes = [s for s in SIZE_LADDER if s <= max_size] or [max_size]
    args.paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = sorted(set(args.paths) - set(DEFAULT_PATHS))
    if unknown or not args.paths:
        parser.error(f"unknown path {', '.join(unknown) or '(none)'}: choose from {', '.join(DEFAULT_PATHS)}")
    if args.repeat < 1 or args.server_runs < 1:
        parser.error("--repeat and --server-runs must be at least 1")
    if "migrate" in args.paths and not LEGACY_CAPTURE.is_file():
        parser.error(f"the legacy capture is missing: {LEGACY_CAPTURE.relative_to(ROOT)} (or leave out migrate)")
    args.argv = argv


def main(argv: list[str] | None = None) -> int:
    """Run the sweep, print the Markdown report, write ``scaling.{json,md,png}`` into ``--out``.

    Returns:
        0, or 1 if a stream failed the validator or a server response was invalid.
    """
    argv = sys.argv[1:] if argv is None else argv
    parser = _parser()
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_child(*args.child)))
        return 0
    _check(parser, args, argv)
    report = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(report.to_json(), indent=1) + "\n", encoding="utf-8")
    md = render_markdown(report)
    (out / "scaling.md").write_text(md, encoding="utf-8")
    print(md)
    try:
        render_png(report, out / "scaling.png")
    except ImportError:
        print("scaling: matplotlib is not installed, so no scaling.png (pip install -e '.[bench]')", file=sys.stderr)
    print(f"wrote {out / 'scaling.md'}, {out / 'scaling.json'}, {out / 'scaling.png'}")
    bad = [p for p in report.points if p.path == "validate" and p.result != 0]
    bad_server = [s for s in report.server if s.valid != s.runs]
    for p in bad:
        print(f"scaling: the validator found {p.result} violations in a generated input", file=sys.stderr)
    for s in bad_server:
        print(f"scaling: {s.runs - s.valid} invalid server responses at {s.concurrency} in flight", file=sys.stderr)
    return 1 if bad or bad_server else 0


if __name__ == "__main__":
    sys.exit(main())
