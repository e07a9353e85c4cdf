"""The emitter writes the bytes it wrote before it was made faster (issue 31), in this build.

``emitter_golden.json`` was written by ``emitter_corpus.py`` on the emitter as it was
before issue 31 (pure Python, uncompiled). This test runs in whichever build the suite
runs (compiled, and again with ``ENVELOPE_PURE=1``), so both must match it case by case.
"""

from __future__ import annotations

import json
from pathlib import Path

from speedups import emitter_corpus

GOLDEN = Path(__file__).with_name("emitter_golden.json")


def test_the_emitter_gives_the_pinned_bytes_on_the_whole_corpus() -> None:
    pinned: dict[str, str] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = emitter_corpus.digests()
    assert sorted(now) == sorted(pinned), "the corpus changed: regenerate the golden only with a reason"
    differ = sorted(name for name in pinned if now[name] != pinned[name])
    assert not differ, f"{len(differ)} of {len(pinned)} cases differ, first: {differ[:5]}"


def test_the_corpus_reaches_every_path_it_pins() -> None:
    """The corpus is not vacuous: it holds chunked lines, oversize reports and errors."""
    cases = emitter_corpus.cases()
    lines = [x for v in cases.values() if v and v[0] != "error" for x in v if isinstance(x, str)]
    assert sum(1 for v in cases.values() if len(v) > 1 and v[0] != "error") > 500  # chunked outputs
    assert any(v and v[0] == "error" and v[1] == "OversizeError" for v in cases.values())
    assert any(v and v[0] == "error" and v[1] == "EncodeError" for v in cases.values())
    assert any(name.endswith("reports") and v for name, v in cases.items())
    assert len(lines) > 10_000
