"""The import graph of ``src/agent_ref`` and ``src/envelope``, read from the source with ``ast``.

Owns: ``modules`` (each module's dotted name and file), ``edges`` (who imports whom) and
``cycles`` (the strongly connected components), used by ``tests/repo/test_import_graph.py``
(the runtime graph of modules) and ``tests/repo/test_wings.py`` (the graph of wings, type-only
imports counted). Every ``import`` and ``from ... import`` counts, at module level or inside a
function (a deferred import still depends); those under ``if TYPE_CHECKING:`` only with
``type_only``. ``from . import x`` is an edge to the submodule ``x`` when there is one, else to
the package's ``__init__``. A package's ``__init__`` is not an implicit dependency of its
submodules (Python imports it first, but nothing in it is what they use).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGES = ("agent_ref", "envelope")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((SRC / package).rglob("*.py")):
            found[module_name(path)] = path
        # An extension module written in C is known by its stub (``_cescape.pyi``).
        for path in sorted((SRC / package).rglob("*.pyi")):
            found.setdefault(module_name(path), path)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_only: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement outside an ``if TYPE_CHECKING:`` body (its ``else`` counts); with
    ``type_only``, those inside it too."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        if not type_only and isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                walk(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for sub in ast.iter_child_nodes(node):
            walk(sub)

    walk(tree)
    return found


def edges(modules: dict[str, Path], type_only: bool = False) -> dict[str, set[str]]:
    """Each module's imports of modules in ``modules`` (``type_only``: ``TYPE_CHECKING`` ones too)."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path)), type_only):
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


def one_circle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
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
