"""``envelope bench``: the command around the benchmark engine, and its child processes.

Owns: checking the options, finding the legacy capture, running each stage in a fresh
child process (``python -m benchmarks.command --stage-child KEY ...``, the default) or
all in this process (``--in-process``), the read stage's RSS children
(``--rss-child KEY:SIZE``), progress on a terminal, and writing ``bench.md`` and
``bench.png``. Does not own: the stages, timing or reports (``benchmarks.engine``), or
the inputs (``benchmarks.inputs``).

Why a process per stage: in one process the figures depended on which stages ran
before (100 MiB: read vs ``json.loads`` 1.74x in the one-process run, 2.03x with a
process per stage; validate vs read 0.94x vs 1.20x): the interpreter's heap, allocator
arenas and collector state carry over from stage to stage, and no one of them could be
pinned as the cause. A fresh process gives every stage the same start, whatever ran
before; within a stage, candidates still alternate round by round on the same input.
README "Benchmarks" has the measurements.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from envelope._cli_errors import CliError

from . import engine

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
#: The migrate stage's input, in the checkout (``fixtures/corpus/README.md``).
LEGACY_CAPTURE = ROOT / "fixtures" / "corpus" / "legacy_xml_sse_capture.txt"
WHERE = "envelope bench"


def _child_env() -> dict[str, str]:
    """The environment of a child: this checkout (and its ``src``) importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    return env


def _child(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.command", *args],
        capture_output=True,
        text=True,
        env=_child_env(),
        cwd=ROOT,
        check=False,
    )


def rss_of(key: str, size: int) -> int | None:
    """Peak RSS of a child process running one read candidate (``engine.run_reader``)."""
    proc = _child(["--rss-child", f"{key}:{size}"])
    if proc.returncode != 0:
        print(f"{WHERE}: warning: RSS check of {key} failed: {proc.stderr.strip()}", file=sys.stderr)
        return None
    return int(proc.stdout.strip())


def _peak_rss() -> int:
    """This process's peak RSS in bytes: ``VmHWM`` (reset by exec, unlike ``ru_maxrss``)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource  # macOS and others: ru_maxrss, in bytes there

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def read_capture(path: str | None) -> bytes | None:
    """The migrate stage's input: ``path``, else the checkout's capture; ``None`` if absent.

    Raises:
        CliError: ``path`` was given and cannot be read (spec/cli.md C3-a).
    """
    if path is None:
        if LEGACY_CAPTURE.is_file():
            return LEGACY_CAPTURE.read_bytes()
        print(f"{WHERE}: warning: legacy capture not found ({LEGACY_CAPTURE}); no migrate figures", file=sys.stderr)
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        todo = {FileNotFoundError: "check the path", IsADirectoryError: "give a file, not a folder"}.get(type(exc), "")
        raise CliError(path, exc.strerror or str(exc), todo) from None


def stage_in_child(key: str, args: argparse.Namespace) -> tuple[engine.StageInfo, list[engine.Row]]:
    """Run one stage in a fresh interpreter and return what it measured."""
    argv = ["--stage-child", key, "--size-mb", repr(args.size_mb), "--rounds", str(args.rounds)]
    if args.no_memory:
        argv.append("--no-memory")
    capture = args.legacy_capture or (str(LEGACY_CAPTURE) if LEGACY_CAPTURE.is_file() else None)
    if capture is not None:
        argv += ["--legacy-capture", capture]
    proc = _child(argv)
    if proc.returncode != 0:
        raise CliError(WHERE, f"stage {key} failed in its child process: {proc.stderr.strip()[-2000:]}")
    if proc.stderr:
        print(proc.stderr, end="", file=sys.stderr)
    doc = json.loads(proc.stdout)
    return engine.StageInfo(**doc["stage"]), [engine.Row(**row) for row in doc["rows"]]


def _stage_child(key: str, args: argparse.Namespace) -> int:
    """The child's side: run stage ``key`` here, print its rows as JSON."""
    capture = read_capture(args.legacy_capture) if key == "migrate" else None
    sizes = engine.Sizes.from_mb(args.size_mb, capture)
    info, rows = engine.run_one(key, sizes, args.rounds, memory=not args.no_memory, rss=rss_of)
    doc = {"stage": dataclasses.asdict(info), "rows": [dataclasses.asdict(row) for row in rows]}
    print(json.dumps(doc))
    return 0


