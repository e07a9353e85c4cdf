"""The import graph of ``src/agent_ref`` and ``src/envelope`` has no circle (issue 28 §2).

A circle of imports means no module of it can be read (or tested, or replaced) without
all the others; it is also what made the agent's stages reach back into ``Agent``. The
graph is read from the source with ``ast``: every ``import`` and ``from ... import``, at
module level or inside a function (a deferred import still depends), except those under
``if TYPE_CHECKING:`` (annotations only, never run). ``from . import x`` is an edge to
the submodule ``x`` when there is one, else to the package's ``__init__``. A package's
``__init__`` is not an implicit dependency of its submodules (Python imports it first,
but nothing in it is what they use).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
PACKAGES = ("agent_ref", "envelope")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((SRC / package).rglob("*.py")):
            found[_module_name(path)] = path
        # An extension module written in C is known by its stub (``_cescape.pyi``).
        for path in sorted((SRC / package).rglob("*.pyi")):
            found.setdefault(_module_name(path), path)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement outside an ``if TYPE_CHECKING:`` body (its ``else`` counts)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                walk(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for sub in ast.iter_child_nodes(node):
            walk(sub)

    walk(tree)
    return found


def edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of modules in ``modules``."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base_parts = here[: len(here) - node.level + 1] if node.level else []
                base = ".".join([*base_parts, *(node.module.split(".") if node.module else [])])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                # ``import a.b.c``: the deepest module of ours it names.
                parts = target.split(".")
                while parts and ".".join(parts) not in modules:
                    parts.pop()
                if parts and ".".join(parts) != name:
                    graph[name].add(".".join(parts))
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        # Iterative, so a deep graph cannot hit the recursion limit.
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _one_circle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete circle through the component's first module, for the failure message."""
    members = set(component)
    start = component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return component


#: Circles allowed for now, each with the one change that ends it (empty: issue 28 §2 ended
#: the last two). Each entry must still be a circle: the test below fails
#: once it is fixed, so the entry is then removed (as ``test_stands_alone.py`` does).
KNOWN: dict[tuple[str, ...], str] = {}


def test_known_circles_are_still_there() -> None:
    """An entry of ``KNOWN`` that is no longer a circle is removed (so it cannot hide a new one)."""
    found = {tuple(c) for c in cycles(edges(_modules()))}
    gone = [" <-> ".join(k) for k in KNOWN if k not in found]
    assert not gone, f"fixed: remove from KNOWN: {gone}"


def test_no_import_circle() -> None:
    graph = edges(_modules())
    found = [c for c in cycles(graph) if tuple(c) not in KNOWN]
    message = "\n".join(
        f"{len(c)} modules in a circle: {', '.join(c)}; e.g. {' -> '.join(_one_circle(graph, c))}" for c in found
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
    assert _one_circle(graph, ["pkg.a", "pkg.b", "pkg.c"]) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]


@pytest.mark.parametrize(
    "guard", ["if TYPE_CHECKING:\n    from .a import x\n", "if typing.TYPE_CHECKING:\n    from .a import x\n"]
)
def test_checker_ignores_type_checking_imports(tmp_path: Path, guard: str) -> None:
    modules = _write(
        tmp_path,
        {"pkg/__init__.py": "", "pkg/a.py": "from .b import y\n", "pkg/b.py": "import typing\n" + guard},
    )
    assert cycles(edges(modules)) == []
