"""Run the code blocks of a Markdown page as written, so documentation cannot rot.

Shared by the README's test (``tests/readme/``) and the documentation site's
(``tests/docs/``); each says which page it reads and under what name its markers are
written (``README``, ``docs``):

* Every ```python block runs in a fresh interpreter, in a scratch folder that sees the
  repository's ``fixtures/``, ``spec/``, ``js/`` and ``examples/`` (as its root does), and
  must exit 0; console blocks run there too.
* Every ```console block runs command by command (``$ ...`` lines) in bash, with the
  venv's ``bin`` first on ``PATH`` (what ``source .venv/bin/activate`` does); the
  output it shows must match what the commands print (stdout and stderr together),
  where ``…`` (or ``...``) alone on a line stands for any lines, and inside a line for
  any text. Each stream an ``envelope``/``agent-ref`` command prints goes through the
  strict validator.
* A block right below a line ``*Not run by the NAME test: REASON.*`` is skipped, and
  says so to the reader; ``*Run by the NAME test, output not compared: REASON.*``
  runs the commands, checks their status and streams, and leaves the output alone;
  ``*Run by the NAME test against a fresh `agent-ref serve` …*`` runs them against a
  server started on a free port, its URL put where the block says
  ``http://127.0.0.1:8000``, and compares the output but for the numbers of its timing
  line (issue 25 §6: the ``envelope check`` example's byte count had gone stale).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from browser.agent_server import serving
from validating import assert_valid

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def not_run_marker(name: str) -> str:
    """The line prefix that keeps a block out of NAME's test (its reason follows)."""
    return f"*Not run by the {name} test: "


def not_compared_marker(name: str) -> str:
    """The line prefix of a block whose commands run but whose output is not compared."""
    return f"*Run by the {name} test, output not compared: "


def served_marker(name: str) -> str:
    """The line prefix of a block run against a fresh ``agent-ref serve``."""
    return f"*Run by the {name} test against a fresh `agent-ref serve` "


#: Where a served block says the server is.
SHOWN_URL = "http://127.0.0.1:8000"


@dataclass
class Block:
    """One fenced block of a page."""

    kind: str
    text: str
    line: int
    marker: str  # "", "not run", "not compared" or "served"
    page: str = ""  # the page's name in test ids, when a test reads several

    @property
    def id(self) -> str:
        return f"{self.page}{':' if self.page else ''}{self.kind}@{self.line}"


def parse(text: str, name: str, page: str = "") -> list[Block]:
    """The fenced blocks of ``text`` in order, each with the marker written above it."""
    markers = {
        not_run_marker(name): "not run",
        not_compared_marker(name): "not compared",
        served_marker(name): "served",
    }
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = next((kind for prefix, kind in markers.items() if before.startswith(prefix)), "")
        found.append(Block(match.group(1), match.group(2), text.count("\n", 0, match.start()) + 1, marker, page))
    return found


def reasons(text: str, name: str) -> list[str]:
    """The reasons given after each not-run marker of ``text``."""
    return re.findall(re.escape(not_run_marker(name)) + r"(.+?)\*$", text, re.M)


def make_root_like(folder: Path) -> Path:
    """Make ``folder`` look like the repository's root to the examples."""
    for name in ("fixtures", "spec", "js", "examples"):
        (folder / name).symlink_to(ROOT / name)
    (folder / ".venv").symlink_to(BIN.parent)  # the venv this test runs in
    return folder


def env() -> dict[str, str]:
    """The environment the examples run in: the venv first on PATH, no API key."""
    environ = dict(os.environ)
    environ["PATH"] = f"{BIN}{os.pathsep}{environ.get('PATH', '')}"
    environ["VIRTUAL_ENV"] = str(BIN.parent)
    environ.pop("ANTHROPIC_API_KEY", None)  # no example needs a key
    environ["COLUMNS"] = "100"
    return environ


def run_python_block(block: Block, cwd: Path) -> None:
    """Run a python block in a fresh interpreter; it must exit 0."""
    assert block.marker == "", f"python blocks are all run; {block.id} is marked"
    done = subprocess.run(
        [sys.executable, "-c", block.text], cwd=cwd, env=env(), capture_output=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()


def pattern(expected: list[str]) -> re.Pattern[str]:
    """The shown output as a pattern: ``…`` alone on a line is any lines, inside one any text."""
    parts = []
    for line in expected:
        if line.strip() in {"…", "..."}:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(piece) for piece in line.split("…")) + r"\n")
    return re.compile("".join(parts), re.S)


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """``($ command, [shown output lines])`` in order."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        else:
            assert steps, f"{block.id}: output before the first command"
            steps[-1][1].append(line)
    return steps


#: Streams a documented command prints that are incomplete on purpose, and what the validator says.
EXPECTED_CODES = {
    # A bare tag fragment migrated: it has no meta_init and no [DONE], and the output says so.
    "envelope migrate - --agent": ["W163", "W161"],
}
UUID = re.compile(r"[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}|[0-9a-f]{8}-…")


def same_ids(text: str) -> str:
    """Agent ids differ from run to run: every UUID (or its shortened ``xxxxxxxx-…``) reads ``UUID``."""
    return UUID.sub("UUID", text)


def stream_of(output: str) -> bytes:
    """The envelope stream within a command's output (stderr lines mixed in are left out)."""
    keep = [line for line in output.split("\n") if not line or line.startswith(("data:", "{", "[DONE]"))]
    text = "\n".join(keep).strip("\n")
    return (text + ("\n\n" if text.startswith("data:") else "\n")).encode()


