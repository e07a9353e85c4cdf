"""Subagents: children an agent spawns by name, as a tool, onto its own response.

Owns: ``AgentSpec`` (what a child is), the spawning tool's name and definition
(``SUBAGENT_TOOL``, ``spawn_tool_definition``), and reading a spawning call's input
(``parse_spawn``) (spec ``spec/agent-ref.md`` §13). Does not own: running the child
(``Agent._run_subagent`` in ``agent.py``: a child is an ``Agent`` whose response is
nested in its parent's) or the ``meta_init`` keys that name the parent (envelope spec
§8.3.1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..models.core import Model
    from ..policy.permissions import PermissionNarrowing
    from ..store.core import Store
    from ..tools.core import Tool
    from .retry import RetryPolicy

__all__ = [
    "DEFAULT_MAX_SUBAGENTS_PER_STEP",
    "DEFAULT_MAX_SUBAGENT_DEPTH",
    "SUBAGENT_TOOL",
    "AgentSpec",
    "background_flag",
    "check_specs",
    "demo_subagents",
    "over_cap",
    "parse_spawn",
    "spawn_input",
    "spawn_tool_definition",
]

#: The tool the model calls to spawn a child ([R13.1-a]).
SUBAGENT_TOOL: Final = "spawn_subagent"
#: Children one step may have running at once, unless ``Agent(max_subagents_per_step=...)`` says
#: otherwise ([R13.9-a]): twice the default backend-tool concurrency, and as many topics as
#: the embedded model fans out to.
DEFAULT_MAX_SUBAGENTS_PER_STEP: Final = 8
#: Levels of subagents below a root agent, unless ``Agent(max_subagent_depth=...)`` says otherwise ([SA2-a]).
DEFAULT_MAX_SUBAGENT_DEPTH: Final = 3


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """A child agent the parent may spawn; unset fields are inherited from the parent ([R13.2-a]).

    Attributes:
        description: what the child is for (the model reads it in the tool description).
        system: the child's system prompt.
        tools: the child's tools; a frontend one pauses the whole run ([R13.5-a]).
        model: overrides the parent's model.
        server_tools: overrides the parent's server tools.
        retry: overrides the parent's retry policy.
        store: overrides the parent's store.
        max_steps: overrides the parent's ``max_steps``.
        permissions: how the child's permissions narrow its parent's (a stricter mode,
            more rules); ``None``: the parent's mode and rules as they are (spec §12.5-f).
    """

    description: str
    system: str | None = None
    tools: Sequence[Tool] = ()
    model: Model | None = None
    server_tools: Sequence[Mapping[str, Any]] | None = None
    retry: RetryPolicy | None = None
    store: Store | None = None
    max_steps: int | None = None
    permissions: PermissionNarrowing | None = None


def check_specs(specs: Mapping[str, AgentSpec], tool_names: Sequence[str]) -> None:
    """Refuse a name clash with the spawning tool and an empty child name.

    Raises:
        ConfigError: naming the child and the tool.
    """
    for reserved in (SUBAGENT_TOOL, "task_status"):
        if specs and reserved in tool_names:
            raise ConfigError(f"a tool is named {reserved!r}, the name of a subagent tool (spec R13.1-a, R14.3-a)")
    for name in specs:
        if not name:
            raise ConfigError("a subagent needs a non-empty name")


def spawn_tool_definition(specs: Mapping[str, AgentSpec]) -> dict[str, Any]:
    """The API tool definition of ``SUBAGENT_TOOL`` for these children, in the SDK's input shape ([SA1-a])."""
    listing = "; ".join(f"{name}: {spec.description}" for name, spec in specs.items())
    return {
        "name": SUBAGENT_TOOL,
        "description": (
            "Start a subagent on a task and get its final answer. Several calls in one turn run "
            f"concurrently. Subagents: {listing}"
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "subagent_type": {"type": "string", "enum": list(specs), "description": "the subagent's name"},
                "description": {"type": "string", "description": "a short (3-5 word) description of the task"},
                "prompt": {"type": "string", "description": "what the subagent should do"},
                "run_in_background": {
                    "type": "boolean",
                    "description": (
                        "run it in the background: the result is a task id at once; you are notified "
                        "when it ends, or call task_status"
                    ),
                },
            },
            "required": ["subagent_type", "description", "prompt"],
        },
    }


#: The SDK's ``Agent``/``Task`` input keys and the ones ``spawn_subagent`` took before ([SA1-b]).
_KEYS: Final = (("subagent_type", "agent"), ("prompt", "task"), ("run_in_background", "background"))


def _field(tool_input: Mapping[str, Any], sdk: str, old: str) -> tuple[Any, str | None]:
    """The value of one input field given in either shape, or why both were given and differ."""
    if sdk in tool_input and old in tool_input and tool_input[sdk] != tool_input[old]:
        return None, f"give {sdk!r} or {old!r}, not both with different values"
    return (tool_input[sdk] if sdk in tool_input else tool_input.get(old)), None


def spawn_input(tool_input: Mapping[str, Any]) -> tuple[Any, Any, Any] | str:
    """The name, task and background flag of a spawning call in either input shape ([SA1-b]); or a clash."""
    values: list[Any] = []
    for sdk, old in _KEYS:
        value, clash = _field(tool_input, sdk, old)
        if clash is not None:
            return clash
        values.append(value)
    return values[0], values[1], values[2]


def background_flag(tool_input: Mapping[str, Any]) -> bool | str:
    """Whether a spawning call runs in the background (``run_in_background``/``background``); or why not."""
    given = spawn_input(tool_input)
    if isinstance(given, str):
        return given
    flag = False if given[2] is None else given[2]
    if not isinstance(flag, bool):
        return "run_in_background must be true or false"
    return flag


def parse_spawn(tool_input: Mapping[str, Any], specs: Mapping[str, AgentSpec]) -> tuple[str, AgentSpec, str] | str:
    """The child's name, spec and task from a spawning call (either input shape, [SA1-b]); or why it cannot run."""
    given = spawn_input(tool_input)
    if isinstance(given, str):
        return given
    name, task, _ = given
    if not isinstance(name, str) or name not in specs:
        return f"unknown subagent {name!r}; known: {', '.join(specs) or 'none'}"
    if not isinstance(task, str) or not task.strip():
        return "the task must be a non-empty string"
    return name, specs[name], task


def over_cap(cap: int, background: int) -> str:
    """The ``is_error`` text of a spawning call past the per-step cap ([R13.9-a]).

    Args:
        cap: the agent's ``max_subagents_per_step``.
        background: background tasks of earlier steps still running (they hold slots).

    Returns:
        What the model reads: that the call did not run, why, and what to do instead.
    """
    held = f", {background} of them background tasks of earlier steps still running" if background else ""
    return (
        f"not run: at most {cap} subagents may run at once for one step (max_subagents_per_step){held}; "
        "this call was over the limit and started nothing. Call it again in a later step, once some "
        "have reported"
    )


def demo_subagents() -> dict[str, AgentSpec]:
    """The children ``agent-ref run``/``resume`` and the README register: a researcher with ``confirm``.

    The frontend ``confirm`` lets a child pause the whole run (spec §13.5-a): the embedded
    model's child calls it when its task says "confirm". ``run`` and ``resume`` must
    register the same children, so both take them from here.
    """
    from ..tools.demo import confirm  # the demo tools import nothing from here; kept local all the same

    return {"researcher": AgentSpec(description="researches one topic and reports findings", tools=[confirm])}
