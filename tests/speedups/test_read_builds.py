"""The read path, compiled and pure, on adversarial streams under fixed seeds (issue 43 §1).

``read_outcomes.py`` draws streams around ``feed_many``'s fast path (the lines the compiled
build's ``_cread`` pass takes, and the near misses it must leave to the Python path) and
reads each three ways; both builds must give the same outcome for every one, and within a
build the lists fed to ``feed_many`` must give what ``feed`` per line gives.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec

from envelope import _speedups

SCRIPT = str(Path(__file__).with_name("read_outcomes.py"))


def _run(pure: str) -> dict[str, list[dict[str, object]]]:
    env = {**os.environ, "ENVELOPE_PURE": pure}
    done = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    out: dict[str, list[dict[str, object]]] = msgspec.json.decode(done.stdout)
    return out


def test_compiled_and_pure_read_adversarial_streams_alike() -> None:
    """Every case: the same transcript, open blocks, ``done`` and error in both builds.

    On a machine without a compiler both runs are pure and this compares a build with
    itself; CI requires the compiled build (``test_the_mode_is_the_one_this_run_asked_for``).
    """
    pure = _run("1")
    compiled = _run("0")
    assert len(pure) == 300
    # The draws reach both sides: blocks rebuilt with content, and errors of several kinds.
    errors = {case[2]["error"][0] for case in pure.values() if case[2]["error"]}  # type: ignore[index]
    assert {"DecodeError", "SequenceError"} <= errors
    assert sum(1 for case in pure.values() if case[2]["error"] is None) > 20
    for name, outcomes in pure.items():
        assert compiled[name] == outcomes, name


def test_feed_many_on_lists_equals_feed_per_line_in_this_build() -> None:
    """Within the build this run loaded (``_speedups.loaded()``), lists and lines agree."""
    build = "1" if _speedups.loaded() == "pure" else "0"
    for name, (_, lists, lines) in _run(build).items():
        assert lists == lines, name
