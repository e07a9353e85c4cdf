"""The workspace demo: the scripted model fixes a failing test in a sandbox, then undo puts the bug back.

Run it with ``python examples/workspace_demo.py`` (no key, no network). It makes a tiny
project in a temporary directory (``calc.py`` with a bug, ``test_calc.py`` that fails),
gives an agent the workspace tools and ``Bash`` (in bubblewrap), and asks the scripted
model to fix the failing test. The model reads the test, runs it (it fails), edits
``calc.py``, runs it again (it passes). The demo then prints the diff of the step that
changed the file and undoes that step: ``calc.py`` is byte for byte what it was.

Spec ``spec/agent-ref.md`` §WD1. Where ``bwrap`` is missing the demo says how to install
it and exits with status 2 (``--unsandboxed`` runs the commands on the host instead).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from agent_ref import Agent, ScriptedModel
from agent_ref.cli.diff import render_step
from agent_ref.store.core import MemoryStore
from agent_ref.tools.sandbox import bash_tools, sandbox_problem
from agent_ref.tools.snapshots import restore_files

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["BUGGY", "FIXED", "PROMPT", "DemoRun", "make_project", "run_demo"]

#: The bug the model fixes: ``add`` subtracts.
BUGGY: Final = "return a - b"
FIXED: Final = "return a + b"
CALC: Final = (
    '"""A tiny module with a bug."""\n\n\n'
    f'def add(a: int, b: int) -> int:\n    """The sum of a and b."""\n    {BUGGY}\n'
)
TEST: Final = (
    '"""The test that finds the bug."""\n\nimport unittest\n\nfrom calc import add\n\n\n'
    "class AddTest(unittest.TestCase):\n    def test_add(self) -> None:\n"
    "        self.assertEqual(add(2, 3), 5)\n\n\n"
    'if __name__ == "__main__":\n    unittest.main()\n'
)
#: ``-B``: no ``__pycache__`` in the workspace, so the only change a step records is the edit.
COMMAND: Final = "python3 -B -m unittest -v test_calc"
PROMPT: Final = (
    f"Fix the failing test: read `test_calc.py`, run `{COMMAND}`, "
    f"replace `{BUGGY}` with `{FIXED}` in `calc.py`, and run it again."
)


@dataclass
class DemoRun:
    """What the demo did, for its printout and its test.

    Attributes:
        lines: every envelope line the agent streamed (``[DONE]`` included).
        calls: each tool call, in order, as (tool name, input).
        results: each tool result's text, in order, as (tool name, text).
        answer: the model's last text (after its last call).
        before: ``calc.py`` before the run; ``edited``: after it; ``restored``: after the undo.
        edit_step: the file step that changed ``calc.py``.
        diff: that step's unified diff (as ``agent-ref diff AGENT --step N`` prints it).
        undone: the steps the undo took back.
    """

    lines: list[bytes] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    results: list[tuple[str, str]] = field(default_factory=list)
    answer: str = ""
    before: bytes = b""
    edited: bytes = b""
    restored: bytes = b""
    edit_step: int = 0
    diff: str = ""
    undone: tuple[int, ...] = ()


def make_project(root: Path) -> None:
    """Write the tiny project (``calc.py`` with the bug, ``test_calc.py``) into ``root``."""
    (root / "calc.py").write_text(CALC, encoding="utf-8")
    (root / "test_calc.py").write_text(TEST, encoding="utf-8")


def _read_stream(run: DemoRun) -> None:
    """Fill ``calls``, ``results`` and ``answer`` from the envelopes of ``run.lines``."""
    names: dict[str, str] = {}
    inputs: dict[str, str] = {}
    texts: dict[str, str] = {}
    answer: list[str] = []
    for line in run.lines:
        if line == b"[DONE]":
            continue
        env = json.loads(line)
        kind, block = env.get("type"), str(env.get("id"))
        if kind == "tool_call":
            answer.clear()  # what the model said before a call is not its answer
            names[block] = str(env.get("name"))
            inputs[block] = inputs.get(block, "") + str(env.get("delta", ""))
        elif kind == "tool_result":
            names.setdefault(block, str(env.get("name")))
            texts[block] = texts.get(block, "") + str(env.get("delta", ""))
        elif kind == "text":
            answer.append(str(env.get("delta", "")))
    run.calls = [(names[k], json.loads(v or "{}")) for k, v in inputs.items()]
    run.results = [(names[k], v) for k, v in texts.items()]
    run.answer = "".join(answer)


async def run_demo(root: Path, *, unsandboxed: bool = False, sink: Callable[[bytes], None] | None = None) -> DemoRun:
    """Make the project in ``root``, let the scripted model fix it, show the edit's diff, undo it.

    Args:
        root: an empty directory (the workspace).
        unsandboxed: run ``Bash`` on the host instead of bubblewrap.
        sink: also given every envelope line (a validator, in the test).
    """
    make_project(root)
    run = DemoRun(before=(root / "calc.py").read_bytes())

    def collect(line: bytes) -> None:
        run.lines.append(line)
        if sink is not None:
            sink(line)

    store = MemoryStore()
    agent = Agent(ScriptedModel(), tools=bash_tools(root, unsandboxed=unsandboxed), store=store, workspace=root)
    await agent.run(PROMPT, collect)
    _read_stream(run)
    run.edited = (root / "calc.py").read_bytes()
    rows = await store.snapshots(agent.agent_uuid, 0)
    steps = sorted({step for step, data in rows if b"calc.py" in data})
    run.edit_step = steps[-1] if steps else 0
    run.diff = render_step([data for step, data in rows if step == run.edit_step])
    report = await restore_files(store, agent.agent_uuid, to_step=run.edit_step - 1)
    run.undone = report.undone_steps
    run.restored = (root / "calc.py").read_bytes()
    return run


def _show(run: DemoRun, root: Path, say: Callable[[str], None]) -> None:
    """Print what happened, the temporary directory's path shown as ``<workspace>``."""
    places = sorted({str(root.resolve()), str(root)}, key=len, reverse=True)

    def out(text: str) -> None:
        for place in places:
            text = text.replace(place, "<workspace>")
        say(text)

    results = iter(run.results)
    for name, tool_input in run.calls:
        out(f"> {name} {tool_input.get('command') or tool_input.get('file_path')}")
        _, text = next(results, (name, "(no result)"))
        kept = [line for line in text.splitlines() if line.strip() and not line.startswith("-----")]
        out("  " + "\n  ".join(kept[-5:]))
    out(f"model: {run.answer}")
    out(f"\nThe edit was file step {run.edit_step}; its diff:\n{run.diff.rstrip()}")
    same = "byte for byte as before" if run.restored == run.before else "NOT as before"
    out(f"\nundo --to-step {run.edit_step - 1} took back steps {list(run.undone)}: calc.py is {same}.")


def main(argv: list[str] | None = None) -> int:
    """Run the demo in a temporary directory and print what happened; 2 when no sandbox can run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--unsandboxed", action="store_true", help="run Bash on the host, without bubblewrap")
    args = parser.parse_args(argv)
    problem = None if args.unsandboxed else sandbox_problem()
    if problem is not None:
        print(f"workspace_demo: {problem}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="workspace-demo-") as tmp:
        run = asyncio.run(run_demo(Path(tmp), unsandboxed=args.unsandboxed))
        _show(run, Path(tmp), print)
    return 0 if run.restored == run.before and run.edited != run.before else 1


if __name__ == "__main__":
    sys.exit(main())
