"""agent-ref's command lines as issue 25 §4 met them: bad input, help examples, suggestions, startup.

Each case runs the installed console script in a subprocess (spec/cli-agent-ref.md RC2-a:
exit status, one line ``WHERE: error: WHAT; WHAT TO DO``, never a traceback). Streams the
commands print pass ``envelope validate --strict``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from agent_ref_support import sse_lines
from validating import assert_valid

BIN = Path(sys.executable).parent
SCRIPT = BIN / "agent-ref"
CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "AGENT_REF_TOKEN")}


def _cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=_env(), timeout=120, check=False
    )


def _one_error_line(done: subprocess.CompletedProcess[str], start: str, *, status: int = 2) -> str:
    """The command failed with ``status`` and said one line starting with ``start``, with advice, no traceback."""
    assert done.returncode == status, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    assert "internal error" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(start), done.stderr
    assert "; " in done.stderr  # what to do
    return done.stderr


def _strict(stream: str, tmp_path: Path) -> None:
    """What the project printed passes the strict validator, in process and as ``envelope validate --strict``."""
    assert_valid(sse_lines(stream))
    path = tmp_path / "printed.sse"
    path.write_text(stream, encoding="utf-8")
    done = subprocess.run(
        [str(BIN / "envelope"), "validate", "--strict", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("port", ["99999", "65536", "-1"])
def test_spec_rc9_d_serve_port_out_of_range_is_one_line(port: str, tmp_path: Path) -> None:
    """`serve --port 99999` printed an OverflowError traceback; now one line naming the flag, exit 2 [RC9-d]."""
    done = _cli("serve", "--port", port, "--db", "a.db", cwd=tmp_path)
    _one_error_line(done, f"--port: error: {port} is not a port; pass 0 to 65535")
    assert not (tmp_path / "a.db").exists()  # nothing was stored


def test_spec_rc2_a_argument_errors_are_one_line(tmp_path: Path) -> None:
    """argparse's refusals are one line naming the command and its --help, exit 2 [RC2-a]."""
    done = _cli("serve", "--port", "eighty", cwd=tmp_path)
    text = _one_error_line(done, "agent-ref serve: error: argument --port: invalid int value: 'eighty'")
    assert "see `agent-ref serve --help`" in text
    assert "usage:" not in text


@pytest.mark.parametrize(
    "args",
    [
        ("run", "hello"),
        ("resume", "some-agent", "--results", "-"),
        ("log", "some-run"),
        ("runs",),
        ("abandon", "some-agent"),
        ("serve", "--port", "0"),
    ],
)
def test_spec_rc2_a_a_db_that_is_not_sqlite_is_named(args: tuple[str, ...], tmp_path: Path) -> None:
    """`--db` on a file that is not SQLite said "internal error"; now the file and what it is not [RC2-a]."""
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not a database\n", encoding="utf-8")
    done = _cli(*args, "--db", "notes.txt", cwd=tmp_path, stdin="[]")
    _one_error_line(done, "notes.txt: error: is not an SQLite database")
    assert done.stdout == ""
    assert notes.read_text(encoding="utf-8") == "my notes, not a database\n"  # untouched


@pytest.mark.parametrize("command", [("run", "hello"), ("serve", "--port", "0")])
def test_spec_rc2_a_a_binary_replay_file_is_named(command: tuple[str, ...], tmp_path: Path) -> None:
    """`--replay` on a binary file said "internal error"; now the file, the byte offset (from 0), the remedy [RC2-a]."""
    (tmp_path / "photo.json").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    done = _cli(*command, "--replay", "photo.json", "--db", "a.db", cwd=tmp_path)
    text = _one_error_line(done, "photo.json: error: not UTF-8 text (byte offset 0)")
    assert "pass --replay a recording" in text


def test_spec_rc2_a_replay_errors_name_the_file_and_position(tmp_path: Path) -> None:
    """A recording that is not JSON: the file with line and column (from 1); a missing one: the file [RC2-a]."""
    (tmp_path / "bad.json").write_text('[{"type": "message_start"},\n  oops]', encoding="utf-8")
    _one_error_line(_cli("run", "hi", "--replay", "bad.json", cwd=tmp_path), "bad.json:2:3: error: not JSON")
    _one_error_line(_cli("run", "hi", "--replay", "gone.json", cwd=tmp_path), "gone.json: error: no such file")


