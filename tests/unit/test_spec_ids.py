"""Every MUST/SHOULD id of the spec is proven by some test that names it (STYLE §7)."""

from __future__ import annotations

import re

from conftest import ROOT

SPECS = sorted((ROOT / "spec").glob("*.md"))
TESTS = ROOT / "tests"


def test_every_spec_id_has_a_test() -> None:
    ids: set[str] = set()
    for spec in SPECS:
        ids |= set(re.findall(r"\*\*\[([0-9A-Z][0-9A-Za-z.]*-[a-z])\]\*\*", spec.read_text()))
    assert ids, "no requirement ids found in spec/"
    corpus = "\n".join(p.read_text() for p in TESTS.rglob("*.py"))
    missing = sorted(i for i in ids if f"[{i}]" not in corpus)
    assert not missing, f"spec ids with no test naming them: {missing}"
