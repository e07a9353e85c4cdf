"""The agent tree: each subagent nested under the ``tool_call`` that spawned it (spec §8.3.1).

Owns: ``tree(transcript) -> AgentTree``, a thin layer over the public ``Transcript``
that reads each agent's ``meta_init`` keys ``parent_agent`` and ``parent_tool_use_id``
and hangs the agent under its parent's call. Does not own: reading lines (the
``Reconstructor`` does; build the transcript first) or judging the stream (the
validator). Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._blocks import blocks_dicts
from ._depth import too_deep
from ._errors import ValidationError
from ._limits import MAX_NESTING_DEPTH

if TYPE_CHECKING:
    from ._reconstruct import Block, Transcript

__all__ = ["MAX_AGENT_DEPTH", "AgentNode", "AgentTree", "tree"]

_SECTION = "§8.3.1"
#: Subagents nested deeper than this are refused (bounds the work and the recursion, §8.3.1-c).
MAX_AGENT_DEPTH = 64


@dataclass(frozen=True, slots=True)
class AgentNode:
    """One agent and the agents it spawned.

    Attributes:
        agent: the agent's id.
        blocks: its blocks, as in the transcript.
        parent_agent: from its ``meta_init``; ``None`` for a root.
        parent_tool_use_id: the spawning call's id, from its ``meta_init``.
        children: the agents it spawned, in order of first appearance.
        orphan: it names a parent (or a call) the stream does not hold; it is then a root.
    """

    agent: str
    blocks: tuple[Block, ...]
    parent_agent: str | None = None
    parent_tool_use_id: str | None = None
    children: tuple[AgentNode, ...] = ()
    orphan: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The agent's blocks, each spawned child under its ``tool_call`` block's ``"agents"`` list."""
        by_call: dict[str, list[dict[str, Any]]] = {}
        for child in self.children:
            by_call.setdefault(child.parent_tool_use_id or "", []).append(child.to_dict())
        blocks = []
        for block, out in zip(self.blocks, blocks_dicts(self.blocks), strict=True):
            # children hang under the call's first block, the model's; its edit follows (spec §4.6-a)
            if block.type == "tool_call" and block.id in by_call:
                out["agents"] = by_call.pop(block.id)
            blocks.append(out)
        node: dict[str, Any] = {"agent": self.agent}
        if self.parent_agent is not None:
            node["parent_agent"] = self.parent_agent
            node["parent_tool_use_id"] = self.parent_tool_use_id
        if self.orphan:
            node["orphan"] = True
        node["blocks"] = blocks
        return node


@dataclass(frozen=True, slots=True)
class AgentTree:
    """The agents of a transcript as a forest.

    Attributes:
        done: ``[DONE]`` was seen.
        roots: agents with no parent (or an orphan), in order of first appearance.
    """

    done: bool
    roots: tuple[AgentNode, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """``{"done": bool, "agents": [node, ...]}``: roots, children inside their spawning call."""
        return {"done": self.done, "agents": [node.to_dict() for node in self.roots]}

    def walk(self) -> list[AgentNode]:
        """Every node, parents before children."""
        out: list[AgentNode] = []
        stack = list(reversed(self.roots))
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(reversed(node.children))
        return out


def _parent_of(agent: str, blocks: tuple[Block, ...]) -> tuple[str, str] | None:
    for block in blocks:
        if block.type != "meta_init" or not block.complete:
            continue
        deep = too_deep(block.content, MAX_NESTING_DEPTH)
        if deep is not None:
            # spec §8.3.1-c, §6.7-a: measured before any parser recurses into it; the link
            # it may hold cannot be read, and making the agent a root would drop it unsaid.
            raise ValidationError(
                f"agent {agent!r}: meta_init payload nests arrays and objects deeper than "
                f"MAX_NESTING_DEPTH={MAX_NESTING_DEPTH} levels (at character offset {deep}), "
                "so its parent_agent cannot be read",
                field="$.delta",
                key=(agent, "meta_init"),
                section="6.7",
            )
        try:
            data = json.loads(block.content)
        except ValueError:
            return None  # not ours to judge: the validator reports a meta_init that is not JSON
        if not isinstance(data, dict) or "parent_agent" not in data:
            return None
        parent, call = data.get("parent_agent"), data.get("parent_tool_use_id")
        for key, value in (("parent_agent", parent), ("parent_tool_use_id", call)):
            if not isinstance(value, str) or not value:
                raise ValidationError(
                    f"agent {agent!r}: meta_init {key} must be a non-empty string, got {value!r}",
                    field=f"$.delta.{key}",
                    key=(agent, "meta_init"),
                    section=_SECTION,
                )
        assert isinstance(parent, str)
        assert isinstance(call, str)
        return parent, call
    return None


def _find_cycles(parents: dict[str, tuple[str, str]], orphans: set[str]) -> None:
    """Add to ``orphans`` every agent on a cycle of ``parents`` (spec §8.3.1: a cycle has no root).

    Raises:
        ValidationError: an agent nested deeper than ``MAX_AGENT_DEPTH``.
    """
    for agent in list(parents):  # a cycle has no root: break it at each of its agents
        seen = {agent}
        up = parents.get(agent)
        while up is not None:
            if up[0] in seen:
                orphans.update(seen)
                break
            seen.add(up[0])
            if len(seen) > MAX_AGENT_DEPTH:
                raise ValidationError(
                    f"agent {agent!r} is nested more than {MAX_AGENT_DEPTH} subagents deep",
                    field="$.delta.parent_agent",
                    key=(agent, "meta_init"),
                    section=_SECTION,
                )
            up = parents.get(up[0])


def tree(transcript: Transcript) -> AgentTree:
    """Nest each agent under the call that spawned it (spec §8.3.1).

    An agent whose parent is not in the transcript, whose parent holds no ``tool_call``
    with the named id, whose parent is itself, or that is part of a cycle stays a root,
    marked ``orphan``: nothing is dropped.

    Args:
        transcript: a ``Reconstructor``'s transcript.

    Returns:
        The forest.

    Raises:
        ValidationError: a ``parent_agent`` or ``parent_tool_use_id`` that is present but
            not a non-empty string, agents nested deeper than ``MAX_AGENT_DEPTH``, or a
            ``meta_init`` payload nested deeper than ``MAX_NESTING_DEPTH`` (spec §6.7:
            its link cannot be read); each names the agent and the field.
    """
    agents = transcript.agents
    parents: dict[str, tuple[str, str]] = {}
    orphans: set[str] = set()
    for agent, blocks in agents.items():
        link = _parent_of(agent, blocks)
        if link is None:
            continue
        parent, call = link
        calls = {b.id for b in agents.get(parent, ()) if b.type == "tool_call"}
        if parent == agent or parent not in agents or call not in calls:
            orphans.add(agent)
        else:
            parents[agent] = link
    _find_cycles(parents, orphans)
    for agent in orphans:
        parents.pop(agent, None)
    kids: dict[str, list[str]] = {}
    for agent in agents:
        if agent in parents:
            kids.setdefault(parents[agent][0], []).append(agent)

    def build(agent: str) -> AgentNode:
        link = parents.get(agent)
        declared = _parent_of(agent, agents[agent]) if agent in orphans else link
        return AgentNode(
            agent=agent,
            blocks=agents[agent],
            parent_agent=declared[0] if declared else None,
            parent_tool_use_id=declared[1] if declared else None,
            children=tuple(build(child) for child in kids.get(agent, ())),
            orphan=agent in orphans,
        )

    roots = tuple(build(agent) for agent in agents if agent not in parents)
    return AgentTree(done=transcript.done, roots=roots)