@contextmanager
def _progress() -> Iterator[Callable[[str], None]]:
    """Stage by stage, a transient status line on a terminal; nothing otherwise (spec/cli.md C6)."""
    if not sys.stderr or not sys.stderr.isatty():
        yield lambda _text: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    with console.status(f"{WHERE}: starting") as status:
        yield lambda text: status.update(f"{WHERE}: {text}")


def run(args: argparse.Namespace) -> int:
    """``envelope bench`` with its parsed options: measure, print the table, write the files.

    Raises:
        CliError: a bad option, an unreadable ``--legacy-capture``, or a failed stage.
    """
    if not args.size_mb > 0:
        raise CliError(WHERE, f"--size-mb must be positive, got {args.size_mb:g}", "for example --size-mb 10")
    if args.rounds < 1:
        raise CliError(WHERE, f"--rounds must be at least 1, got {args.rounds}", "for example --rounds 5")
    known = [key for key, _ in engine.STAGES]
    unknown = sorted(set(args.stage or ()) - set(known))
    if unknown:
        raise CliError(WHERE, f"unknown stage {', '.join(unknown)}", f"choose from {', '.join(known)}")
    capture = None
    if not args.stage or "migrate" in args.stage:
        capture = read_capture(args.legacy_capture)
    out_dir = Path(args.out)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CliError(str(out_dir), exc.strerror or str(exc), "write somewhere else with --out DIR") from None
    runner = None if args.in_process else (lambda key: stage_in_child(key, args))
    with _progress() as progress:
        report = engine.run(
            args.size_mb,
            args.rounds,
            memory=not args.no_memory,
            only=tuple(args.stage or ()),
            progress=progress,
            rss=rss_of,
            cpuinfo=_cpuinfo(),
            legacy_capture=capture,
            runner=runner,
        )
    print(engine.render_table(report))
    md = out_dir / "bench.md"
    md.write_text(engine.render_markdown(report), encoding="utf-8")
    print(f"\nwrote {md}")
    png = out_dir / "bench.png"
    try:
        engine.render_png(report, str(png))
    except ImportError:
        print(
            f"{WHERE}: warning: matplotlib is not installed, so no bench.png; "
            "install the bench extra: python -m pip install -e '.[bench]'",
            file=sys.stderr,
        )
    else:
        print(f"wrote {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """The child processes' entry point (``python -m benchmarks.command``)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.command",
        description="The child processes of `envelope bench` (run by it, not by hand): one stage, "
        "or the read stage's memory measurement; each prints its rows as JSON.",
    )
    parser.add_argument(
        "--rss-child", metavar="KEY:SIZE", help="measure the peak RSS of reader KEY over a SIZE-byte stream"
    )
    parser.add_argument("--stage-child", metavar="KEY", help="run the stage KEY and print its rows")
    parser.add_argument("--size-mb", type=float, default=100.0, help="the stage's input size in MiB (default 100)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the stage (default 5)")
    parser.add_argument("--no-memory", action="store_true", help="leave out the peak-memory measurements")
    parser.add_argument("--legacy-capture", metavar="FILE", help="the legacy XML capture of the migrate stages")
    args = parser.parse_args(argv)
    if args.rss_child:
        key, _, size = args.rss_child.partition(":")
        engine.run_reader(key, int(size))
        print(_peak_rss())
        return 0
    if args.stage_child:
        return _stage_child(args.stage_child, args)
    parser.error("give --stage-child KEY or --rss-child KEY:SIZE (envelope bench starts these)")
    return 2  # not reached: error() exits


if __name__ == "__main__":
    sys.exit(main())
