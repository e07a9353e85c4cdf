"""The public API list of agent_ref (its reference page, ``docs/reference/agent_ref.md``;
the README's until issue 28 §4) and ``agent_ref.__all__`` agree."""

from __future__ import annotations

import re
from pathlib import Path

import agent_ref

API_PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "agent_ref.md"


def _listed_names() -> set[str]:
    text = API_PAGE.read_text(encoding="utf-8")
    section = text[text.index("## The names at a glance") :]
    section = section[: section.index("\n## ", 5)]
    names: set[str] = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            names |= {re.split(r"[(\s]", n)[0] for n in re.findall(r"`([^`]+)`", row.split("|")[1])}
    return names


def test_the_reference_page_lists_exactly_the_agent_ref_api() -> None:
    assert _listed_names() == set(agent_ref.__all__)


def test_new_names_resolve_to_their_modules() -> None:
    from agent_ref.run import compaction, structured
    from agent_ref.tools import memory

    assert agent_ref.SummarizingCompactor is compaction.SummarizingCompactor
    assert agent_ref.ToolResultTrimmer is compaction.ToolResultTrimmer
    assert agent_ref.Compactor is compaction.Compactor
    assert agent_ref.OutputSchema is structured.OutputSchema
    assert agent_ref.memory_tool is memory.memory_tool
    assert agent_ref.MemoryToolError is memory.MemoryToolError
    for name in agent_ref.__all__:
        assert getattr(agent_ref, name) is not None
