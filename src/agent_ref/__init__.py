"""agent_ref: a minimal reference agent that speaks the JSON envelope protocol.

Re-exports only. The ``Agent`` is in ``agent.py``; everything else is in a wing by concern
(``run``, ``tools``, ``policy``, ``models``, ``store``, ``fleet``, ``server``, ``cli``: each
``__init__`` says what it owns; ``docs/architecture.md`` draws them). Decisions are in
``spec/agent-ref.md``. Owns: the public names of the reference agent. Does not own: the
codec (``envelope``).

The names load on first use (PEP 562 ``__getattr__``): ``import agent_ref`` alone, and
so ``agent-ref --version`` and ``--help``, never import the ``anthropic`` SDK, whose
import takes seconds (spec ``spec/cli-agent-ref.md`` RC1-b). ``from agent_ref import
Agent`` works as before; each name is its module's own object. Without the ``agent``
extra (``pip install 'envelope-stream[agent]'``), ``import agent_ref`` still works and
the first public name used raises ``ImportError`` with one line naming the extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from envelope._extras import MissingExtraError, missing, needs

from .defaults import VERSION

if TYPE_CHECKING:
    from .agent import DONE_LINE, Agent, AgentResult, Sink
    from .errors import AgentRefError, ConfigError, ConflictError, StateError, ToolDefinitionError, ToolResultsError
    from .models.core import AnthropicModel, Model, ReplayModel, SDKModel
    from .models.pricing import PRICES, Price, cost_usd
    from .models.scripted import Fault, ScriptedModel
    from .policy.hooks import HOOK_EVENTS, Hook, HookDecision, HookInput, HookMatcher
    from .policy.permissions import (
        CanUseTool,
        PendingApproval,
        PermissionAllow,
        PermissionDeny,
        PermissionMode,
        PermissionNarrowing,
        PermissionRule,
        ToolPermissionContext,
        approval_reason,
    )
    from .run.compaction import Compactor, SummarizingCompactor, ToolResultTrimmer
    from .run.retry import RetryPolicy
    from .run.structured import OutputSchema
    from .run.subagents import SUBAGENT_TOOL, AgentSpec
    from .store.core import MemoryStore, SQLiteStore, Store
    from .store.state import AgentState, PendingCall, RunRecord
    from .tools.context import ToolContext, ToolContextBase, ToolProgress
    from .tools.core import Tool, ToolOutput, tool
    from .tools.demo import default_tools
    from .tools.memory import MemoryToolError, memory_tool

__version__ = VERSION

#: Each public name and the submodule that defines it (the imports above, for type checkers).
_HOME: Final = {
    "Agent": "agent",
    "AgentResult": "agent",
    "DONE_LINE": "agent",
    "Sink": "agent",
    "Compactor": "run.compaction",
    "SummarizingCompactor": "run.compaction",
    "ToolResultTrimmer": "run.compaction",
    "default_tools": "tools.demo",
    "AgentRefError": "errors",
    "ConfigError": "errors",
    "ConflictError": "errors",
    "StateError": "errors",
    "ToolDefinitionError": "errors",
    "ToolResultsError": "errors",
    "HOOK_EVENTS": "policy.hooks",
    "Hook": "policy.hooks",
    "HookDecision": "policy.hooks",
    "HookInput": "policy.hooks",
    "HookMatcher": "policy.hooks",
    "MemoryToolError": "tools.memory",
    "memory_tool": "tools.memory",
    "AnthropicModel": "models.core",
    "Model": "models.core",
    "ReplayModel": "models.core",
    "SDKModel": "models.core",
    "CanUseTool": "policy.permissions",
    "PendingApproval": "policy.permissions",
    "PermissionMode": "policy.permissions",
    "PermissionNarrowing": "policy.permissions",
    "PermissionRule": "policy.permissions",
    "approval_reason": "policy.permissions",
    "PermissionAllow": "policy.permissions",
    "PermissionDeny": "policy.permissions",
    "ToolPermissionContext": "policy.permissions",
    "PRICES": "models.pricing",
    "Price": "models.pricing",
    "cost_usd": "models.pricing",
    "RetryPolicy": "run.retry",
    "Fault": "models.scripted",
    "ScriptedModel": "models.scripted",
    "AgentState": "store.state",
    "PendingCall": "store.state",
    "RunRecord": "store.state",
    "MemoryStore": "store.core",
    "SQLiteStore": "store.core",
    "Store": "store.core",
    "OutputSchema": "run.structured",
    "AgentSpec": "run.subagents",
    "SUBAGENT_TOOL": "run.subagents",
    "ToolContext": "tools.context",
    "ToolContextBase": "tools.context",
    "ToolProgress": "tools.context",
    "Tool": "tools.core",
    "ToolOutput": "tools.core",
    "tool": "tools.core",
}


def __getattr__(name: str) -> Any:
    """Load a public name from its submodule on first use, then keep it in this module."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f".{home}", __name__)
    except ModuleNotFoundError:
        # issue 28: the codec installs alone; the agent is the 'agent' extra. One line, naming it.
        if missing("agent"):
            raise MissingExtraError(needs("agent_ref", "agent")) from None
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names with the lazy public ones."""
    return sorted({*globals(), *_HOME})


__all__ = [
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
