"""Do the pytest-benchmark suites and ``envelope bench`` agree? Their ratios, side by side.

Run (from the checkout, with the ``bench`` extra installed)::

    python -m benchmarks.agreement --size-mb 20 --rounds 5 --runs 2

For each run and each stage (``--stages``, default read, validate, migrate and two emit
stages), it takes the stage's ratios (each candidate's median time over ours) twice:

* as ``envelope bench`` does: the stage in a fresh child process
  (``benchmarks.command.stage_in_child``), candidates alternated round by round;
* from the pytest-benchmark suite of that stage (``benchmarks/bench_*.py``), the file
  run in its own ``pytest`` process with ``--benchmark-json``; each benchmark builds its
  input anew, candidates one after the other (``benchmarks.suite``).

Runs alternate which tool goes first. The report (Markdown, printed and written to
``--out``/agreement.md) gives every ratio of every run, the disagreement between the
tools (mean over runs, relative) and the noise (the spread of one tool between runs):
agreement "within noise" means the first is not larger than the second. Ratios only:
absolute times drift on a shared machine.

Owns: this comparison. Does not own: the stages (``benchmarks.engine``), the command's
child processes (``benchmarks.command``), the suites.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
DEFAULT_STAGES: Final = ("read", "validate", "migrate", "emit_small", "emit_10m_escape")
#: Stage -> the suite file that measures it, and the ``-k`` expression that picks its benchmarks.
SUITES: Final[dict[str, tuple[str, str]]] = {
    "read": ("bench_read.py", "test_read"),
    "validate": ("bench_validate.py", "test_validate_read_stream"),
    "migrate": ("bench_migrate.py", "test_migrate"),
    **{
        key: ("bench_emit.py", key)
        for key in ("emit_small", "emit_typical", "emit_100k_ascii", "emit_100k_escape", "emit_10m_ascii")
    },
    "emit_10m_escape": ("bench_emit.py", "emit_10m_escape"),
}


@dataclass
class Ratios:
    """One stage's ratios from both tools over the runs.

    Attributes:
        stage: the stage key.
        ours: the candidate the ratios are taken against (the stage's first).
        bench: candidate -> the ``envelope bench`` ratio of each run.
        suite: candidate -> the pytest-benchmark ratio of each run.
    """

    stage: str
    ours: str = ""
    bench: dict[str, list[float]] = field(default_factory=dict)
    suite: dict[str, list[float]] = field(default_factory=dict)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    return env


def bench_ratios(stage: str, size_mb: float, rounds: int) -> tuple[str, dict[str, float]]:
    """The stage's ratios as ``envelope bench`` measures them (its own child process)."""
    from benchmarks import command

    args = argparse.Namespace(size_mb=size_mb, rounds=rounds, no_memory=True, legacy_capture=None)
    _info, rows = command.stage_in_child(stage, args)
    ratios = {row.candidate: row.ratio for row in rows if row.ratio is not None}
    return rows[0].candidate, ratios


def suite_ratios(stage: str, ours: str, size_mb: float, rounds: int) -> dict[str, float]:
    """The stage's ratios from its pytest-benchmark suite, run in a fresh ``pytest`` process.

    Raises:
        RuntimeError: the suite failed, or measured no ``ours`` row.
    """
    file, expr = SUITES[stage]
    with tempfile.TemporaryDirectory(prefix="agreement-") as tmp:
        out = Path(tmp) / "bench.json"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                f"benchmarks/{file}",
                "-k",
                expr,
                "--benchmark-only",
                f"--benchmark-json={out}",
                "--bench-size-mb",
                repr(size_mb),
                "--bench-rounds",
                str(rounds),
                "-q",
                "-p",
                "no:cacheprovider",
            ],
            cwd=ROOT,
            env=_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{file} -k {expr} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
        doc = json.loads(out.read_text(encoding="utf-8"))
    medians = {
        b["extra_info"]["candidate"]: b["stats"]["median"]
        for b in doc["benchmarks"]
        if b["extra_info"].get("stage") == stage
    }
    if ours not in medians:
        raise RuntimeError(f"{file}: no benchmark of {ours!r} in stage {stage} (got {sorted(medians)})")
    return {name: median / medians[ours] for name, median in medians.items()}


