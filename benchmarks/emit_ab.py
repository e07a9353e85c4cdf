"""Before/after for the emitter, in one process: an older ``Emitter`` against today's and bare msgspec.

Run: ``python -m benchmarks.emit_ab --before REV`` (a git revision of this checkout, for
example ``54da1bd``, the emitter before issue 31). It loads that revision's
``_chunker.py`` and ``_encoder.py`` as extra modules beside today's (pure Python, as
they were then); or ``--before-import MODULE``, an older ``_encoder`` built elsewhere (for
example compiled with mypyc from an older revision, its relative imports made absolute),
so that a compiled before meets a compiled after. It checks that both give the same
lines, and times the ``emit_small`` and ``emit_10m_escape`` workloads of ``envelope
bench`` with the three candidates alternated round by round, printing the median of the per-round CPU ratios to bare
msgspec and their quartiles. This is how the commits of issue 31 quote before/after.
Does not own: the stages or inputs (``benchmarks.engine``, ``benchmarks.inputs``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import statistics
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from envelope import _speedups
from envelope._encoder import Emitter
from envelope._types import Text, ToolResult

from .engine import MB, TOOL_ID, TOOL_NAME, spread
from .inputs import AGENTS, deltas, escape_payload
from .steps import alternate

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_before(rev: str) -> ModuleType:
    """The ``_encoder`` module of revision ``rev``, loaded as ``envelope._encoder_before``."""
    modules: dict[str, ModuleType] = {}
    for name in ("_chunker", "_encoder"):
        source = subprocess.run(
            ["git", "show", f"{rev}:src/envelope/{name}.py"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        source = source.replace("from ._chunker import", "from ._chunker_before import")
        spec = importlib.util.spec_from_loader(f"envelope.{name}_before", loader=None)
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        module.__package__ = "envelope"
        sys.modules[spec.name] = module
        exec(compile(source, f"{rev}:src/envelope/{name}.py", "exec"), module.__dict__)
        modules[name] = module
    return modules["_encoder"]


def main(argv: list[str] | None = None) -> int:
    """Parse the options, time both workloads, print the ratios."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.emit_ab", description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--before", help="the git revision of the emitter to compare with (loaded as pure Python)")
    which.add_argument(
        "--before-import",
        metavar="MODULE",
        help="an importable module holding the older Emitter, for example one compiled with mypyc from an "
        "older revision (put its folder on PYTHONPATH): a compiled before against a compiled after",
    )
    parser.add_argument("--small-count", type=int, default=20_000, help="20-byte deltas per pass (default: 20000)")
    parser.add_argument("--big-mb", type=float, default=10.0, help="escape-heavy payload in MiB (default: 10)")
    parser.add_argument("--rounds", type=int, default=15, help="alternated rounds (default: 15)")
    args = parser.parse_args(argv)
    before = importlib.import_module(args.before_import) if args.before_import else load_before(args.before)
    label = args.before_import or f"{args.before} (pure Python)"
    agent = AGENTS[0]
    enc = msgspec.json.Encoder().encode
    items = deltas(args.small_count, 20)
    payload = escape_payload(int(args.big_mb * MB))

    def stream(em: Any) -> Callable[[], list[bytes]]:
        def run() -> list[bytes]:
            out: list[bytes] = []
            for delta in items:
                out.extend(em.streamed("text", delta))
            return out

        return run

    def buffered(em: Any) -> Callable[[], list[bytes]]:
        return lambda: em.buffered("tool_result", payload, id=TOOL_ID, name=TOOL_NAME)

    workloads: dict[str, dict[str, Callable[[], Any]]] = {
        "emit_small": {
            "before": stream(before.Emitter(agent)),
            "after": stream(Emitter(agent)),
            "bare msgspec": lambda: [enc(Text(agent=agent, final=False, delta=d)) for d in items],
        },
        "emit_10m_escape": {
            "before": buffered(before.Emitter(agent)),
            "after": buffered(Emitter(agent)),
            "bare msgspec": lambda: enc(ToolResult(agent=agent, final=True, id=TOOL_ID, name=TOOL_NAME, delta=payload)),
        },
    }
    print(f"before = {label}, after = this checkout ({_speedups.loaded()}); CPU time")
    for key, candidates in workloads.items():
        if candidates["before"]() != candidates["after"]():
            print(f"{key}: before and after give different lines", file=sys.stderr)
            return 1
        times = alternate(candidates, args.rounds)
        print(key)
        for name in ("before", "after"):
            ratios = [a / b for a, b in zip(times[name], times["bare msgspec"], strict=True) if b > 0]
            low, high = spread(ratios)
            print(f"  {name:6s} / bare msgspec: {statistics.median(ratios):.2f}x (rounds {low:.2f}-{high:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
