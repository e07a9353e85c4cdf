"""The ``envelope`` console script as a user meets it (spec/cli.md; issue 13 §1, issue 18 §2-3).

Every test runs the real installed console script in a subprocess, so what is checked
is what a shell sees: the bytes on stdout and stderr, and the exit status. Every
stream the script prints is checked by the strict validator (``assert_valid``).
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

import pytest

from conftest import CORPUS, FIXTURES, ROOT
from envelope import DONE, Emitter, frame
from envelope.cli import BENCH_STAGES, PROGRESS_MIN_BYTES
from validating import assert_valid

if TYPE_CHECKING:
    from envelope._decoder import RawLine

ENVELOPE = Path(sys.executable).with_name("envelope")
AGENT = "0b6f5a4e-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
SEED_SSE = FIXTURES / "golden" / "seed_thinking" / "input.sse"
CAPTURE = CORPUS / "legacy_xml_sse_capture.txt"
#: The one error style (C2-a): ``WHERE: error: WHAT`` and maybe ``; WHAT TO DO``.
Done = subprocess.CompletedProcess[bytes]
ERROR_LINE = re.compile(r"^(?P<where>\S[^\n]*?): error: (?P<what>[^\n;]+)(?:; (?P<todo>[^\n]+))?$")


def run(*args: str, stdin: bytes | None = b"", stdout: IO[bytes] | int = subprocess.PIPE) -> Done:
    """Run ``envelope ARGS`` and return what it did; stdin is empty unless given."""
    assert ENVELOPE.is_file(), f"the console script is not installed: {ENVELOPE}"
    return subprocess.run(
        [str(ENVELOPE), *args], input=stdin, stdout=stdout, stderr=subprocess.PIPE, check=False, timeout=120
    )


def errors_of(stderr: bytes) -> list[re.Match[str]]:
    """The error lines of stderr, each checked against the one style (C2-a)."""
    text = stderr.decode()
    assert "Traceback" not in text
    found = [ERROR_LINE.match(line) for line in text.splitlines() if ": error: " in line]
    assert found, f"no error line in {text!r}"
    assert all(found), f"an error line breaks the style: {text!r}"
    return [m for m in found if m is not None]


def big_stream(size: int) -> bytes:
    """A valid SSE stream of at least ``size`` bytes: meta_init, one long text, meta_final."""
    em = Emitter(AGENT)
    meta = {"format": "json", "user_query": "q", "agent_uuid": AGENT, "model": "m"}
    parts = [frame(line) for line in em.buffered("meta_init", json.dumps(meta))]
    total = 0
    while total < size:
        for line in em.streamed("text", "words and more words, " * 60):
            parts.append(frame(line))
            total += len(parts[-1])
    parts.append(frame(em.end("text")))
    parts += [
        frame(line) for line in em.buffered("meta_final", json.dumps({"stop_reason": "end_turn", "total_steps": 1}))
    ]
    parts.append(DONE)
    return b"".join(parts)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / "big.sse"
    path.write_bytes(big_stream(PROGRESS_MIN_BYTES + 1024 * 1024))
    return path


# --- C1: status, version, help ------------------------------------------------------------


def test_spec_c1_version_names_the_installed_version() -> None:
    """[C1-b] ``envelope --version``."""
    from importlib.metadata import version

    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.decode().strip() == f"envelope {version('envelope-stream')}"


@pytest.mark.parametrize("command", [[], ["reconstruct"], ["migrate"], ["validate"], ["bench"], ["check"]])
def test_spec_c1_every_help_says_what_defaults_and_examples(command: list[str]) -> None:
    """[C1-b] ``--help`` of the tool and of each subcommand: what it does, defaults, examples."""
    done = run(*command, "--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    assert "examples:" in text
    if command:
        assert "default" in text
    # Each entry of the options section, but argparse's own switches, says its default.
    entries = re.split(r"\n  (?=-)", text.split("options:", 1)[1].split("examples:", 1)[0])[1:]
    assert entries
    for entry in entries:
        if entry.startswith(("-h, --help", "--version")):
            continue
        assert "default" in entry, f"{entry.split()[0]} does not say its default"


def test_spec_c1_bench_help_lists_its_stages() -> None:
    """[C1-b] ``envelope bench --help`` lists every stage, and the list is the engine's."""
    text = run("bench", "--help").stdout.decode()
    assert all(key in text for key, _ in BENCH_STAGES)
    from benchmarks import engine

    assert [key for key, _ in BENCH_STAGES] == [key for key, _ in engine.STAGES]


