"""``pip install envelope-stream`` is the codec alone (issue 28 §1).

One fresh venv, built once for the module: a pure wheel of the project (built offline in
the test's own venv, ``--no-build-isolation``, from a copy of the sources) and msgspec's
wheel (from pip's cache, or the package registry) are installed into it with
``--no-index``, so an install that asked for any other distribution fails here. In it:
``import envelope``, an emit/read/reconstruct/validate/migrate/translate round, the
``envelope validate --strict``, ``reconstruct``, ``migrate`` and ``convert`` commands on
the fixtures, ``pip list`` (msgspec, pip, setuptools and the project, nothing else), and
each optional part saying in one line, exit 2, which extra it needs.

Building the venv costs some seconds; every step has a time limit. Outside CI, a
machine that cannot get msgspec's wheel skips loudly; with ``CI=true`` that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from importlib.metadata import version
from pathlib import Path

import pytest

from envelope import DONE, Emitter, Reconstructor, StreamReader, frame
from envelope._extras import EXTRAS
from source_tree import copy_source_tree

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
#: Upper bound, in seconds, of each step (a wheel build, an install, one command).
STEP_SECONDS = 300

pytestmark = pytest.mark.packaging


def _run(
    args: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=STEP_SECONDS, check=False)


class BaseVenv:
    """The fresh venv with only the base install."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / "bin"
        self.python = str(self.bin / "python")

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        return subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            input=stdin,
            env=env,
            cwd=self.root,
            timeout=STEP_SECONDS,
            check=False,
        )


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> BaseVenv:
    tmp = tmp_path_factory.mktemp("base-install")
    source = copy_source_tree(tmp / "src-tree")
    dist = tmp / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    env = {**os.environ, "ENVELOPE_PURE": "1", "PIP_NO_INDEX": "1"}
    env.pop("ENVELOPE_REQUIRE_COMPILED", None)
    built = _run([*pip, "wheel", "--no-build-isolation", "--no-deps", "-w", str(dist), str(source)], env=env)
    assert built.returncode == 0, built.stderr
    # msgspec's wheel: the version this venv runs, from pip's cache when it holds it.
    fetched = _run(
        [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", str(dist), f"msgspec=={version('msgspec')}"]
    )
    if fetched.returncode != 0:
        if os.environ.get("CI") == "true":
            pytest.fail(f"could not get msgspec's wheel for the base-install venv: {fetched.stderr[-2000:]}")
        pytest.skip(f"PACKAGING TEST DID NOT RUN: no msgspec wheel (no cache, no registry): {fetched.stderr[-300:]}")
    root = tmp / "venv"
    venv.EnvBuilder(with_pip=True).create(root)
    (wheel,) = dist.glob("envelope_stream-*.whl")
    installed = _run(
        [
            str(root / "bin" / "python"),
            "-m",
            "pip",
            "--disable-pip-version-check",
            "-q",
            "install",
            "--no-index",
            "--find-links",
            str(dist),
            str(wheel),
        ],
        env={**os.environ, "PIP_NO_INDEX": "1"},
    )
    assert installed.returncode == 0, installed.stderr
    return BaseVenv(root)


def _one_line(done: subprocess.CompletedProcess[str], extra: str) -> str:
    """The command failed with exit 2 and one line of stderr naming ``extra``; that line."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert f"'{extra}' extra" in lines[0]
    assert f"pip install 'envelope-stream[{extra}]'" in lines[0]
    return lines[0]


def test_only_msgspec_is_installed(base: BaseVenv) -> None:
    """spec cli [C10-a]: the base install brings msgspec and nothing else."""
    done = base.run(base.python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check")
    assert done.returncode == 0, done.stderr
    names = {row["name"].lower() for row in json.loads(done.stdout)}
    assert "envelope-stream" in names
    assert names - {"envelope-stream", "msgspec", "pip", "setuptools"} == set(), names


def test_the_codec_runs(base: BaseVenv) -> None:
    code = r"""
import json, sys
import envelope
from envelope import DONE, Emitter, Reconstructor, StreamReader, frame, migrate_xml, validate
from envelope import _speedups
from envelope.anthropic import AnthropicTranslator

agent = "0b6f5a4e-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
em = Emitter(agent, max_bytes=2048)
meta = {"format": "json", "user_query": "Hi", "agent_uuid": agent, "model": "m"}
lines = [*em.buffered("meta_init", json.dumps(meta)), *em.streamed("text", "Hello, world"), em.end("text")]
body = b"".join(map(frame, lines)) + DONE
reader, rebuilt = StreamReader("sse"), Reconstructor()
read = [*reader.feed(body), *reader.close()]
for line in read:
    rebuilt.feed(line)
assert not rebuilt.close()
blocks = rebuilt.transcript().to_dict()["agents"][agent]["blocks"]
assert [b["type"] for b in blocks] == ["meta_init", "text"], blocks
assert blocks[1]["content"] == "Hello, world", blocks
assert list(validate(read)) == []
bad = list(validate([b'{"type":"text","agent":"a","final":false}']))
assert bad, "the validator found nothing wrong in a broken stream"
migrated = list(migrate_xml([open(sys.argv[2], "rb").read()]))
assert migrated and list(validate(migrated)) == []
t = AnthropicTranslator(agent)
out = []
for event in json.load(open(sys.argv[1])):
    out.extend(t.feed(event))
out.extend(t.finish())
assert out and all(envelope.decode(line).agent == agent for line in out)
assert "anthropic" not in sys.modules
print(_speedups.loaded(), len(out))
"""
    done = base.run(
        base.python,
        "-c",
        code,
        str(FIXTURES / "corpus" / "anthropic_events_0.json"),
        str(FIXTURES / "corpus" / "legacy_xml_sse_capture.txt"),
    )
    assert done.returncode == 0, done.stderr
    mode, count = done.stdout.split()
    assert mode == "pure"
    assert int(count) > 0


def _strict_stream(path: Path) -> bytes:
    """A stream the strict validator accepts (meta_init, text, meta_final, [DONE]), written to ``path``."""
    agent = "0b6f5a4e-1c2d-4e3f-8a9b-0c1d2e3f4a5b"
    em = Emitter(agent)
    meta = {"format": "json", "user_query": "Hi", "agent_uuid": agent, "model": "m"}
    final = {"stop_reason": "end_turn", "total_steps": 1}
    lines = [
        *em.buffered("meta_init", json.dumps(meta)),
        *em.streamed("text", "Hello"),
        em.end("text"),
        *em.buffered("meta_final", json.dumps(final)),
    ]
    body = b"".join(map(frame, lines)) + DONE
    path.write_bytes(body)
    return body


def test_the_three_commands_run(base: BaseVenv, tmp_path: Path) -> None:
    """spec cli [C10-a]: validate, reconstruct, migrate (and convert) run on the base install."""
    body = _strict_stream(tmp_path / "stream.sse")
    done = base.run("envelope", "validate", "--strict", str(tmp_path / "stream.sse"))
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
    done = base.run("envelope", "reconstruct", str(tmp_path / "stream.sse"))
    assert done.returncode == 0, done.stderr
    rebuilt = Reconstructor()
    for line in (reader := StreamReader("sse")).feed(body):
        rebuilt.feed(line)
    reader.close()
    assert json.loads(done.stdout) == json.loads(json.dumps(rebuilt.transcript().to_dict()))
    capture = str(FIXTURES / "corpus" / "legacy_xml_sse_capture.txt")
    done = base.run("envelope", "migrate", capture)
    assert done.returncode == 0, done.stderr
    here = _run([str(Path(sys.executable).parent / "envelope"), "migrate", capture])  # this venv, every extra
    assert here.returncode == 0, here.stderr
    assert done.stdout.count("data: ") > 100
    assert done.stdout == here.stdout
    done = base.run("envelope", "convert", "--help")
    assert done.returncode == 0, done.stderr
    broken = base.run("envelope", "validate", "--strict", "-", stdin='data: {"type":"text"}\n\n')
    assert broken.returncode == 1, broken


def test_agent_ref_names_the_agent_extra(base: BaseVenv) -> None:
    """spec agent-ref CLI [RC1-c], cli [C10-b]: one line naming the extra, exit 2, for every subcommand."""
    for args in (["--version"], ["--help"], ["run", "hi"], ["serve"]):
        line = _one_line(base.run("agent-ref", *args), "agent")
        assert line.startswith("agent-ref: error: ")


def test_import_agent_ref_names_the_agent_extra(base: BaseVenv) -> None:
    code = "import agent_ref\ntry:\n    from agent_ref import Agent\nexcept ImportError as exc:\n    print(exc)\n"
    done = base.run(base.python, "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "agent_ref needs the 'agent' extra: pip install 'envelope-stream[agent]'\n"


def test_envelope_check_names_the_check_extra(base: BaseVenv) -> None:
    """spec cli [C10-b]: envelope check without its extra is one line naming it."""
    line = _one_line(base.run("envelope", "check", "http://127.0.0.1:9/"), "check")
    assert line.startswith("envelope check: error: ")


def test_every_extra_module_comes_from_a_distribution_of_that_extra() -> None:
    """``envelope._extras.EXTRAS`` agrees with ``pyproject.toml`` (checked in this, the full venv)."""
    import tomllib
    from importlib.metadata import packages_distributions

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        found = set()
        for requirement in extras[extra]:
            name = requirement.split("[")[0].split(">")[0].split("=")[0].strip().lower()
            if name == "envelope-stream":
                inner = requirement.split("[", 1)[1].split("]")[0]
                for part in inner.split(","):
                    found |= names(part.strip())
            else:
                found.add(name)
        return found

    owners = packages_distributions()
    for extra, modules in EXTRAS.items():
        listed = names(extra)
        for module in modules:
            # A module brought by a listed distribution or by one of its own requirements (referencing by jsonschema).
            dists = {d.lower() for d in owners.get(module, [])}
            assert dists, f"{module} is not installed here"
            assert dists & listed or any(
                dists
                & {
                    r.split(";")[0].split("[")[0].split(">")[0].split("<")[0].split("=")[0].strip().lower()
                    for r in (__import__("importlib.metadata").metadata.requires(d) or [])
                }
                for d in listed
            ), (extra, module, dists, listed)
    assert set(extras) >= set(EXTRAS)
    assert names("all") >= set().union(*(names(e) for e in extras if e not in ("all", "dev", "docs")))
