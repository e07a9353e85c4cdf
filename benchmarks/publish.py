"""Publish one ``envelope bench`` run: its tables into the README and the docs page, its chart beside them.

Usage::

    envelope bench --size-mb 20 --rounds 7 --out bench-out
    python -m benchmarks.publish bench-out

The README keeps the run's machine line, command line and target table (issue 31 §2: the
figures shown say how to reproduce them); ``docs/benchmarks.md`` keeps the whole run under
``## The latest run`` (every stage's table, then the targets). Both come from the same
``bench.md``, so they always show one run (``tests/bench_smoke/test_readme_targets.py``
checks that). The chart ``bench.png`` is copied to ``benchmarks/bench.png``. Nothing is
measured here and no figure is edited: what the bench wrote is what is published.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs" / "benchmarks.md"
CHART = ROOT / "benchmarks" / "bench.png"

_MACHINE = re.compile(r"^Machine: .*$", re.M)
_COMMAND = re.compile(r"^Command: `envelope bench [^`]*`.*$", re.M)


class PublishError(Exception):
    """The run's ``bench.md`` or a target page is not in the shape this script knows."""


def _run_body(bench_md: str) -> str:
    """The run from its machine line to the end, stage headings one level down (``####``)."""
    start = _MACHINE.search(bench_md)
    if start is None:
        raise PublishError("bench.md has no 'Machine:' line: is it the output of `envelope bench`?")
    body = bench_md[start.start() :].rstrip("\n")
    if "\n### Targets\n" not in body:
        raise PublishError("bench.md has no '### Targets' table: run every stage (no --stage) to publish")
    return re.sub(r"^### ", "#### ", body, flags=re.M)


def _targets(body: str) -> str:
    """The ``#### Targets`` heading and its table."""
    start = body.index("\n#### Targets\n") + 1
    end = body.find("\n\n", body.index("\n|", start))
    return body[start : end if end != -1 else len(body)]


def _short_command(body: str) -> str:
    """The command line up to the first sentence end: the README keeps the command, the docs the method."""
    command = _COMMAND.search(body)
    if command is None:
        raise PublishError("bench.md has no 'Command: `envelope bench ...`' line")
    line = command.group(0)
    cut = line.find("; each stage in its own process.")
    return line[: cut + len("; each stage in its own process.")] if cut != -1 else line


def readme_section(text: str, body: str) -> str:
    """``text`` (the README) with its run (machine, command, targets) replaced by ``body``'s."""
    start = text.index("\n## Benchmarks\n")
    end = text.index("\n## ", start + 1)
    section = text[start:end]
    machine = _MACHINE.search(section)
    targets = section.find("\n#### Targets\n")
    table_end = section.find("\n\n", section.index("\n|", targets)) if targets != -1 else -1
    if machine is None or table_end == -1:
        raise PublishError("README's '## Benchmarks' has no 'Machine:' line or no '#### Targets' table")
    run = f"{body.splitlines()[0]}\n{_short_command(body)}\n\n{_targets(body)}"  # body starts at its machine line
    section = section[: machine.start()] + run + section[table_end:]
    return text[:start] + section + text[end:]


def docs_section(text: str, body: str) -> str:
    """``text`` (docs/benchmarks.md) with the run under ``## The latest run`` replaced by ``body``."""
    start = text.index("\n## The latest run\n")
    end = text.index("\n## ", start + 1)
    section = text[start:end]
    machine = _MACHINE.search(section)
    targets = section.find("\n#### Targets\n")
    if machine is None or targets == -1:
        raise PublishError("docs' '## The latest run' has no 'Machine:' line or no '#### Targets' table")
    table_end = section.find("\n\n", section.index("\n|", targets))
    section = section[: machine.start()] + body + (section[table_end:] if table_end != -1 else "\n")
    return text[:start] + section + text[end:]


def publish(out: Path) -> list[Path]:
    """Write the run in ``out`` (``bench.md``, ``bench.png``) into the README, the docs page and the chart."""
    bench_md = out / "bench.md"
    if not bench_md.is_file():
        raise PublishError(f"{bench_md}: no such file (run `envelope bench --out {out}` first)")
    body = _run_body(bench_md.read_text(encoding="utf-8"))
    README.write_text(readme_section(README.read_text(encoding="utf-8"), body), encoding="utf-8")
    DOCS.write_text(docs_section(DOCS.read_text(encoding="utf-8"), body), encoding="utf-8")
    written = [README, DOCS]
    chart = out / "bench.png"
    if chart.is_file():
        shutil.copyfile(chart, CHART)
        written.append(CHART)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m benchmarks.publish [OUT]`` (``bench-out`` by default)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.publish", description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="bench-out", type=Path, help="the bench's --out folder")
    args = parser.parse_args(argv)
    try:
        written = publish(args.out)
    except PublishError as exc:
        print(f"publish: {exc}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