def run_block(block: Block, cwd: Path) -> list[tuple[str, int, str]]:
    """Run the block's commands in one bash session (so ``$?`` works as shown); per command,
    its status and what it printed (stdout and stderr together)."""
    steps = commands(block)
    script = "".join(
        f'{command}\n__status=$?; printf \'\\0%d\\0\' "$__status"; (exit "$__status")\n' for command, _ in steps
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=300,
        check=False,
    )
    pieces = done.stdout.decode().split("\0")
    outputs, statuses = pieces[0:-1:2], pieces[1::2]
    assert len(statuses) == len(steps), done.stdout.decode()
    return [(command, int(status), out) for (command, _), status, out in zip(steps, statuses, outputs, strict=True)]


def check_console_block(block: Block, cwd: Path) -> None:
    """Run a console block; each command succeeds unless the block shows its failure, each
    stream it prints is valid, and (unless marked) the output matches what is shown."""
    steps = commands(block)
    ran = run_block(block, cwd)
    for i, ((command, shown), (_, status, out)) in enumerate(zip(steps, ran, strict=True)):
        status_shown = "echo $?" in command or (i + 1 < len(steps) and steps[i + 1][0] == "echo $?")
        if not status_shown and not any(": error: " in line for line in shown):
            assert status == 0, f"{command}: status {status}: {out}"
        if status == 0 and re.search(
            r"\benvelope migrate\b(?!.* -o )|\bagent-ref (run|resume)\b(?!.*--pretty)", command
        ):
            expect = next((codes for part, codes in EXPECTED_CODES.items() if part in command), [])
            assert_valid(stream_of(out), expect=expect)  # what the project printed is a valid stream
        if block.marker == "not compared":
            continue
        want = pattern([same_ids(line) for line in shown])
        assert want.fullmatch(same_ids(out)), f"{block.id}: `{command}` printed:\n{out}\nshown:\n" + "\n".join(shown)


def written_files(blocks: list[Block]) -> set[str]:
    """Every file the blocks' commands write (``-o``, ``--out``, ``>``), ``/dev/null`` aside."""
    lines = [c for b in blocks if b.kind == "console" for c, _ in commands(b)]
    lines += [line.split("#", 1)[0] for b in blocks if b.kind == "sh" for line in b.text.splitlines()]
    written = {m for line in lines for m in re.findall(r"(?:-o|--out|>)\s+([\w./-]+)", line)}
    written.discard("/dev/null")
    return written


def ignored_by_git() -> set[str]:
    """The names ``.gitignore`` lists (without leading or trailing slashes)."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return {line.strip().strip("/") for line in lines if not line.startswith("#")}


def agent_serve(cwd: Path) -> AbstractContextManager[str]:
    """``agent-ref serve`` on a free loopback port with a fresh database; its URL without the last ``/``."""
    return serving([str(BIN / "agent-ref"), "serve", "--port", "0", "--db", "served.db"], cwd=cwd, env=env())


def _timings_as_words(line: str) -> str:
    """A timing line with each number left out (``…``): they differ from run to run."""
    if line.lstrip().startswith("time to first byte"):
        return re.sub(r"\d+(?:\.\d+)?", "…", line)
    return line


def check_served_block(block: Block, cwd: Path, url: str) -> None:
    """Run a served block against the server at ``url``: each command succeeds and prints what
    is shown, with the server's URL for ``SHOWN_URL`` and the timing line's numbers left out."""
    assert block.marker == "served", block.id
    assert SHOWN_URL in block.text, f"{block.id}: a served block says where the server is"
    ran = run_block(replace(block, text=block.text.replace(SHOWN_URL, url)), cwd)
    for (command, shown), (_, status, out) in zip(commands(block), ran, strict=True):
        assert status == 0, f"{command}: status {status}: {out}"
        expected = [_timings_as_words(line.replace(SHOWN_URL, url)) for line in shown]
        want = pattern([same_ids(line) for line in expected])
        got = "\n".join(_timings_as_words(line) for line in out.split("\n"))
        assert want.fullmatch(same_ids(got)), f"{block.id}: `{command}` printed:\n{out}\nshown:\n" + "\n".join(shown)
