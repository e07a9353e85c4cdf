"""The README's code blocks run as written (issue 13 §2), so they cannot rot.

* Every ```python block runs in a fresh interpreter, in a scratch folder that sees the
  repository's ``fixtures/`` and ``spec/`` (as the README's root does), and must exit 0.
* Every ```console block runs command by command (``$ ...`` lines) in bash, with the
  venv's ``bin`` first on ``PATH`` (what ``source .venv/bin/activate`` does); the
  output it shows must match what the commands print (stdout and stderr together),
  where ``…`` (or ``...``) alone on a line stands for any lines, and inside a line for
  any text. Each stream an ``envelope``/``agent-ref`` command prints goes through the
  strict validator.
* A block right below a line ``*Not run by the README test: REASON.*`` is skipped, and
  says so to the reader; ``*Run by the README test, output not compared: REASON.*``
  runs the commands, checks their status and streams, and leaves the output alone;
  ``*Run by the README test against a fresh `agent-ref serve` …*`` runs them against a
  server started on a free port, its URL put where the block says
  ``http://127.0.0.1:8000``, and compares the output but for the numbers of its timing
  line (issue 25 §6: the ``envelope check`` example's byte count had gone stale).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)
NOT_RUN = "*Not run by the README test: "
NOT_COMPARED = "*Run by the README test, output not compared: "
SERVED = "*Run by the README test against a fresh `agent-ref serve` "
#: Where a served block says the server is.
SHOWN_URL = "http://127.0.0.1:8000"


@dataclass
class Block:
    """One fenced block of the README."""

    kind: str
    text: str
    line: int
    marker: str  # "", "not run", "not compared" or "served"

    @property
    def id(self) -> str:
        return f"{self.kind}@{self.line}"


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = (
            "not run"
            if before.startswith(NOT_RUN)
            else "not compared"
            if before.startswith(NOT_COMPARED)
            else "served"
            if before.startswith(SERVED)
            else ""
        )
        found.append(Block(match.group(1), match.group(2), text.count("\n", 0, match.start()) + 1, marker))
    return found


BLOCKS = blocks()
PYTHON = [b for b in BLOCKS if b.kind == "python"]
CONSOLE = [b for b in BLOCKS if b.kind == "console" and b.marker not in ("not run", "served")]
SERVED_BLOCKS = [b for b in BLOCKS if b.kind == "console" and b.marker == "served"]


@pytest.fixture
def root_like(tmp_path: Path) -> Path:
    """A scratch folder that looks like the repository's root to the examples."""
    for name in ("fixtures", "spec"):
        (tmp_path / name).symlink_to(ROOT / name)
    (tmp_path / ".venv").symlink_to(BIN.parent)  # the venv this test runs in
    return tmp_path


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(BIN.parent)
    env.pop("ANTHROPIC_API_KEY", None)  # no example needs a key
    env["COLUMNS"] = "100"
    return env


def test_the_readme_has_what_the_test_expects() -> None:
    """The parse finds the blocks; every block is of a kind this test knows."""
    assert len(PYTHON) >= 4
    assert len(CONSOLE) >= 5
    assert {b.kind for b in BLOCKS} <= {"python", "console", "sh", ""}
    unmarked_sh = [b.id for b in BLOCKS if b.kind == "sh" and b.marker != "not run"]
    assert unmarked_sh == [], "a sh block is either a console block (run) or marked not run"


def test_blocks_not_run_say_why() -> None:
    """Each block the test leaves out carries its reason in the README, for the reader."""
    text = README.read_text(encoding="utf-8")
    reasons = re.findall(re.escape(NOT_RUN) + r"(.+?)\*$", text, re.M)
    assert len(reasons) == sum(b.marker == "not run" for b in BLOCKS)
    assert all(len(reason) > 20 for reason in reasons)


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_python_block_runs(block: Block, root_like: Path) -> None:
    assert block.marker == "", f"python blocks are all run; {block.id} is marked"
    done = subprocess.run(
        [sys.executable, "-c", block.text], cwd=root_like, env=_env(), capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()


def _pattern(expected: list[str]) -> re.Pattern[str]:
    parts = []
    for line in expected:
        if line.strip() in {"…", "..."}:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("…")) + r"\n")
    return re.compile("".join(parts), re.S)


def _commands(block: Block) -> list[tuple[str, list[str]]]:
    """``($ command, [shown output lines])`` in order."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"{block.id}: output before the first command"
            steps[-1][1].append(line)
    return steps


#: Streams a README command prints that are incomplete on purpose, and what the validator says.
EXPECTED_CODES = {
    # A bare tag fragment migrated: it has no meta_init and no [DONE], and the output says so.
    "envelope migrate - --agent": ["W163", "W161"],
}
UUID = re.compile(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}|[0-9a-f]{8}-…")


def _same_ids(text: str) -> str:
    """Agent ids differ from run to run: every UUID (or its shortened ``xxxxxxxx-…``) reads ``UUID``."""
    return UUID.sub("UUID", text)


def _stream_of(output: str) -> bytes:
    """The envelope stream within a command's output (stderr lines mixed in are left out)."""
    keep = [line for line in output.split("\n") if not line or line.startswith(("data:", "{", "[DONE]"))]
    text = "\n".join(keep).strip("\n")
    return (text + ("\n\n" if text.startswith("data:") else "\n")).encode()


