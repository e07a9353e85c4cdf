"""[R7.4-a] The seed profile on the agent (envelope-v1 §10, issue 12 §2): control envelopes whole.

The autouse tee validates each response under the profile its agent was given, so the
seed run below is held to the seed profile's bound rule and the default run to §6.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref_support import fast_retry, run
from validating import assert_valid

LONG_PROMPT = "Hello there. " + "a long prompt " * 300  # a meta_init of ~4 KB


def _meta_init_lines(lines: list[bytes]) -> list[dict[str, object]]:
    return [env for line in lines if line != b"[DONE]" and (env := json.loads(line))["type"] == "meta_init"]


def test_seed_profile_sends_meta_init_whole() -> None:
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry(), profile="seed")
    run(agent.run(LONG_PROMPT, lines.append))
    (meta,) = _meta_init_lines(lines)
    assert meta["final"] is True
    assert len(json.dumps(meta)) > 2048
    assert_valid(lines, profile="seed")


def test_default_profile_chunks_meta_init_within_the_bound() -> None:
    lines: list[bytes] = []
    run(Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry()).run(LONG_PROMPT, lines.append))
    metas = _meta_init_lines(lines)
    assert len(metas) > 1
    assert all(len(line) <= 2048 for line in lines)


def test_agent_ref_run_profile_seed(tmp_path: Path) -> None:
    """``agent-ref run --profile seed``: the stream validates strictly under ``--profile seed``."""
    bin_dir = Path(sys.executable).parent
    done = subprocess.run(
        [str(bin_dir / "agent-ref"), "run", "--profile", "seed", "--db", str(tmp_path / "a.db"), LONG_PROMPT],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    data_lines = [line[len(b"data: ") :] for line in done.stdout.split(b"\n") if line.startswith(b"data: ")]
    assert len(_meta_init_lines(data_lines)) == 1
    assert_valid(done.stdout, profile="seed")
    checked = subprocess.run(
        [str(bin_dir / "envelope"), "validate", "--strict", "--profile", "seed", "-"],
        input=done.stdout,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout
