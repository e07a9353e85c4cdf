"""README's public API list of agent_ref and ``agent_ref.__all__`` agree."""

from __future__ import annotations

import re
from pathlib import Path

import agent_ref

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_names() -> set[str]:
    text = README.read_text()
    section = text[text.index("## Public API of agent_ref") :]
    section = section[: section.index("\n## ", 5)]
    names: set[str] = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            names |= {re.split(r"[(\s]", n)[0] for n in re.findall(r"`([^`]+)`", row.split("|")[1])}
    return names


def test_readme_lists_exactly_the_agent_ref_api() -> None:
    assert _readme_names() == set(agent_ref.__all__)


def test_new_names_resolve_to_their_modules() -> None:
    from agent_ref import compaction, memory, structured

    assert agent_ref.SummarizingCompactor is compaction.SummarizingCompactor
    assert agent_ref.ToolResultTrimmer is compaction.ToolResultTrimmer
    assert agent_ref.Compactor is compaction.Compactor
    assert agent_ref.OutputSchema is structured.OutputSchema
    assert agent_ref.memory_tool is memory.memory_tool
    assert agent_ref.MemoryToolError is memory.MemoryToolError
    for name in agent_ref.__all__:
        assert getattr(agent_ref, name) is not None
