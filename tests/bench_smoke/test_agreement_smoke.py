"""Smoke run of ``python -m benchmarks.agreement`` (the suites' ratios beside ``envelope bench``'s).

Tiny sizes, one stage end to end (both tools really run, in their own processes), and
the report's arithmetic on given ratios. No timing is asserted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from benchmarks import agreement

if TYPE_CHECKING:
    from pathlib import Path


def test_agreement_runs_both_tools_on_one_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = agreement.main(
        ["--size-mb", "0.02", "--rounds", "1", "--runs", "2", "--stages", "migrate", "--out", str(tmp_path)]
    )
    assert status == 0
    doc = json.loads((tmp_path / "agreement.json").read_text(encoding="utf-8"))
    assert [d["stage"] for d in doc] == ["migrate"]
    (stage,) = doc
    assert stage["ours"] == "ours: XmlMigrator"
    for tool in ("bench", "suite"):
        assert set(stage[tool]) == {"ours: XmlMigrator", "stdlib html.parser tokenizer", "UTF-8 decode"}
        assert stage[tool]["ours: XmlMigrator"] == [1.0, 1.0]
        assert all(r > 0 for r in stage[tool]["UTF-8 decode"])
    md = (tmp_path / "agreement.md").read_text(encoding="utf-8")
    assert "| migrate | UTF-8 decode |" in md
    assert md in capsys.readouterr().out


def test_every_stage_has_a_suite() -> None:
    """Each stage of ``envelope bench`` maps to the suite file that measures it."""
    from benchmarks.engine import STAGES

    assert set(agreement.SUITES) == {key for key, _ in STAGES}
    for file, _expr in agreement.SUITES.values():
        assert (agreement.ROOT / "benchmarks" / file).is_file()


def test_render_reports_difference_and_noise() -> None:
    r = agreement.Ratios(
        "read", "ours", bench={"ours": [1.0, 1.0], "b": [2.0, 2.2]}, suite={"ours": [1.0, 1.0], "b": [2.1, 2.1]}
    )
    md = agreement.render([r], 20, 5, 2)
    row = next(line for line in md.splitlines() if line.startswith("| read | b |"))
    # |2.1 - 2.1| / 2.1 = 0%; bench spread (2.2 - 2.0) / 2.1 = 10%; suite spread 0%
    assert row == "| read | b | 2.00 | 2.20 | 2.10 | 2.10 | 0% | 10% | 0% |"
    assert "| read | ours |" not in md
    assert "median of 0% (max 0%)" in md


@pytest.mark.parametrize("args", [["--stages", "nope"], ["--rounds", "0"], ["--size-mb", "0"]])
def test_agreement_refuses_bad_options(args: list[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        agreement.main([*args, "--out", str(tmp_path)])
    assert exc.value.code == 2
