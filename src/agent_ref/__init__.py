"""agent_ref: a minimal reference agent that speaks the JSON envelope protocol.

Re-exports only. The loop is in ``agent.py``; decisions are in ``spec/agent-ref.md``.
Owns: the public names of the reference agent. Does not own: the codec (``envelope``).
"""

from __future__ import annotations

from .agent import DONE_LINE, Agent, AgentResult, Sink
from .compaction import Compactor, SummarizingCompactor, ToolResultTrimmer
from .demo_tools import default_tools
from .errors import AgentRefError, ConfigError, ConflictError, StateError, ToolDefinitionError, ToolResultsError
from .hooks import HOOK_EVENTS, Hook, HookDecision, HookInput
from .memory import MemoryToolError, memory_tool
from .models import AnthropicModel, Model, ReplayModel, SDKModel
from .permissions import CanUseTool, PermissionAllow, PermissionDeny, ToolPermissionContext
from .pricing import PRICES, Price, cost_usd
from .retry import RetryPolicy
from .scripted import Fault, ScriptedModel
from .state import AgentState, PendingCall, RunRecord
from .store import MemoryStore, SQLiteStore, Store
from .structured import OutputSchema
from .subagents import SUBAGENT_TOOL, AgentSpec
from .tools import Tool, ToolOutput, tool

__version__ = "0.1.0"

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
    "MemoryStore",
    "MemoryToolError",
    "Model",
    "OutputSchema",
    "PendingCall",
    "PermissionAllow",
    "PermissionDeny",
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
    "ToolDefinitionError",
    "ToolOutput",
    "ToolPermissionContext",
    "ToolResultTrimmer",
    "ToolResultsError",
    "cost_usd",
    "default_tools",
    "memory_tool",
    "tool",
]