def test_spec_rc2_b_a_truncated_recording_says_it_ended_early(tmp_path: Path) -> None:
    """A cut recording said only "no recorded call left" (the cause only with -v); now where it ends [RC2-b]."""
    events = json.loads((CORPUS / "anthropic_events_1.json").read_text(encoding="utf-8"))
    starts = [i for i, e in enumerate(events) if e["type"] == "message_start"]
    cut = events[: starts[-1] + 5]  # the last call stops after five of its events
    assert all(e["type"] != "message_stop" for e in cut[starts[-1] :])
    (tmp_path / "cut.json").write_text(json.dumps(cut), encoding="utf-8")
    done = _cli("run", "What is the weather?", "--replay", "cut.json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # the run ended with an error (RC1-a)
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("agent-ref run: error: replay: no recorded call left: the recording ended early"), last
    assert f"call {len(starts)} of {len(starts)} stops at event {len(cut) - 1} (counted from 0)" in last
    assert f"a {cut[-1]['type']}, with no message_stop" in last
    _strict(done.stdout, tmp_path)  # the run's stream still ends properly


def _help_examples(command: str, tmp_path: Path) -> list[list[str]]:
    """The ``agent-ref`` command lines of ``--help``'s examples, as argument lists (pipes and env dropped)."""
    done = _cli(*([command] if command else []), "--help", cwd=tmp_path)
    assert done.returncode == 0
    examples = done.stdout[done.stdout.index("example") :]
    found = []
    for line in examples.splitlines():
        for part in line.split(" | "):
            words = shlex.split(part, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words.pop(0)  # VAR=value before the command
            if words[:1] == ["agent-ref"]:
                found.append(words[1:])
    return found


@pytest.mark.parametrize("command", ["", "run", "resume", "log", "runs", "abandon", "serve"])
def test_spec_rc4_a_every_help_example_parses(command: str, tmp_path: Path) -> None:
    """Each example of each --help is a command line the parser takes (`run --model "Hello"` was not) [RC4-a]."""
    from agent_ref.cli.commands import _parser

    examples = _help_examples(command, tmp_path)
    assert examples, "the help has examples"
    for argv in examples:
        args = _parser().parse_args(argv)  # SystemExit (status 2) if not
        if args.command == "run":
            assert args.prompt, argv
            assert not args.prompt.startswith("-"), argv
        model = getattr(args, "model", None)
        if model is not None:
            assert model.startswith("claude-"), argv  # a model name, never the prompt


def test_spec_rc5_c_runs_suggests_commands_that_run_as_printed(tmp_path: Path) -> None:
    """`runs` suggested resume/abandon without --db (and --results); now each runs as printed [RC5-c]."""
    (tmp_path / "data").mkdir()
    paused = _cli("run", "--db", "data/agents.db", "Please confirm: delete the temp files", cwd=tmp_path)
    assert paused.returncode == 0, paused.stderr
    listing = _cli("runs", "--db", "data/agents.db", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    commands = re.findall(r"`([^`]*agent-ref (?:resume|abandon) [^`]*)`", listing.stdout)
    assert len(commands) == 2, listing.stdout
    resume, abandon = commands
    assert "--db data/agents.db" in resume
    assert "--results -" in resume
    assert abandon.endswith("--db data/agents.db")
    env = {**_env(), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", resume], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "end_turn" in done.stderr
    _strict(done.stdout, tmp_path)
    after = _cli("runs", "--db", "data/agents.db", "--format", "json", cwd=tmp_path)
    assert [a["status"] for a in json.loads(after.stdout)["agents"]] == ["idle"]


def test_spec_rc5_b_log_response_is_the_wire_index(tmp_path: Path) -> None:
    """`log --response N` takes the wire's index (0 the first, as X-Response-Index and event ids) [RC5-b]."""
    paused = _cli("run", "Please confirm: delete the temp files", cwd=tmp_path)
    agent = re.search(r"agent (\S+) waits", paused.stderr)
    run_id = re.search(r"started run (\S+)", paused.stderr)
    assert agent, paused.stderr
    assert run_id, paused.stderr
    tool_id = re.search(r"(toolu_\w+)", paused.stderr)
    assert tool_id
    answers = json.dumps([{"tool_use_id": tool_id.group(1), "content": "yes"}])
    assert _cli("resume", agent.group(1), "--results", "-", cwd=tmp_path, stdin=answers).returncode == 0
    first = _cli("log", run_id.group(1), "--response", "0", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout == paused.stdout  # index 0: the response `run` streamed
    _strict(first.stdout, tmp_path)
    second = _cli("log", run_id.group(1), "--response", "1", cwd=tmp_path)
    assert '\\"resume\\"' in second.stdout.split("\n", 1)[0]  # index 1: the resumed response's meta_init
    _strict(second.stdout, tmp_path)
    beyond = _cli("log", run_id.group(1), "--response", "2", cwd=tmp_path)
    _one_error_line(beyond, f"run {run_id.group(1)}: error: it has 2 responses; --response takes 0 to 1")


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["--help"], ["run", "--help"], ["serve", "--help"], ["log", "--help"]],
    ids=" ".join,
)
def test_spec_rc1_b_version_and_help_do_not_load_the_sdk(argv: list[str]) -> None:
    """`agent-ref --version` took 3-5 s importing the SDK; --version and --help load neither it nor the server [RC1-b]."""
    probe = (
        "import sys\n"
        "from agent_ref.cli.commands import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'anthropic', 'httpx2', 'starlette', 'uvicorn'})\n"
        "print('LOADED', heavy, file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=_env(), timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stderr, done.stderr
    assert done.stdout  # the version or the help was printed


def test_the_probe_above_can_see_the_sdk() -> None:
    """The check above is not vacuous: a command that runs an agent does load the SDK in the same probe."""
    probe = (
        "import sys\nfrom agent_ref.cli.flags import model_factory\nimport argparse\n"
        "model_factory(argparse.Namespace(replay=None, model=None))()\n"
        "print('anthropic' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip() == "True", done.stderr


def test_spec_rc9_b_the_pause_message_repeats_subagents_none(tmp_path: Path) -> None:
    """A run with `--subagents none` pauses; the printed resume command says so, and runs as printed [RC9-b]."""
    paused = _cli("run", "--subagents", "none", "Please confirm: delete the temp files", cwd=tmp_path)
    assert paused.returncode == 0, paused.stderr
    command = paused.stderr.strip().splitlines()[-1].strip()
    assert command.startswith("echo ")
    assert "--subagents none" in command
    env = {**_env(), "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    _strict(done.stdout, tmp_path)