def measure(stages: list[str], size_mb: float, rounds: int, runs: int) -> list[Ratios]:
    """Every stage, ``runs`` times with both tools (which goes first alternates by run)."""
    found = {stage: Ratios(stage) for stage in stages}
    for run in range(runs):
        for stage in stages:
            got = found[stage]
            order = ("bench", "suite") if run % 2 == 0 else ("suite", "bench")
            for tool in order:
                if tool == "bench":
                    got.ours, ratios = bench_ratios(stage, size_mb, rounds)
                    target = got.bench
                else:
                    ratios = suite_ratios(stage, got.ours, size_mb, rounds)  # run 0 ran bench first: ours is known
                    target = got.suite
                for name, ratio in ratios.items():
                    target.setdefault(name, []).append(ratio)
            if sys.stderr.isatty():
                print(f"agreement: run {run + 1}, {stage} done", file=sys.stderr, flush=True)
    return list(found.values())


def _spread(values: list[float]) -> float:
    """Relative spread between runs: (max - min) / mean."""
    return (max(values) - min(values)) / statistics.fmean(values)


def render(results: list[Ratios], size_mb: float, rounds: int, runs: int) -> str:
    """The comparison as Markdown: every ratio, disagreement and noise, and the summary."""
    head = " | ".join([f"bench run {i + 1}" for i in range(runs)] + [f"suite run {i + 1}" for i in range(runs)])
    lines = [
        f"Ratios (candidate's median time / ours), `--size-mb {size_mb:g}`, {rounds} rounds, {runs} runs; "
        "bench = `envelope bench` (a process per stage, candidates alternated), suite = the pytest-benchmark "
        "file (a process per file, a fresh input per benchmark, candidates in sequence).",
        "",
        f"| stage | candidate | {head} | tools differ by | bench noise | suite noise |",
        "|---|---|" + "---|" * (2 * runs) + "---|---|---|",
    ]
    differ: list[float] = []
    noise: list[float] = []
    for r in results:
        for name, bench in r.bench.items():
            suite = r.suite.get(name)
            if name == r.ours or suite is None or len(suite) != len(bench):
                continue
            diff = abs(statistics.fmean(bench) - statistics.fmean(suite)) / statistics.fmean(bench)
            spreads = (_spread(bench), _spread(suite)) if runs > 1 else (float("nan"), float("nan"))
            differ.append(diff)
            noise.extend(spreads)
            cells = " | ".join(f"{v:.2f}" for v in [*bench, *suite])
            lines.append(
                f"| {r.stage} | {name} | {cells} | {100 * diff:.0f}% | {100 * spreads[0]:.0f}% | "
                f"{100 * spreads[1]:.0f}% |"
            )
    if differ and runs > 1:
        lines += [
            "",
            f"Tools differ by a median of {100 * statistics.median(differ):.0f}% (max {100 * max(differ):.0f}%); "
            f"one tool between runs moves by a median of {100 * statistics.median(noise):.0f}% "
            f"(max {100 * max(noise):.0f}%).",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure, print the Markdown, write ``--out``/agreement.md and agreement.json."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.agreement",
        description="Compare the ratios of the pytest-benchmark suites with those of envelope bench.",
    )
    parser.add_argument("--size-mb", type=float, default=20.0, help="the read stream, MiB (default 20)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per candidate (default 5)")
    parser.add_argument("--runs", type=int, default=2, help="runs of each tool, to measure the noise (default 2)")
    parser.add_argument("--stages", default=",".join(DEFAULT_STAGES), help="stages, comma separated")
    parser.add_argument("--out", default="bench-out", help="where to write agreement.md/json (default bench-out)")
    args = parser.parse_args(argv)
    stages = [s for s in args.stages.split(",") if s]
    unknown = sorted(set(stages) - set(SUITES))
    if unknown or not stages:
        parser.error(f"unknown stage {', '.join(unknown) or '(none)'}: choose from {', '.join(SUITES)}")
    if args.size_mb <= 0 or args.rounds < 1 or args.runs < 1:
        parser.error("--size-mb must be positive, --rounds and --runs at least 1")
    results = measure(stages, args.size_mb, args.rounds, args.runs)
    md = render(results, args.size_mb, args.rounds, args.runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "agreement.md").write_text(md, encoding="utf-8")
    doc = [{"stage": r.stage, "ours": r.ours, "bench": r.bench, "suite": r.suite} for r in results]
    (out / "agreement.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