def test_spec_c1_exit_statuses() -> None:
    """[C1-a] 0 done, 1 found, 2 unusable."""
    bad = FIXTURES.parent / "spec" / "conformance" / "invalid" / "E121_marker_with_delta.jsonl"
    assert run("validate", str(SEED_SSE)).returncode == 0
    assert run("validate", str(bad)).returncode == 1
    assert run("validate", "--max-bytes", "0", str(bad)).returncode == 2
    assert run("nonsense").returncode == 2


# --- C2: one error style ------------------------------------------------------------------


def test_spec_c2_library_errors_get_where_what_and_advice() -> None:
    """[C2-a] a codec error: the input, its position, and the flag that helps."""
    done = run("migrate", "-", stdin=b"<content-block-text>hi</content-block-text>")
    assert done.returncode == 2
    [err] = errors_of(done.stderr)
    assert err["where"] == "<stdin>"
    assert err["what"].startswith("line 1, byte offset 0: no agent")
    assert err["todo"] == "give the agent with --agent UUID"


def test_spec_c2_argument_errors_name_the_command() -> None:
    """[C2-a] an argument error names the command and says what to give."""
    done = run("bench", "--size-mb", "0", "--out", os.devnull)
    assert done.returncode == 2
    [err] = errors_of(done.stderr)
    assert err["where"] == "envelope bench"
    assert "--size-mb" in err["what"]
    assert err["todo"]


def test_spec_c2_library_messages_name_no_flag() -> None:
    """[C2-b] ``MigrationError`` from Python names no command-line flag."""
    from envelope import MigrationError, XmlMigrator

    with pytest.raises(MigrationError) as info:
        XmlMigrator().feed(b"<content-block-text>hi</content-block-text>")
    assert not re.search(r"--[a-z]", str(info.value)), str(info.value)


# --- C3: inputs and outputs that fail ----------------------------------------------------

READERS = [["reconstruct"], ["migrate"], ["validate"], ["bench", "--stage", "migrate", "--legacy-capture"]]


@pytest.mark.parametrize("command", READERS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("make", "what", "todo"),
    [
        ("missing", "No such file or directory", "check the path"),
        ("folder", "Is a directory", "give a file, not a folder"),
        ("unreadable", "Input/output error", None),
    ],
)
def test_spec_c3_bad_input_files(command: list[str], make: str, what: str, todo: str | None, tmp_path: Path) -> None:
    """[C3-a] a missing file, a folder, an unreadable file: an error naming it, exit 2."""
    # /proc/self/mem opens but fails on read (EIO), even as root, where modes do not stop a read.
    path = {"missing": str(tmp_path / "nope.sse"), "folder": str(tmp_path), "unreadable": "/proc/self/mem"}[make]
    extra = ["--out", str(tmp_path / "out")] if command[0] == "bench" else []
    done = run(*command, path, *extra)
    assert done.returncode == 2
    [err] = errors_of(done.stderr)
    assert err["where"] == path
    assert err["what"] == what
    if todo:
        assert todo in err["todo"]
    if command[0] == "validate":  # the summary does not pretend the file was checked (issue 24 §6)
        lines = done.stderr.decode().splitlines()
        assert lines == [lines[0], "could not check 1 of 1 file: nothing was validated"]
        assert "error(s)" not in done.stderr.decode()


def test_spec_c3_validate_checks_the_other_files(tmp_path: Path) -> None:
    """[C3-a] validate reports the bad file and still checks the good one."""
    bad = FIXTURES.parent / "spec" / "conformance" / "invalid" / "E121_marker_with_delta.jsonl"
    done = run("validate", str(tmp_path / "nope.sse"), str(bad))
    assert done.returncode == 2
    assert b"E121" in done.stdout
    assert (
        done.stderr.decode().splitlines()[-1]
        == "could not check 1 of 2 files; 1 error(s), 0 warning(s) in the 1 checked"
    )


