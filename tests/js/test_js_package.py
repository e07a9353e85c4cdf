"""The npm package in ``js/`` (spec/server.md §7.6): its types, what ``npm pack`` holds, a scratch install.

A typed usage example (``tests/js/typed/usage.mts``, with ``@ts-expect-error`` lines the
declarations must refuse) compiles under ``tsc --strict`` against ``js/`` through its
``exports`` map; every runtime export of each entry point is declared and nothing more;
``npm pack`` holds only the modules, their declarations, ``package.json``, a README and the
licence; the tarball installs offline into a scratch project whose compiled example
reads a golden stream from a real server (each response through the strict validator)
and rebuilds what Python rebuilds and what ``blocks.json`` records.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from typing import TYPE_CHECKING, Any

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from agent_ref.server.streams import MemoryJournal
from envelope import reconstruct, tree
from js.js_support import HERE, ROOT, tool
from server_support import data_lines, get, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

PACKAGE = ROOT / "js"
TYPED = HERE / "typed"
#: Entry points of the package (``exports``) and the module each one is.
ENTRIES = {
    "envelope-stream": "index.mjs",
    "envelope-stream/decoder": "envelope-decoder.mjs",
    "envelope-stream/client": "envelope-client.mjs",
}
#: Everything the tarball may hold: the modules, their declarations, package.json, its README, the licence.
PACKED = {
    "package.json",
    "README.md",
    "LICENSE",
    "index.mjs",
    "index.d.mts",
    "envelope-decoder.mjs",
    "envelope-decoder.d.mts",
    "envelope-client.mjs",
    "envelope-client.d.mts",
}
GOLDEN = ROOT / "fixtures" / "golden" / "two_agents_lifecycle"


def _run(command: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def _tsc(npm_modules: Path, project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _run([str(npm_modules / ".bin" / "tsc"), "-p", str(project), *extra], project)


def _linked_project(tmp_path: Path) -> Path:
    """A project whose ``node_modules/envelope-stream`` is ``js/`` itself (as ``npm link`` makes it)."""
    project = tmp_path / "linked"
    (project / "node_modules").mkdir(parents=True)
    (project / "node_modules" / "envelope-stream").symlink_to(PACKAGE, target_is_directory=True)
    for name in ("usage.mts", "tsconfig.json"):
        shutil.copy(TYPED / name, project / name)
    return project


def test_spec_server_7_6_a_typed_example_compiles_strict_against_the_package(npm_modules: Path, tmp_path: Path) -> None:
    """[S7.6-a]: ``tsc --noEmit`` (strict) passes on the example; one misuse made legal is an error (the check can fail)."""
    project = _linked_project(tmp_path)
    checked = _tsc(npm_modules, project, "--noEmit")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    example = project / "usage.mts"
    example.write_text(example.read_text().replace('retries: "5"', "retries: 5"))
    loose = _tsc(npm_modules, project, "--noEmit")
    assert loose.returncode != 0
    assert "TS2578" in loose.stdout  # the @ts-expect-error that no longer meets an error


def _runtime_exports(node: str) -> dict[str, list[str]]:
    script = "const out = {};" + "".join(
        f"out[{json.dumps(name)}] = Object.keys(await import({json.dumps(str(PACKAGE / module))})).sort();"
        for name, module in ENTRIES.items()
    )
    done = _run([node, "--input-type=module", "-e", script + "process.stdout.write(JSON.stringify(out));"], ROOT)
    assert done.returncode == 0, done.stderr
    found: dict[str, list[str]] = json.loads(done.stdout)
    return found


def _exports_check(runtime: dict[str, list[str]]) -> str:
    lines = ["type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;"]
    for i, (name, names) in enumerate(runtime.items()):
        union = " | ".join(json.dumps(n) for n in names)
        lines += [
            f"import * as m{i} from {json.dumps(name)};",
            f"export const declared{i}: Same<keyof typeof m{i}, {union}> = true;",
        ]
    return "\n".join(lines) + "\n"


def test_spec_server_7_6_b_every_runtime_export_is_declared_and_nothing_more(
    node: str, npm_modules: Path, tmp_path: Path
) -> None:
    """[S7.6-a]: for each entry point, the declared values are exactly the module's exports."""
    runtime = _runtime_exports(node)
    assert "connect" in runtime["envelope-stream"]
    assert "Reconstructor" in runtime["envelope-stream/decoder"]
    project = _linked_project(tmp_path)
    config = json.loads((project / "tsconfig.json").read_text())
    config["files"] = ["exports.mts"]
    (project / "tsconfig.json").write_text(json.dumps(config))
    (project / "exports.mts").write_text(_exports_check(runtime))
    checked = _tsc(npm_modules, project, "--noEmit")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the check can fail: a runtime export without a declaration
    runtime["envelope-stream/client"].append("notDeclared")
    (project / "exports.mts").write_text(_exports_check(runtime))
    assert _tsc(npm_modules, project, "--noEmit").returncode != 0


def _golden_server_stream() -> tuple[Any, str]:
    """The golden two-agent stream in a real server's journal: the app and the stream's path."""
    journal = MemoryJournal()
    for line in data_lines((GOLDEN / "input.sse").read_bytes()):
        journal.append("golden-run", 0, line)
    return create_app(
        store=MemoryStore(), model_factory=ScriptedModel, journal=journal
    ), "/agent/runs/golden-run/stream"


def test_spec_server_7_6_c_npm_pack_installs_offline_and_its_example_rebuilds_a_golden_stream(
    node: str, npm_modules: Path, tmp_path: Path
) -> None:
    """[S7.6-b]: the tarball holds only what it needs; installed offline, the compiled example reads the golden stream as Python does."""
    npm = tool("npm")
    packed = _run([npm, "pack", "--json", "--ignore-scripts", "--pack-destination", str(tmp_path)], PACKAGE)
    assert packed.returncode == 0, packed.stderr
    (info,) = json.loads(packed.stdout)
    tarball = tmp_path / info["filename"]
    with tarfile.open(tarball) as tar:
        members = {m.name.removeprefix("package/") for m in tar.getmembers()}
    assert members == PACKED
    assert not any(f["path"] != "package.json" and f["path"].endswith(".json") for f in info["files"])
    project = tmp_path / "scratch"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "scratch", "private": True, "type": "module"}))
    installed = _run(
        [npm, "install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", str(tarball)], project
    )
    assert installed.returncode == 0, installed.stderr
    where = project / "node_modules" / "envelope-stream"
    assert where.is_dir()
    assert not where.is_symlink()
    assert {p.name for p in where.iterdir()} == PACKED
    for name in ("usage.mts", "tsconfig.json"):
        shutil.copy(TYPED / name, project / name)
    built = _tsc(npm_modules, project)  # strict, and emits out/usage.mjs
    assert built.returncode == 0, built.stdout + built.stderr
    app, path = _golden_server_stream()
    with running(app) as base:
        served = get(base, path)
        assert served.status_code == 200
        assert_valid(
            served.content, expect=["W165"]
        )  # the fixture's own warning (its toolu_c1 call predates the stream)
        ran = _run([node, str(project / "out" / "usage.mjs"), base + path], project, timeout=60)
    assert ran.returncode == 0, ran.stderr
    out = json.loads(ran.stdout)
    python = reconstruct(data_lines(served.content))
    expected = json.loads((GOLDEN / "blocks.json").read_text())
    assert out["transcript"] == python.to_dict() == expected
    assert out["whole"] == expected
    assert out["tree"] == tree(python).to_dict()
    assert out["run"] == "golden-run"
    assert len(out["summary"]) == sum(len(a["blocks"]) for a in expected["agents"].values())
