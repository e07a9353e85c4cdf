"""The import graph of ``src/agent_ref`` and ``src/envelope`` has no circle (issue 28 §2).

A circle of imports means no module of it can be read (or tested, or replaced) without
all the others; it is also what made the agent's stages reach back into ``Agent``. The
graph (``tests/import_graph.py``) counts every import except those under
``if TYPE_CHECKING:`` (annotations only, never run); between wings those count too
(``tests/repo/test_wings.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from import_graph import cycles, edges, modules, one_circle

#: Circles allowed for now, each with the one change that ends it (empty: issue 28 §2 ended
#: the last two). Each entry must still be a circle: the test below fails
#: once it is fixed, so the entry is then removed (as ``test_stands_alone.py`` does).
KNOWN: dict[tuple[str, ...], str] = {}


def test_known_circles_are_still_there() -> None:
    """An entry of ``KNOWN`` that is no longer a circle is removed (so it cannot hide a new one)."""
    found = {tuple(c) for c in cycles(edges(modules()))}
    gone = [" <-> ".join(k) for k in KNOWN if k not in found]
    assert not gone, f"fixed: remove from KNOWN: {gone}"


def test_no_import_circle() -> None:
    graph = edges(modules())
    found = [c for c in cycles(graph) if tuple(c) not in KNOWN]
    message = "\n".join(
        f"{len(c)} modules in a circle: {', '.join(c)}; e.g. {' -> '.join(one_circle(graph, c))}" for c in found
    )
    assert not found, "import circles (TYPE_CHECKING-only imports excluded):\n" + message


# ------------------------------------------------------------------- the checker itself


def _write(tmp: Path, files: dict[str, str]) -> dict[str, Path]:
    modules = {}
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        parts = list(Path(rel).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def test_checker_finds_a_circle_through_a_deferred_import(tmp_path: Path) -> None:
    modules = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from . import b\n",
            "pkg/b.py": "from .c import thing\n",
            "pkg/c.py": "def f():\n    from pkg.a import x\n",
        },
    )
    graph = edges(modules)
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert one_circle(graph, ["pkg.a", "pkg.b", "pkg.c"]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


@pytest.mark.parametrize(
    "guard", ["if TYPE_CHECKING:\n    from .a import x\n", "if typing.TYPE_CHECKING:\n    from .a import x\n"]
)
def test_checker_ignores_type_checking_imports(tmp_path: Path, guard: str) -> None:
    modules = _write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/a.py": "from .b import y\n", "pkg/b.py": "import typing\n" + guard},
    )
    assert cycles(edges(modules)) == []