@pytest.mark.parametrize("command", [["reconstruct", "-"], ["validate", "-"], ["migrate", "-"]])
def test_spec_c3_closed_stdin(command: list[str]) -> None:
    """[C3-b] ``envelope reconstruct - <&-``: a clear error, not an AttributeError."""
    done = subprocess.run(
        f'exec "{ENVELOPE}" {" ".join(command)} <&-', shell=True, capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 2
    [err] = errors_of(done.stderr)
    assert err["where"] == "<stdin>"
    assert err["what"] == "standard input is closed"


def test_spec_c3_closed_stdout() -> None:
    """[C3-b] stdout closed: an error naming ``<stdout>``."""
    done = subprocess.run(
        f'exec "{ENVELOPE}" reconstruct "{SEED_SSE}" >&-', shell=True, capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 2
    [err] = errors_of(done.stderr)
    assert err["where"] == "<stdout>"


def test_spec_c3_full_disk_names_the_output_and_counts_stay_true() -> None:
    """[C3-c] ``envelope validate FILE > /dev/full``: the output is blamed; the counts are what was found."""
    path = CORPUS / "json_scenario_tool_result_image.jsonl"
    expected = run("validate", str(path))
    assert expected.returncode == 1
    summary = expected.stderr.decode().splitlines()[-1]
    assert summary == "1 error(s), 2 warning(s) in 1 file"
    with open("/dev/full", "wb") as full:
        done = run("validate", str(path), stdout=full)
    assert done.returncode == 2
    [err] = errors_of(done.stderr)
    assert err["where"] == "<stdout>"
    assert err["what"] == "No space left on device"
    assert str(path) not in done.stderr.decode().split("\n")[0]
    assert done.stderr.decode().splitlines()[-1] == summary


@pytest.mark.parametrize("command", [["reconstruct"], ["migrate"]])
def test_spec_c3_full_disk_for_the_other_writers(command: list[str]) -> None:
    """[C3-c] reconstruct and migrate blame the output too."""
    source = CAPTURE if command == ["migrate"] else SEED_SSE
    with open("/dev/full", "wb") as full:
        done = run(*command, str(source), stdout=full)
    assert done.returncode == 2
    assert [e["where"] for e in errors_of(done.stderr)] == ["<stdout>"]


# --- C4: broken pipe -----------------------------------------------------------------------


def _read_one_line_then_close(args: list[str]) -> tuple[int, bytes, bytes]:
    """What ``envelope ARGS | head -1`` does to the command: one line read, then the pipe closed."""
    proc = subprocess.Popen([str(ENVELOPE), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    return proc.wait(timeout=120), first, err


@pytest.mark.parametrize("command", ["migrate", "reconstruct", "validate"])
def test_spec_c4_broken_pipe_exits_quietly(command: str, tmp_path: Path, big: Path) -> None:
    """[C4-a] ``envelope migrate big.xml | head -1``: status 141, nothing on stderr."""
    if command == "migrate":
        capture = CAPTURE.read_bytes()
        body = capture[: capture.rfind(b"data: [DONE]")]
        path = tmp_path / "big.txt"
        path.write_bytes(body * 100 + b"data: [DONE]\n\n")  # well past a pipe's buffer
        args = ["migrate", str(path)]
    elif command == "reconstruct":
        args = ["reconstruct", str(big)]
    else:  # many violations: one E101 per line
        path = tmp_path / "noise.jsonl"
        path.write_bytes(b"not json\n" * 20_000)
        args = ["validate", str(path)]
    status, first, err = _read_one_line_then_close(args)
    assert first
    assert status == 141
    text = err.decode()
    assert "Traceback" not in text
    assert ": error:" not in text
    assert "Broken pipe" not in text


# --- C5: empty input -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["reconstruct", "migrate", "validate"])
@pytest.mark.parametrize("data", [b"", b"\n\n \r\n\t"], ids=["empty", "whitespace"])
def test_spec_c5_empty_input_one_rule(command: str, data: bytes, tmp_path: Path) -> None:
    """[C5-a] empty input: the same error, exit 2, for reconstruct, migrate and validate."""
    path = tmp_path / "empty.sse"
    path.write_bytes(data)
    out = tmp_path / "out.jsonl"
    extra = ["-o", str(out)] if command == "migrate" else []
    for args in ([str(path)], ["-"]):
        done = run(command, *args, *extra, stdin=data)
        assert done.returncode == 2
        assert done.stdout == b""
        [err] = errors_of(done.stderr)
        assert err["what"].endswith(f"nothing to {command}")
        assert not out.exists()


def test_spec_c5_content_without_an_envelope_is_not_empty(tmp_path: Path) -> None:
    """[C5-a] only an SSE comment: validate judges it (E167); reconstruct prints an empty transcript."""
    path = tmp_path / "comment.sse"
    path.write_bytes(b": just a comment\n\n")
    judged = run("validate", str(path))
    assert judged.returncode == 1
    assert b"E167" in judged.stdout
    rebuilt = run("reconstruct", str(path))
    assert rebuilt.returncode == 0
    assert json.loads(rebuilt.stdout) == {"done": False, "agents": {}}


# --- C6: progress on a terminal -----------------------------------------------------------


def _with_tty_stderr(args: list[str]) -> tuple[int, bytes]:
    """Run with stderr on a pseudo-terminal; return the status and what the terminal got."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([str(ENVELOPE), *args], stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        seen = bytearray()
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            seen += chunk
        return proc.wait(timeout=120), bytes(seen)
    finally:
        os.close(master)


@pytest.mark.parametrize(("command", "label"), [("validate", "validating"), ("reconstruct", "reconstructing")])
def test_spec_c6_progress_on_a_terminal(command: str, label: str, big: Path) -> None:
    """[C6-a] a large input on a terminal: a transient progress bar on stderr."""
    status, seen = _with_tty_stderr([command, str(big)])
    assert status == 0
    assert label.encode() in seen
    assert b"\x1b[" in seen  # drawn, then erased (transient)


def test_spec_c6_progress_while_migrating(tmp_path: Path) -> None:
    """[C6-a] migrating a large capture on a terminal shows the bar too."""
    capture = CAPTURE.read_bytes()
    body = capture[: capture.rfind(b"data: [DONE]")]
    path = tmp_path / "big.txt"
    copies = PROGRESS_MIN_BYTES // len(body) + 2
    path.write_bytes(body * copies + b"data: [DONE]\n\n")
    status, seen = _with_tty_stderr(["migrate", str(path), "--format", "jsonl", "-o", str(tmp_path / "o.jsonl")])
    assert status == 0
    assert b"migrating" in seen
    # The same recorded agent, repeated: each copy after the first opens with its meta_init again.
    assert_valid((tmp_path / "o.jsonl").read_bytes(), expect=["E162"] * (copies - 1))


@pytest.mark.parametrize("command", ["validate", "reconstruct"])
def test_spec_c6_quiet_when_not_a_terminal(command: str, big: Path) -> None:
    """[C6-a] the same work with stderr on a pipe draws nothing."""
    done = run(command, str(big))
    assert done.returncode == 0
    assert b"\x1b" not in done.stderr
    assert b"validating" not in done.stderr
    assert b"reconstructing" not in done.stderr


def test_spec_c6_small_input_draws_nothing_even_on_a_terminal() -> None:
    """[C6-a] under the size threshold, nothing is drawn."""
    status, seen = _with_tty_stderr(["validate", str(SEED_SSE)])
    assert status == 0
    assert b"\x1b" not in seen


# --- C7: machine output, and the streams the CLI prints ---------------------------------


def test_spec_c7_validate_json_is_the_documented_shape() -> None:
    """[C7-a] one object; each violation's keys in the documented order; ``file`` with several files."""
    bad = FIXTURES.parent / "spec" / "conformance" / "invalid" / "E123_image_other_id.jsonl"
    one = run("validate", "--format", "json", str(bad))
    assert one.returncode == 1
    doc = json.loads(one.stdout)
    assert list(doc) == ["violations"]
    keys = ["code", "severity", "line", "offset", "agent", "type", "message"]
    assert [list(v) for v in doc["violations"]] == [keys]
    two = run("validate", "--format", "json", str(bad), "-", stdin=bad.read_bytes())
    assert [list(v) for v in json.loads(two.stdout)["violations"]] == [["file", *keys]] * 2
    assert [v["file"] for v in json.loads(two.stdout)["violations"]] == [str(bad), "<stdin>"]


def test_spec_c7_reconstruct_prints_the_transcript() -> None:
    """[C7-b] the transcript as indented JSON, the golden case's blocks."""
    done = run("reconstruct", str(SEED_SSE))
    assert done.returncode == 0
    assert done.stdout.startswith(b"{\n  ")
    want = json.loads((SEED_SSE.parent / "blocks.json").read_text())
    assert json.loads(done.stdout) == want


@pytest.mark.parametrize("fmt", ["sse", "jsonl"])
def test_spec_c7_migrate_prints_a_valid_stream(fmt: str) -> None:
    """[C7-b] the migrated capture, in either framing, passes the strict validator."""
    done = run("migrate", str(CAPTURE), "--format", fmt)
    assert done.returncode == 0
    assert done.stdout.endswith(b"[DONE]\n\n" if fmt == "sse" else b"[DONE]\n")
    assert_valid(done.stdout)


def test_spec_c6_bench_names_its_stage_on_a_terminal_only(tmp_path: Path) -> None:
    """[C6-a] ``envelope bench``: a status line per stage on a terminal; nothing on a pipe."""
    args = ["bench", "--size-mb", "0.02", "--rounds", "1", "--no-memory", "--stage", "emit_small"]
    status, seen = _with_tty_stderr([*args, "--out", str(tmp_path / "tty")])
    assert status == 0
    assert b"stage 1 of 1: emit_small" in seen
    piped = run(*args, "--out", str(tmp_path / "pipe"))
    assert piped.returncode == 0
    assert b"stage 1 of 1" not in piped.stderr
    assert b"\x1b" not in piped.stderr


# --- validate --profile and --explain (spec §10, spec/validation.md table) ----------------


def test_validate_profile_seed_accepts_a_whole_control_line() -> None:
    """A long meta_init sent whole is E107 under the default profile and clean under ``--profile seed``."""
    case = ROOT / "spec" / "conformance" / "valid" / "long_meta_init_whole.seed.jsonl"
    default = run("validate", str(case))
    seed = run("validate", "--profile", "seed", str(case))
    assert default.returncode == 1
    assert b"E107" in default.stdout
    assert (seed.returncode, seed.stdout) == (0, b"")


def test_validate_explain_reads_the_code_table() -> None:
    """``--explain CODE`` prints the code's row of CODES; an unknown code is an error (exit 2)."""
    from envelope._validator import explain

    known = run("validate", "--explain", "e116")
    assert (known.returncode, known.stdout.decode()) == (0, explain("E116") + "\n")
    unknown = run("validate", "--explain", "X999")
    assert unknown.returncode == 2
    assert b"no code 'X999'" in unknown.stderr
    nothing = run("validate")
    assert nothing.returncode == 2
    assert b"no file given" in nothing.stderr


# --- issue 24 §6: the agent tree's entry point meets the depth rule ---------------------------


def deep_meta_init_stream(depth: int = 1000) -> bytes:
    """A 2 KB-scale stream whose one agent's meta_init payload nests ``depth`` levels."""
    em = Emitter(AGENT)
    nested = "[" * depth + "]" * depth
    meta = f'{{"format":"json","user_query":"q","agent_uuid":"{AGENT}","model":"m","x":{nested}}}'
    lines = [*em.buffered("meta_init", meta), *em.streamed("text", "hi"), em.end("text")]
    return b"".join(frame(line) for line in lines) + DONE


def test_tree_refuses_a_meta_init_nested_too_deep_with_a_coded_error() -> None:
    """envelope-v1 §8.3.1-c, §6.7-a: ``tree()`` measures the payload before parsing it (was RecursionError)."""
    from envelope import Reconstructor, ValidationError, tree
    from envelope._limits import MAX_NESTING_DEPTH

    data = deep_meta_init_stream()
    assert_valid(data, expect=["E116"])  # the validator's verdict on the same payload
    rebuilder = Reconstructor()
    rebuilder.feed_many(_lines_of(data))
    rebuilder.close()
    with pytest.raises(ValidationError) as info:
        tree(rebuilder.transcript())
    assert info.value.section == "6.7"
    assert info.value.key == (AGENT, "meta_init")
    assert f"MAX_NESTING_DEPTH={MAX_NESTING_DEPTH}" in str(info.value)
    # At the limit the payload is read as any other (the agent is a root, not an error).
    shallow = deep_meta_init_stream(MAX_NESTING_DEPTH - 1)
    assert_valid(shallow)
    rebuilder = Reconstructor()
    rebuilder.feed_many(_lines_of(shallow))
    rebuilder.close()
    assert [node.agent for node in tree(rebuilder.transcript()).roots] == [AGENT]


def _lines_of(data: bytes) -> list[RawLine]:
    """The envelope lines of a recording, as ``StreamReader`` reads them."""
    from envelope import StreamReader

    reader = StreamReader()
    return [*reader.feed(data), *reader.close()]


def test_reconstruct_tree_on_a_too_deep_meta_init_is_one_error_line(tmp_path: Path) -> None:
    """``envelope reconstruct --tree``: exit 2, one ``WHERE: error: WHAT`` line, no traceback."""
    path = tmp_path / "deep.sse"
    path.write_bytes(deep_meta_init_stream())
    assert path.stat().st_size < 3000  # the 2 KB stream
    done = run("reconstruct", "--tree", str(path))
    assert done.returncode == 2
    assert done.stdout == b""
    [err] = errors_of(done.stderr)
    assert err["where"] == str(path)
    assert "MAX_NESTING_DEPTH=256" in err["what"]
    assert len(done.stderr.decode().splitlines()) == 1


# --- issue 25 §4: E109 says what to do; --max-line-bytes is the cap it names --------------


def long_line_stream(tmp_path: Path) -> tuple[Path, int]:
    """A valid recording with one 3,000-byte envelope line; the size of that line."""
    em = Emitter(AGENT)
    meta = {"format": "json", "user_query": "q", "agent_uuid": AGENT, "model": "m"}
    lines = [*em.buffered("meta_init", json.dumps(meta)), *em.streamed("text", "z" * 2000), em.end("text")]
    lines.append(b'{"type":"text","agent":"%s","final":false,"delta":"%s"}' % (AGENT.encode(), b"y" * 2900))
    lines.append(em.end("text"))
    lines += em.buffered("meta_final", json.dumps({"stop_reason": "end_turn", "total_steps": 1}))
    data = b"".join(frame(line) for line in lines) + DONE
    assert_valid(data, max_bytes=4096)
    path = tmp_path / "long.sse"
    path.write_bytes(data)
    return path, max(len(line) for line in lines)


def test_e109_names_the_option_that_raises_the_cap(tmp_path: Path) -> None:
    """[C2-c] ``envelope validate``: the E109 line says what to do, and the flag it names reads the line."""
    path, longest = long_line_stream(tmp_path)
    capped = run("validate", "--max-bytes", "4096", "--max-line-bytes", "1000", str(path))
    assert capped.returncode == 1
    found = capped.stdout.decode().splitlines()
    assert found
    for e109 in found:
        assert " E109 " in e109
        assert "give one envelope per line" in e109
        assert e109.endswith("; the cap is --max-line-bytes N (now 1000)")
    raised = run("validate", "--max-bytes", "4096", "--max-line-bytes", str(longest + 16), str(path))
    assert (raised.returncode, raised.stdout) == (0, b"")


def test_reconstruct_over_the_cap_gives_the_remedy(tmp_path: Path) -> None:
    """[C2-c] ``envelope reconstruct``: the reader's refusal is one error line with the flag; the flag reads it."""
    path, longest = long_line_stream(tmp_path)
    capped = run("reconstruct", "--max-line-bytes", "1000", str(path))
    assert capped.returncode == 2
    [err] = errors_of(capped.stderr)
    assert "longer than max_line_bytes=1000" in err["what"]
    assert err["todo"] == "give one envelope per line, or raise the cap with --max-line-bytes N (now 1000)"
    raised = run("reconstruct", "--max-line-bytes", str(longest + 16), str(path))
    assert raised.returncode == 0
    assert json.loads(raised.stdout)["done"] is True


# --- issue 25 §4: reconstruct -o, written as migrate -o is (C3-e) ----------------------------


def test_reconstruct_output_file_is_the_transcript(tmp_path: Path) -> None:
    """[C3-e] ``reconstruct -o PATH``: the transcript goes to PATH, nothing to stdout, no partial file left."""
    target = tmp_path / "t.json"
    done = run("reconstruct", str(SEED_SSE), "-o", str(target))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert target.read_bytes() == run("reconstruct", str(SEED_SSE)).stdout
    assert json.loads(target.read_text()) == json.loads((SEED_SSE.parent / "blocks.json").read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


@pytest.mark.parametrize("command", ["reconstruct", "migrate"])
def test_output_file_is_all_or_nothing(command: str, tmp_path: Path) -> None:
    """[C3-e] a command that fails leaves an existing ``-o`` file as it was, and no partial file."""
    target = tmp_path / "out"
    target.write_bytes(b"kept\n")
    if command == "reconstruct":
        bad = tmp_path / "deep.sse"
        bad.write_bytes(deep_meta_init_stream())
        args = ["reconstruct", "--tree", str(bad)]
    else:
        args = ["migrate", "-"]  # no agent: MigrationError (spec §M5.1)
    done = run(*args, "-o", str(target), stdin=b"<content-block-text>hi</content-block-text>")
    assert done.returncode == 2
    assert len(errors_of(done.stderr)) == 1
    assert target.read_bytes() == b"kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out", *(["deep.sse"] if command == "reconstruct" else [])]
    )


@pytest.mark.parametrize("command", ["reconstruct", "migrate"])
def test_output_that_fails_is_named(command: str, tmp_path: Path) -> None:
    """[C3-c] [C3-e] ``-o`` on a full device, in a missing folder, or on a folder: an error naming it, exit 2.

    A device is written in place: renaming a finished file over /dev/full would replace the device.
    """
    source = CAPTURE if command == "migrate" else SEED_SSE
    cases = [
        ("/dev/full", "No space left on device", "free some space"),
        (str(tmp_path / "no" / "such" / "out"), "No such file or directory", "check that the folder exists"),
        (str(tmp_path), "Is a directory", "give a file, not a folder"),
    ]
    for target, what, todo in cases:
        done = run(command, str(source), "-o", target)
        assert done.returncode == 2, target
        [err] = errors_of(done.stderr)
        assert (err["where"], err["what"]) == (target, what)
        assert todo in err["todo"]
    assert Path("/dev/full").is_char_device()
    assert list(tmp_path.iterdir()) == []


# --- C8: one numbering for every subcommand (issue 25 §4) -----------------------------------


def test_spec_c8_lines_and_columns_from_1_offsets_from_0_and_labelled(tmp_path: Path) -> None:
    """[C8-a] validate and reconstruct place the same fault at the same line and column; the
    byte offset they name is the fault's 0-based offset in the file."""
    first = b'{"type":"text","agent":"a","final":false,"delta":"x"}\n'
    second = b'{"type":"text","agent":"a","final":fals,"delta":""}\n'
    path = tmp_path / "bad.jsonl"
    path.write_bytes(first + second)
    rebuilt = run("reconstruct", str(path))
    [err] = errors_of(rebuilt.stderr)
    found = re.match(r"line 2, column (\d+), byte offset (\d+), envelope index 1: not JSON", err["what"])
    assert found, err["what"]
    column, offset = int(found[1]), int(found[2])
    assert len(first) <= offset < len(first) + len(second) - 1  # inside line 2, counted from 0
    assert column == offset - len(first) + 1  # the same place, counted from 1 within the line
    assert b"fals" in second[column - 6 : column]  # where the parser gave up, just past 'fals'
    judged = run("validate", str(path))
    [e101] = [line for line in judged.stdout.decode().splitlines() if " E101 " in line]
    assert e101.startswith(f"{path}:2:{column}: E101 not JSON: ")
    assert e101.endswith(f"(column {column})")


def test_spec_c8_migrate_offsets_are_labelled_and_point_at_the_tag() -> None:
    """[C8-a] each migrate warning's line is 1-based and its byte offset 0-based, at the tag it names."""
    done = run("migrate", str(CAPTURE))
    assert done.returncode == 0
    data = CAPTURE.read_bytes()
    warnings = [line for line in done.stderr.decode().splitlines() if ": warning: " in line]
    assert len(warnings) == 12
    for warning in warnings:
        found = re.search(r"warning: line (\d+), byte offset (\d+): older label: (<[^>]+>)", warning)
        assert found, warning
        line, offset, tag = int(found[1]), int(found[2]), found[3].encode()
        assert data.count(b"\n", 0, offset) + 1 == line
        assert tag[:-1] in data[offset : offset + 400], warning  # the tag starts at (or just after) the offset


# --- C9: migrate's warnings: each, a summary per code, or none (issue 25 §4) -----------------


@pytest.fixture(scope="module")
def big_legacy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The real legacy capture of ``fixtures/``, repeated past the progress bar's threshold: its
    12 older-label warnings each time (the issue's 36,000 came from the same capture, repeated)."""
    capture = CAPTURE.read_bytes()
    body = capture[: capture.rfind(b"data: [DONE]")]
    copies = PROGRESS_MIN_BYTES // len(body) + 2
    path = tmp_path_factory.mktemp("legacy") / "big.txt"
    path.write_bytes(body * copies + b"data: [DONE]\n\n")
    return path, copies


def _warning_lines(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode().splitlines() if ": warning: line " in line]


def test_spec_c9_migrate_warnings_all_summary_none(big_legacy: tuple[Path, int], tmp_path: Path) -> None:
    """[C9-a] ``--warnings all`` prints each; ``summary`` one line per code with the count; ``none`` and
    ``-q`` nothing; the converted stream is the same in every mode."""
    path, copies = big_legacy
    expected = 12 * copies
    every = run("migrate", str(path), "--warnings", "all", "--format", "jsonl", "-o", str(tmp_path / "all.jsonl"))
    assert every.returncode == 0
    assert len(_warning_lines(every.stderr)) == expected
    assert all("older label" in line and "(spec §M2.7)" in line for line in _warning_lines(every.stderr))
    # Each copy of the recorded agent opens with its meta_init again (E162), as in test_spec_c6.
    assert_valid((tmp_path / "all.jsonl").read_bytes(), expect=["E162"] * (copies - 1))
    summary = run("migrate", str(path), "--warnings", "summary", "--format", "jsonl", "-o", str(tmp_path / "s.jsonl"))
    assert summary.returncode == 0
    name = str(path)
    lines = summary.stderr.decode().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{name}: warning: {expected} × spec §M2.7, the first at line 93, byte offset 1416: ")
    assert lines[1] == f"{name}: {expected} warnings (1 code); --warnings all prints each"
    for quiet in (["--warnings", "none"], ["-q"], ["--quiet"]):
        done = run("migrate", str(path), *quiet, "--format", "jsonl", "-o", str(tmp_path / "q.jsonl"))
        assert (done.returncode, done.stderr) == (0, b"")
        assert (tmp_path / "q.jsonl").read_bytes() == (tmp_path / "all.jsonl").read_bytes()
    assert (tmp_path / "s.jsonl").read_bytes() == (tmp_path / "all.jsonl").read_bytes()
    both = run("migrate", str(path), "-q", "--warnings", "all")
    assert both.returncode == 2  # argparse: the two say opposite things
    assert b"not allowed with argument" in both.stderr


def test_spec_c9_default_is_a_summary_on_a_terminal_and_each_warning_otherwise(
    big_legacy: tuple[Path, int], tmp_path: Path
) -> None:
    """[C9-a] on a terminal no warning goes through the live bar one by one (issue 25 §4: 175 s
    against 14.5 s); the summary is printed once the bar is gone. To a pipe, every warning."""
    path, copies = big_legacy
    status, seen = _with_tty_stderr(["migrate", str(path), "--format", "jsonl", "-o", str(tmp_path / "t.jsonl")])
    assert status == 0
    text = seen.decode("utf-8", "replace")
    assert b"migrating" in seen  # the bar was drawn: the input is over the threshold
    assert ": warning: line " not in text
    assert f"{12 * copies} × spec §M2.7" in text
    assert f"{12 * copies} warnings (1 code)" in text
    quiet_status, quiet_seen = _with_tty_stderr(["migrate", str(path), "-q", "-o", str(tmp_path / "q.sse")])
    assert (quiet_status, quiet_seen) == (0, b"")  # neither warnings nor the bar
    piped = run("migrate", str(path), "-o", str(tmp_path / "p.sse"))
    assert len(_warning_lines(piped.stderr)) == 12 * copies


def test_spec_c9_a_failed_migration_still_summarises_what_it_saw(tmp_path: Path) -> None:
    """[C9-a] the summary comes before the error when the migration stops part way."""
    capture = CAPTURE.read_bytes()
    body = capture[: capture.rfind(b"data: [DONE]")]
    path = tmp_path / "cut.txt"
    path.write_bytes(body + b"data: [DONE]\n\ndata: more\n\n")  # content after [DONE]: an error (§M1.3)
    done = run("migrate", str(path), "--warnings", "summary")
    assert done.returncode == 2
    lines = done.stderr.decode().splitlines()
    assert "12 × spec §M2.7" in lines[0]
    assert lines[1].startswith(f"{path}: 12 warnings")
    assert ": error: " in lines[2]


@pytest.mark.parametrize("command", ["validate", "migrate"])
def test_spec_c3_d_a_stderr_that_cannot_be_written_is_exit_2(command: str) -> None:
    """[C3-d] the summary (validate) or the warnings (migrate) cannot be written: exit 2, not 0."""
    source = CAPTURE if command == "migrate" else SEED_SSE  # valid, with a warning: 0 on a working stderr
    assert run(command, str(source)).returncode == 0
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [str(ENVELOPE), command, str(source)], stdout=subprocess.PIPE, stderr=full, check=False, timeout=120
        )
    assert done.returncode == 2
    if command == "migrate":
        assert_valid(done.stdout)  # the output itself was written whole


def test_spec_c3_e_output_through_a_symbolic_link_replaces_the_file_it_names(tmp_path: Path) -> None:
    """[C3-e] ``-o LINK``: the link stays a link, and the file it points to holds the output."""
    real = tmp_path / "real.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    done = run("reconstruct", str(SEED_SSE), "-o", str(link))
    assert done.returncode == 0
    assert link.is_symlink()
    assert json.loads(real.read_text()) == json.loads((SEED_SSE.parent / "blocks.json").read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]
