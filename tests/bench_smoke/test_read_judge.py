"""``python -m benchmarks.read_judge`` runs on a tiny input and judges every read and validate target.

No timing is asserted: the ratios are printed, the goals judged in the output only.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from benchmarks import read_judge

if TYPE_CHECKING:
    import pytest


def test_read_judge_prints_every_target(capsys: pytest.CaptureFixture[str]) -> None:
    """Each candidate's ratio, then one judged line per target, with its quartiles and a verdict."""
    assert read_judge.main(["--size-mb", "0.05", "--rounds", "2", "--repeat", "2"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("build: ")
    for name in read_judge.READERS:
        assert re.search(rf"^  {re.escape(name)} +[0-9.]+x bare msgspec", printed, re.M), printed
    verdicts = re.findall(
        r"^  (.+?) / (.+?): [0-9.]+x \(q [0-9.]+-[0-9.]+\); goal .*: (met|missed|too noisy)$", printed, re.M
    )
    assert [(c, r) for c, r, _ in verdicts] == [(c, r) for c, r, _, _ in read_judge.TARGETS], printed


def test_judge_rules() -> None:
    """A 'within' goal is met when the upper quartile meets it; a 'faster' goal when the lower quartile does."""
    times = {
        "bare msgspec": [1.0, 1.0, 1.0, 1.0],
        "read + reconstruct": [1.1, 1.1, 1.1, 1.1],
        "validate": [1.2, 1.2, 1.4, 1.4],  # 1.09x-1.27x read: the goal 1.2x lies inside the spread
        "json.loads + dicts": [4.4, 4.4, 4.4, 4.4],  # 4x read: faster goal met
    }
    lines = read_judge.judge(times)
    assert lines[0].endswith(": met"), lines
    assert lines[1].endswith(": met"), lines
    assert lines[2].endswith(": too noisy"), lines
    times["read + reconstruct"] = [1.3] * 4
    assert read_judge.judge(times)[0].endswith(": missed")
