"""Where the 10 MiB escape-heavy buffered emit spends its time, against bare msgspec, in one process.

Run: ``python -m benchmarks.emit_floor`` (the build installed: compiled or pure). Times,
alternated round by round on the ``emit_10m_escape`` input of ``envelope bench``, CPU
time, each result freed inside its timing as the bench does:

* ``bare msgspec``: one ``ToolResult`` encoded whole (the bench's reference);
* ``ours``: ``Emitter.buffered`` (the bench's candidate);
* ``escape + cut (before)``: ``cut_lines(escape(payload), ...)``, the emitter's path before
  the C escaper and the pure build's path still: msgspec escapes the whole payload, then
  each piece is copied out into its line;
* ``fused (after)``: ``fused_lines``, what ``Emitter.buffered`` runs: in the compiled
  build, ``_cescape.escape_lines`` escapes each piece straight into its line (one pass);
  in the pure build the same as the row above;
* ``escape only``: msgspec's encode of the payload alone, the first step of ours;
* ``cut + frame only``: ``cut_lines`` on that escaped payload, the second step;
* ``copy from escaped``: one ``bytes`` per line of ours' piece sizes, copied out of the
  escaped payload (no cut search, no framing): what any way of building the lines from
  the escaped bytes must do at least;
* ``copy, hot source``: the bench's ``bytes copy`` floor, the same sizes copied from a
  2 KiB source that stays in cache;
* ``escape in slices``: the payload escaped 64 Ki characters at a time, which would keep
  the escaped bytes in cache for the copy: each slice is a new ``str`` whose UTF-8 form
  msgspec must build, where the whole payload's is built once and kept by the ``str``.

Each prints the median and quartiles of its per-round ratio to bare msgspec. This is how
``docs/benchmarks.md`` quotes what bounds the 1.5x target (issue 31).
Does not own: the stages or inputs (``benchmarks.engine``, ``benchmarks.inputs``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import msgspec

from envelope._chunker import cut_lines, escape, fused_lines
from envelope._encoder import Emitter, _Template
from envelope._speedups import loaded
from envelope._types import ToolResult

from .engine import MB, TOOL_ID, TOOL_NAME
from .inputs import AGENTS, escape_payload
from .steps import alternate, print_ratios

if TYPE_CHECKING:
    from collections.abc import Callable


def main(argv: list[str] | None = None) -> int:
    """Parse the options, time the steps, print the ratios."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.emit_floor", description=__doc__.splitlines()[0])
    parser.add_argument("--big-mb", type=float, default=10.0, help="escape-heavy payload in MiB (default: 10)")
    parser.add_argument("--rounds", type=int, default=15, help="alternated rounds (default: 15)")
    args = parser.parse_args(argv)
    agent = AGENTS[0]
    payload = escape_payload(int(args.big_mb * MB))
    emitter = Emitter(agent)
    enc = msgspec.json.Encoder().encode
    envelope = ToolResult(agent=agent, final=True, id=TOOL_ID, name=TOOL_NAME, delta=payload)
    template = _Template(envelope)
    budget = emitter.max_bytes - len(template.head_false) - len(template.tail) - 2
    last_budget = emitter.max_bytes - len(template.head_true) - len(template.tail) - 2
    quoted = escape(payload)
    lines = cut_lines(quoted, budget, last_budget, template.open_false, template.open_true, template.close)
    pieces = [len(line) - len(template.open_false) - len(template.close) for line in lines]
    hot = bytes(max(len(line) for line in lines) + 1)
    sizes = [len(line) for line in lines]

    def copy_escaped() -> list[bytes]:
        view = memoryview(quoted)
        out: list[bytes] = []
        start = 1
        for n in pieces:
            out.append(bytes(view[start : start + n]))
            start += n
        return out

    candidates: dict[str, Callable[[], Any]] = {
        "bare msgspec": lambda: enc(ToolResult(agent=agent, final=True, id=TOOL_ID, name=TOOL_NAME, delta=payload)),
        "ours": lambda: emitter.buffered("tool_result", payload, id=TOOL_ID, name=TOOL_NAME),
        "escape + cut (before)": lambda: cut_lines(
            escape(payload), budget, last_budget, template.open_false, template.open_true, template.close
        ),
        "fused (after)": lambda: fused_lines(
            payload, budget, last_budget, template.open_false, template.open_true, template.close
        ),
        "escape only": lambda: escape(payload),
        "cut + frame only": lambda: cut_lines(
            quoted, budget, last_budget, template.open_false, template.open_true, template.close
        ),
        "copy from escaped": copy_escaped,
        "copy, hot source": lambda: [hot[:n] for n in sizes],
        "escape in slices": lambda: [enc(payload[i : i + 65536]) for i in range(0, len(payload), 65536)],
    }
    print_ratios(
        f"build: {loaded()}; {len(lines)} lines, {len(quoted)} escaped bytes; CPU time / bare msgspec",
        alternate(candidates, args.rounds),
        "bare msgspec",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