def _run_block(block: Block, cwd: Path) -> list[tuple[str, int, str]]:
    """Run the block's commands in one bash session (so ``$?`` works as shown); per command,
    its status and what it printed (stdout and stderr together)."""
    commands = _commands(block)
    script = "".join(
        f'{command}\n__status=$?; printf \'\\0%d\\0\' "$__status"; (exit "$__status")\n' for command, _ in commands
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=300,
        check=False,
    )
    pieces = done.stdout.decode().split("\0")
    outputs, statuses = pieces[0:-1:2], pieces[1::2]
    assert len(statuses) == len(commands), done.stdout.decode()
    return [(command, int(status), out) for (command, _), status, out in zip(commands, statuses, outputs, strict=True)]


@pytest.mark.parametrize("block", CONSOLE, ids=lambda b: b.id)
def test_console_block_runs_as_shown(block: Block, root_like: Path) -> None:
    steps = _commands(block)
    ran = _run_block(block, root_like)
    for i, ((command, shown), (_, status, out)) in enumerate(zip(steps, ran, strict=True)):
        status_shown = "echo $?" in command or (i + 1 < len(steps) and steps[i + 1][0] == "echo $?")
        if not status_shown and not any(": error: " in line for line in shown):
            assert status == 0, f"{command}: status {status}: {out}"
        if status == 0 and re.search(
            r"\benvelope migrate\b(?!.* -o )|\bagent-ref (run|resume)\b(?!.*--pretty)", command
        ):
            expect = next((codes for part, codes in EXPECTED_CODES.items() if part in command), [])
            assert_valid(_stream_of(out), expect=expect)  # what the project printed is a valid stream
        if block.marker == "not compared":
            continue
        want = _pattern([_same_ids(line) for line in shown])
        assert want.fullmatch(_same_ids(out)), f"{block.id}: `{command}` printed:\n{out}\nshown:\n" + "\n".join(shown)


def test_files_the_commands_write_are_ignored_by_git() -> None:
    """Every file a README command writes (``-o``, ``>``, ``--out``, the agent's default db) is in .gitignore."""
    text = README.read_text(encoding="utf-8")
    commands = [c for b in BLOCKS if b.kind == "console" for c, _ in _commands(b)]
    commands += [line.split("#", 1)[0] for b in BLOCKS if b.kind == "sh" for line in b.text.splitlines()]
    written = {m for line in commands for m in re.findall(r"(?:-o|--out|>)\s+([\w./-]+)", line)}
    written.discard("/dev/null")
    assert {"capture.jsonl", "results.json", "bench-out"} <= written, "the parse found the README's outputs"
    if "agent-ref run" in text:
        written.add("agent-ref.db")  # agent-ref's default --db, in the current folder
    ignored = {
        line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines() if not line.startswith("#")
    }
    assert sorted(w for w in written if w.strip("/") not in ignored) == []


@pytest.fixture
def served_url(root_like: Path) -> Iterator[str]:
    """``agent-ref serve`` on a free loopback port with a fresh database; its URL without the last ``/``."""
    proc = subprocess.Popen(
        [str(BIN / "agent-ref"), "serve", "--port", "0", "--db", "served.db"],
        cwd=root_like,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            if "serving on " in line:
                url = line.split("serving on ", 1)[1].split()[0].rstrip("/")
        assert url is not None, f"agent-ref serve did not start (exit {proc.poll()})"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()


def _timings_as_words(line: str) -> str:
    """A timing line with each number left out (``…``): they differ from run to run."""
    if line.lstrip().startswith("time to first byte"):
        return re.sub(r"\d+(?:\.\d+)?", "…", line)
    return line


def test_the_readme_has_served_blocks() -> None:
    """The envelope check example is run against a real server, not left out."""
    assert any("$ envelope check " in b.text for b in SERVED_BLOCKS)


@pytest.mark.parametrize("block", SERVED_BLOCKS, ids=lambda b: b.id)
def test_served_block_runs_as_shown(block: Block, root_like: Path, served_url: str) -> None:
    assert SHOWN_URL in block.text, f"{block.id}: a served block says where the server is"
    ran = _run_block(replace(block, text=block.text.replace(SHOWN_URL, served_url)), root_like)
    for (command, shown), (_, status, out) in zip(_commands(block), ran, strict=True):
        assert status == 0, f"{command}: status {status}: {out}"
        expected = [_timings_as_words(line.replace(SHOWN_URL, served_url)) for line in shown]
        want = _pattern([_same_ids(line) for line in expected])
        got = "\n".join(_timings_as_words(line) for line in out.split("\n"))
        assert want.fullmatch(_same_ids(got)), f"{block.id}: `{command}` printed:\n{out}\nshown:\n" + "\n".join(shown)
