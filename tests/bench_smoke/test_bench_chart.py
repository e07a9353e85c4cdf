"""The bench's chart plots the CPU ratios the targets judge, and its title says so.

A made-up report whose wall and CPU ratios disagree (as on a loaded machine, where a
wall ratio of 26.76 stood beside a CPU ratio of 0.61) is drawn with matplotlib's Agg
backend, and the figure is read back before it is closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchmarks.engine import Report, Row, StageInfo, render_png

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _report() -> Report:
    rows = [
        Row("read", "ours", "ours", seconds=1.0, ratio=1.0, ratio_cpu=1.0, spread_cpu=(1.0, 1.0)),
        Row("read", "peer", "peer", seconds=2.0, ratio=26.76, ratio_cpu=0.61, spread_cpu=(0.55, 0.7)),
        Row("emit", "ours", "ours", seconds=1.0, ratio=1.0, ratio_cpu=1.0, spread_cpu=(1.0, 1.0)),
        Row("emit", "peer", "peer", seconds=2.0, ratio=0.2, ratio_cpu=3.5, spread_cpu=(3.0, 4.0)),
    ]
    stages = [StageInfo("read", "read 1 MiB", "rss"), StageInfo("emit", "emit 1 MiB", "tracemalloc")]
    return Report(stages=stages, rows=rows, machine={"cpus": "2"}, size_mb=1.0, rounds=3)


def test_the_bars_are_the_cpu_ratios_and_the_title_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.pyplot as plt

    figures: list[Any] = []
    close = plt.close

    def keep(fig: Any = None) -> None:
        figures.append(fig)
        close(fig)

    monkeypatch.setattr(plt, "close", keep)
    render_png(_report(), str(tmp_path / "bench.png"))
    (fig,) = figures
    panels = [ax for ax in fig.axes if ax.patches]
    widths = {ax.get_title(): sorted(round(p.get_width(), 2) for p in ax.patches) for ax in panels}
    assert widths == {"read 1 MiB": [0.61, 1.0], "emit 1 MiB": [1.0, 3.5]}
    assert "CPU time / ours" in fig._suptitle.get_text()
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
