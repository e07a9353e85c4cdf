"""The rebuilt blocks a user keeps: ``Block`` and ``Transcript``, in a module never compiled.

Owns: the two frozen dataclasses ``Reconstructor.transcript()`` returns, their
``to_dict`` (spec §7.6), and ``_parse`` (a payload's JSON value, spec §7.5), which
``to_dict`` and the reconstructor share. ``_reconstruct`` re-exports them.
Does not own: rebuilding (``_reconstruct``).

Why apart from ``_reconstruct``: ``setup.py`` compiles ``_reconstruct`` with mypyc, and a
frozen dataclass compiled by mypyc cannot be pickled or copied (``FrozenInstanceError``
when the copy is filled in); kept here, these values behave the same on both builds
(``tests/speedups``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ._depth import too_deep
from ._limits import MAX_NESTING_DEPTH

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Block", "Transcript"]

_CALL_TYPES: Final = frozenset({"tool_call", "server_tool_call"})
_json_decode = msgspec.json.decode


def _parse(text: str) -> Any:
    """The JSON value of ``text``, or ``text`` itself when it is not JSON this library reads (spec §7.5).

    A payload nested deeper than ``MAX_NESTING_DEPTH`` is given raw too, before any
    parser recurses into it (spec/limits.md L2-b): the reconstructor shows what it cannot
    represent faithfully as the text it received, and never raises from a transcript.
    """
    if too_deep(text, MAX_NESTING_DEPTH) is not None:
        return text
    try:
        return _json_decode(text)
    except msgspec.DecodeError:
        return text


@dataclass(frozen=True, slots=True)
class Block:
    """One rebuilt block, as it stood when the transcript was taken.

    Attributes:
        type: the wire type (never ``citation`` or ``tool_result_image``: those attach).
        agent: the agent.
        complete: a final line has closed the block.
        content: the deltas joined.
        id: tool blocks only.
        name: tool blocks only.
        citations: text blocks only: ``{"cited_text", "citation_type", ...}`` per citation.
        images: tool_result only: ``{"src", "media_type"}`` per image.
    """

    type: str
    agent: str
    complete: bool
    content: str
    id: str | None = None
    name: str | None = None
    citations: tuple[dict[str, Any], ...] = ()
    images: tuple[dict[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The block as ``envelope reconstruct`` prints it (spec §7.6)."""
        out: dict[str, Any] = {"type": self.type, "complete": self.complete}
        kind = self.type
        if kind in ("text", "thinking"):
            out["content"] = self.content
            if kind == "text":
                out["citations"] = [dict(c) for c in self.citations]
        elif kind in _CALL_TYPES:
            out["id"] = self.id
            out["name"] = self.name
            out["input"] = _parse(self.content)
        elif kind == "tool_result":
            out["id"] = self.id
            out["name"] = self.name
            out["content"] = self.content
            out["images"] = [dict(i) for i in self.images]
        elif kind == "server_tool_result":
            out["id"] = self.id
            out["name"] = self.name
            out["content"] = self.content
        else:
            out["data"] = _parse(self.content)
        return out


def blocks_dicts(blocks: tuple[Block, ...]) -> list[dict[str, Any]]:
    """One agent's blocks as ``to_dict`` gives them, each edit marked ``"edit": true`` (spec §4.6-a, §7.6).

    An edit is a ``tool_call`` whose ``id`` an earlier ``tool_call`` of the agent has: the
    input the call ran with. The mark is absent on every other block.
    """
    seen: set[str | None] = set()
    out = []
    for block in blocks:
        item = block.to_dict()
        if block.type == "tool_call":
            if block.id in seen:
                item["edit"] = True
            seen.add(block.id)
        out.append(item)
    return out


@dataclass(frozen=True, slots=True)
class Transcript:
    """The rebuilt stream at one moment.

    Attributes:
        done: ``[DONE]`` was seen.
        agents: each agent's blocks, in the order they opened; agents in order of first line.
    """

    done: bool
    agents: Mapping[str, tuple[Block, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """``{"done": bool, "agents": {agent: {"blocks": [...]}}}`` (spec §7.6)."""
        return {
            "done": self.done,
            "agents": {agent: {"blocks": blocks_dicts(blocks)} for agent, blocks in self.agents.items()},
        }

    def call(self, agent: str, id: str) -> Block | None:
        """The agent's ``tool_call`` of ``id`` as it ran: its edit if it has one, else the call (spec §4.6-a).

        Args:
            agent: the agent.
            id: the tool use id.

        Returns:
            The last ``tool_call`` block of that id, or ``None`` when the agent has none.
        """
        found = None
        for block in self.agents.get(agent, ()):
            if block.type == "tool_call" and block.id == id:
                found = block
        return found

    def compactions(self, agent: str) -> list[tuple[int, Block]]:
        """The agent's ``meta_compaction`` blocks in order, each with its place (spec §4.15).

        The place is the number of the agent's blocks that opened before the compaction
        (its index in ``agents[agent]``, ``meta_init`` included): where in the agent's
        transcript the model's context was compacted.

        Args:
            agent: the agent; an agent not in the stream has none.

        Returns:
            ``(place, block)`` pairs in stream order.
        """
        return [(at, b) for at, b in enumerate(self.agents.get(agent, ())) if b.type == "meta_compaction"]
