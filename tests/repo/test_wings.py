"""Imports run one way between the agent's wings, type-only ones included (issue 40).

A wing is a subpackage of ``src/agent_ref`` (``run``, ``tools``, ``policy`` ...); each module
left at the top (``agent``, ``errors``, ``tracing`` ...) is a node of its own, and so is the
package's face (``agent_ref``). The graph of modules (``tests/import_graph.py``, counting the
imports under ``if TYPE_CHECKING:`` too) collapsed to those nodes has no circle: a lower wing
that needs to name a higher thing names a ``Protocol`` or a data type of its own (STYLE §17).
Inside a wing the runtime rule of ``test_import_graph.py`` holds (no circle of modules).

``KNOWN_UP`` lists the arrows that still run up, each with the module imports that make it
and the change that ends it; an entry must match the tree exactly (a new import between
the same two wings fails too), and a fixed one is removed, so the list only shrinks. It is
empty now: the wings' graph has no circle at all.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from import_graph import SRC, cycles, edges, modules, one_circle

PACKAGE = SRC / "agent_ref"
#: The wings, each a subpackage of ``agent_ref``.
WINGS = ("cli", "fleet", "models", "policy", "run", "server", "store", "tools")
MAX_TOP = 10

#: ``(from, to)``: the module imports of an arrow that still runs up, and the change that ends it.
#: Empty: no arrow runs up (the last four ended in issue 40 with Protocols of the lower wings).
KNOWN_UP: dict[tuple[str, str], tuple[frozenset[str], str]] = {}


def wing_of(module: str) -> str:
    """The node a module of ``agent_ref`` collapses to: its wing, its own name at the top, or the face."""
    parts = module.split(".")
    if len(parts) == 1:
        return parts[0]
    return parts[1]


def wing_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], set[str]]]:
    """The wings' graph (type-only imports counted) and, per arrow, the module imports behind it."""
    graph = edges({k: v for k, v in modules().items() if k.split(".")[0] == "agent_ref"}, type_only=True)
    wings: dict[str, set[str]] = {}
    behind: dict[tuple[str, str], set[str]] = {}
    for module, targets in graph.items():
        here = wing_of(module)
        wings.setdefault(here, set())
        for target in targets:
            there = wing_of(target)
            if there != here:
                wings[here].add(there)
                wings.setdefault(there, set())
                behind.setdefault((here, there), set()).add(f"{module} -> {target}")
    return wings, behind


def test_the_wings_are_packages_and_the_top_is_small() -> None:
    assert sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py") if p.parent.name != "migrations") == list(WINGS)
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP, top


@pytest.mark.parametrize("wing", WINGS)
def test_each_wing_says_what_it_owns_and_what_it_must_not_import(wing: str) -> None:
    doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text(encoding="utf-8"))) or ""
    assert "Owns:" in doc
    assert "Must not import:" in doc


def test_known_up_arrows_are_exactly_there() -> None:
    """Each ``KNOWN_UP`` entry names the imports that make it, no fewer and no more; a fixed one is removed."""
    _, behind = wing_graph()
    wrong = {
        k: sorted(set(behind.get(k, set())) ^ imports)
        for k, (imports, _) in KNOWN_UP.items()
        if frozenset(behind.get(k, set())) != imports
    }
    assert wrong == {}, "update KNOWN_UP (fixed: remove the entry):\n" + "\n".join(
        f"{k}: {v}" for k, v in wrong.items()
    )


def test_no_circle_of_wings() -> None:
    wings, _ = wing_graph()
    for (here, there), _entry in KNOWN_UP.items():
        wings[here].discard(there)
    found = cycles(wings)
    message = "\n".join(f"{', '.join(c)}; e.g. {' -> '.join(one_circle(wings, c))}" for c in found)
    assert found == [], "wings in a circle (type-only imports counted):\n" + message


def test_no_circle_of_modules_inside_a_wing() -> None:
    """The runtime rule of ``test_import_graph.py``, for each wing on its own."""
    graph = edges({k: v for k, v in modules().items() if k.split(".")[0] == "agent_ref"})
    for wing in WINGS:
        inside = {m: {t for t in ts if wing_of(t) == wing} for m, ts in graph.items() if wing_of(m) == wing}
        assert cycles(inside) == [], wing


def test_the_checker_collapses_to_wings_and_counts_type_only_imports(tmp_path: Path) -> None:
    files = {
        "agent_ref/__init__.py": "",
        "agent_ref/run/__init__.py": "",
        "agent_ref/run/loop.py": "from ..tools.core import Tool\n",
        "agent_ref/tools/__init__.py": "",
        "agent_ref/tools/core.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..run.loop import x\n",
    }
    found = {}
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        parts = list(Path(rel).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    runtime = edges(found)
    typed = edges(found, type_only=True)
    assert runtime["agent_ref.tools.core"] == set()
    assert typed["agent_ref.tools.core"] == {"agent_ref.run.loop"}
    collapsed = {wing_of(m): {wing_of(t) for t in ts} - {wing_of(m)} for m, ts in typed.items()}
    assert cycles(collapsed) == [["run", "tools"]]


#: ``agent_ref.__all__`` as of commit b928759 (``git show b928759:src/agent_ref/__init__.py``),
#: before the wings: every name still imports from the face (issue 40, "nothing else changes").
ALL_OF_B928759 = [
    "DONE_LINE",
    "HOOK_EVENTS",
    "PRICES",
    "SUBAGENT_TOOL",
    "Agent",
    "AgentRefError",
    "AgentResult",
    "AgentSpec",
    "AgentState",
    "AnthropicModel",
    "CanUseTool",
    "Compactor",
    "ConfigError",
    "ConflictError",
    "Fault",
    "Hook",
    "HookDecision",
    "HookInput",
    "HookMatcher",
    "MemoryStore",
    "MemoryToolError",
    "Model",
    "OutputSchema",
    "PendingApproval",
    "PendingCall",
    "PermissionAllow",
    "PermissionDeny",
    "PermissionMode",
    "PermissionNarrowing",
    "PermissionRule",
    "Price",
    "ReplayModel",
    "RetryPolicy",
    "RunRecord",
    "SDKModel",
    "SQLiteStore",
    "ScriptedModel",
    "Sink",
    "StateError",
    "Store",
    "SummarizingCompactor",
    "Tool",
    "ToolContext",
    "ToolContextBase",
    "ToolDefinitionError",
    "ToolOutput",
    "ToolPermissionContext",
    "ToolProgress",
    "ToolResultTrimmer",
    "ToolResultsError",
    "approval_reason",
    "cost_usd",
    "default_tools",
    "memory_tool",
    "tool",
]


def test_the_public_names_of_b928759_still_import() -> None:
    assert len(ALL_OF_B928759) == 55
    face = importlib.import_module("agent_ref")
    assert set(ALL_OF_B928759) <= set(face.__all__)
    missing = [name for name in ALL_OF_B928759 if getattr(face, name, None) is None]
    assert missing == []
