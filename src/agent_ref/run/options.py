"""The agent's configuration: one typed, validated ``AgentOptions`` (issue 28 §2).

Owns: every setting of an ``Agent`` that is not its model (the tools, the store, the
limits, the hooks, the subagents, the guards...), checked once when the options are
built (a ``ConfigError`` naming the option), what a child inherits (``for_child``,
spec ``spec/agent-ref.md`` §13.2-a), and the plain-data part of it (``to_dict``).
Does not own: what a run does with them (``agent.py`` and the stages) or the state a
run changes (``run/context.py``, ``store/state.py``).

``Agent(model, options=AgentOptions(...))`` and ``Agent(model, tools=..., ...)`` are the
same: the keyword form builds an ``AgentOptions`` (one validation path). The options
are frozen: an agent's configuration does not change while it runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..errors import ConfigError
from ..models.pricing import PRICES, Price, price_for
from ..policy.hooks import HookEntry, check_hooks, child_hooks
from ..policy.permissions import PermissionMode, PermissionRule, check_mode, default_mode
from ..tools.mcp import check_servers
from ..tools.memory_store import DEFAULT_TIMEOUT as DEFAULT_MEMORY_TIMEOUT
from ..tools.result_bound import DEFAULT_MAX_TOOL_RESULT_BYTES, MIN_TOOL_RESULT_BYTES
from .loop_guard import DEFAULT_LOOP_LIMIT
from .retry import RetryPolicy
from .structured import DEFAULT_STRUCTURED_RETRIES, OutputSchema, StructuredOutput
from .subagents import DEFAULT_MAX_SUBAGENT_DEPTH, DEFAULT_MAX_SUBAGENTS_PER_STEP, AgentSpec, check_specs

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path

    from envelope import Profile

    from ..models.core import Model
    from ..policy.permissions import CanUseTool
    from ..store.core import Store
    from ..store.files import DirectoryFiles
    from ..tools.core import Tool
    from ..tools.mcp import McpServerConfig
    from ..tools.memory_store import LongTermMemory
    from ..tracing import Tracing
    from .background import BackgroundQueue
    from .compaction import Compactor

__all__ = [
    "AGENT_OWNED_PARAMS",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_TOOL_TIMEOUT",
    "AgentOptions",
]

#: Request keys the agent sets on every call; ``request_options`` may not (spec §11.1-a).
AGENT_OWNED_PARAMS: Final = frozenset(
    {"model", "messages", "max_tokens", "system", "tools", "tool_choice", "thinking", "stream"}
)
#: Seconds a backend tool call may run unless the tool says otherwise (spec §2.5-a).
DEFAULT_TOOL_TIMEOUT: Final = 60.0
#: Seconds a ``running`` agent stays held by its process without a renewal (spec §10.2-a).
DEFAULT_LEASE_SECONDS: Final = 30.0

#: The options that are plain data (JSON-able), in ``to_dict``'s order.
_PLAIN: Final = (
    "agent_uuid",
    "permission_mode",
    "permission_rules",
    "system",
    "max_steps",
    "max_tokens",
    "thinking_budget",
    "max_budget_usd",
    "max_bytes",
    "profile",
    "max_tool_concurrency",
    "stream_history",
    "lease_seconds",
    "tool_timeout",
    "max_tool_result_bytes",
    "hook_timeout",
    "request_options",
    "server_tools",
    "max_subagents_per_step",
    "max_subagent_depth",
    "subagent_depth",
    "loop_limit",
    "max_structured_output_retries",
    "memory_timeout",
    "checkpoints",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentOptions:
    """An agent's configuration (everything but its model), validated when built.

    Attributes:
        tools: backend and frontend tools.
        server_tools: Anthropic-executed tools, as API tool dicts, passed through.
        store: where state is saved; the agent makes a private ``MemoryStore`` when ``None``.
        agent_uuid: the agent's id; a new UUID4 when ``None``.
        system: the system prompt.
        max_steps: model calls with tools allowed in one run; then one last call with
            ``tool_choice: none`` (spec §5.2).
        max_tokens: per call.
        thinking_budget: enables extended thinking with this budget.
        max_budget_usd: stop the run once its cost reaches this (spec §5.3).
        retry: the retry policy (spec §6.2).
        max_bytes: the bound on each envelope line (spec §6.1 of the envelope spec).
        profile: the producer profile (envelope spec §10): ``"seed"`` sends control envelopes
            whole, for clients written to the seed.
        max_tool_concurrency: backend tools of one step running at once.
        prices: the price table.
        stream_history: put the conversation history into ``meta_init``/``meta_final``.
        lease_seconds: how long a claim on the agent lasts without renewal; renewed every
            third of it while a run is in progress (spec §10.2-a).
        tool_timeout: seconds a backend tool call may run before it is answered "timed out"
            (a tool's own ``timeout`` wins; ``None``: unbounded) (spec §2.5-a).
        max_tool_result_bytes: the bound on one tool result's bytes (text plus image
            sources; default 256 KiB, ``DEFAULT_MAX_TOOL_RESULT_BYTES``): past it the head
            and tail are kept with a note between, which the model and the client read
            alike (spec §2.4-e); ``None``: unbounded.
        secrets: more values to keep out of every stream, store and log (a server's token);
            the model client's API key and auth token are held anyway (spec §6.3-b).
        request_options: more keyword arguments for every ``messages.create(stream=True)``
            call, passed through as the SDK takes them: ``betas`` (then the beta client is
            used), ``extra_headers``, ``extra_body``, ``extra_query``, ``timeout``,
            ``container``, ``metadata``, ``temperature``, ``stop_sequences``,
            ``service_tier``, ``mcp_servers``, ``context_management``... (spec §11.1-a). The
            keys the agent sets itself (``AGENT_OWNED_PARAMS``) are refused.
        hooks: hooks by event (``hooks.HOOK_EVENTS``), each list run in order: plain hooks
            and ``HookMatcher`` entries (a tool-name pattern, a timeout) (spec §12).
        mcp_servers: MCP servers by name (``mcp_tools.StdioServer``, ``HttpServer``,
            ``InProcessServer``; ``load_mcp_config`` reads a ``.mcp.json``): opened at the
            start of each response, their tools added as ``mcp__<server>__<tool>``, closed
            when it ends, however it ends; a server that does not start is an ``error``
            envelope, not a failed run ([R19.7-a]).
        hook_timeout: seconds each hook may take unless its matcher sets one; an overrun is
            a failed hook ([R12.8-b]); ``None``: unbounded.
        can_use_tool: asked before every tool call, after the PreToolUse hooks (spec §12.4).
        permission_mode: ``full``, ``auto`` or ``ask`` (spec §12.5); ``None``: ``full`` with
            no ``can_use_tool``, else what ``permissions.default_mode`` says. A root run
            starts with it; a subagent inherits its parent's, narrowed by its spec.
        permission_rules: ``PermissionRule`` objects (or their JSON objects), checked
            before the mode (spec §12.5); a rule's ``ask`` with no ``can_use_tool`` pauses
            the run for a person's approval (spec §12.6).
        subagents: children the model may spawn by name with the ``spawn_subagent`` tool;
            they stream into this agent's response (spec §13), in the foreground or as
            background tasks the ``task_status`` tool reports on (spec §14).
        max_subagents_per_step: children one step may have running at once (background tasks
            of earlier steps still running count); the spawning calls past it are answered
            ``is_error`` and start nothing (spec §13.9-a).
        max_subagent_depth: levels of subagents below the root: a child at this depth is not
            offered the spawning tool; the ones above it spawn from the same ``subagents``
            (spec [SA2-a]). Children inherit it.
        subagent_depth: how deep these options' agent is (0: a root; set by ``for_child``).
        compactor: compacts the API context before a model call once it reaches the
            compactor's threshold (``SummarizingCompactor``, ``ToolResultTrimmer``; spec §15).
        loop_limit: the same tool with the same input this many times in a row goes to
            ``can_use_tool`` with a reason, or stops the run (``loop_detected``); ``None``:
            off (spec §16).
        output_schema: the final answer must be JSON matching this (a msgspec type or a
            JSON Schema dict, checked by ``jsonschema``); spec §17.
        max_structured_output_retries: corrections the model gets before the run ends
            ``error_max_structured_output_retries``.
        background_queue: run background subagents as tasks of this queue, claimed by
            ``agent-ref worker`` processes (spec scaleout §6.8); ``None``: in this process.
        background: these are a background task's options (set by ``for_child``): a call
            that needs a person's approval is denied, not paused ([AP3-a]).
        tracing: the spans of the agent's runs (``tracing.Tracing``); ``None``: the global
            tracer provider, no content (spec §20.6-a). Children get the same.
        memory: a long-term memory store (``memory_store.LongTermMemory``): retrieved before
            each fresh run of a root agent into its system prompt, updated after the run
            (spec §21.5-a). Children do not get it.
        memory_timeout: seconds a retrieve or an update may take (spec §21.3-a).
        file_backend: where the files a run produced are kept (``store.files.DirectoryFiles``):
            downloaded from the Files API when the run ends, named in ``meta_files`` with
            their real filename and the server's URL (spec [SF1-a]); ``None``: not kept.
        checkpoints: save each completed step (and each tool call's start and end) before
            the next model call, so a run whose process died is continued from its last
            step instead of closed ``lost`` (spec [CK1.1-a]). A root agent's runs only.
        workspace: the directory the workspace tools work in (None: no workspace): ``Read``,
            ``Write``, ``Edit``, ``Glob``, ``Grep``, and ``Bash``, ``BashOutput``, ``KillShell``
            in a bubblewrap sandbox (spec [WS4-a], [WS5-a]). Children inherit it ([WS5-c]).
        unsandboxed_bash: with a workspace, run ``Bash`` on the host, without bubblewrap: a
            mode named so in the tool's description, in each result and once in each
            response's stream (spec [SB1-c], [WS5-b]). Children inherit it.

    Raises:
        ConfigError: naming the option: duplicate tool names, an unknown hook event, a tool
            named ``spawn_subagent`` or ``task_status`` beside subagents, a limit out of
            range, a ``request_options`` key the agent owns, an unusable ``output_schema``.
    """

    tools: Sequence[Tool] = ()
    server_tools: Sequence[Mapping[str, Any]] = ()
    store: Store | None = None
    agent_uuid: str | None = None
    system: str | None = None
    max_steps: int = 8
    max_tokens: int = 2048
    thinking_budget: int | None = None
    max_budget_usd: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_bytes: int = 2048
    profile: Profile = "default"
    max_tool_concurrency: int = 4
    prices: Mapping[str, Price] = field(default_factory=lambda: PRICES)
    stream_history: bool = False
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT
    max_tool_result_bytes: int | None = DEFAULT_MAX_TOOL_RESULT_BYTES
    secrets: Sequence[str] = ()
    request_options: Mapping[str, Any] = field(default_factory=dict)
    hooks: Mapping[str, Sequence[HookEntry]] = field(default_factory=dict)
    hook_timeout: float | None = None
    mcp_servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    can_use_tool: CanUseTool | None = None
    permission_mode: PermissionMode | None = None
    permission_rules: Sequence[PermissionRule] = ()
    subagents: Mapping[str, AgentSpec] = field(default_factory=dict)
    max_subagents_per_step: int = DEFAULT_MAX_SUBAGENTS_PER_STEP
    max_subagent_depth: int = DEFAULT_MAX_SUBAGENT_DEPTH
    subagent_depth: int = 0
    compactor: Compactor | None = None
    loop_limit: int | None = DEFAULT_LOOP_LIMIT
    output_schema: OutputSchema | None = None
    max_structured_output_retries: int = DEFAULT_STRUCTURED_RETRIES
    background_queue: BackgroundQueue | None = None
    background: bool = False
    tracing: Tracing | None = None
    memory: LongTermMemory | None = None
    memory_timeout: float = DEFAULT_MEMORY_TIMEOUT
    file_backend: DirectoryFiles | None = None
    checkpoints: bool = False
    workspace: Path | None = None
    unsandboxed_bash: bool = False
    #: The checked ``output_schema`` (built from it; not an argument).
    output: StructuredOutput | None = field(default=None, init=False, compare=False)

    def __post_init__(self) -> None:
        """Normalise the containers (copies the caller cannot change later), then check every option."""
        put = object.__setattr__  # frozen: the normalised values are set once, here
        put(self, "tools", tuple(self.tools))
        put(self, "server_tools", tuple(dict(t) for t in self.server_tools))
        put(self, "secrets", tuple(self.secrets))
        put(self, "request_options", dict(self.request_options or {}))
        put(self, "hooks", {k: list(v) for k, v in (self.hooks or {}).items()})
        put(self, "subagents", dict(self.subagents or {}))
        put(self, "permission_rules", _rules(self.permission_rules))
        if self.permission_mode is not None:
            put(self, "permission_mode", check_mode(self.permission_mode, "permission_mode"))
        put(self, "mcp_servers", dict(self.mcp_servers or {}))
        if self.workspace is not None:  # spec [WS4-a]: the workspace tools join the agent's own
            own = [t for t in self.tools if not _from_workspace(t)]  # ``replace`` builds them again
            put(self, "tools", (*own, *_workspace_tools(self.workspace, unsandboxed=self.unsandboxed_bash)))
        if self.retry is None:  # the keyword form's ``retry=None`` means the default policy
            put(self, "retry", RetryPolicy())
        self._check()
        if self.output_schema is not None:
            put(self, "output", StructuredOutput(self.output_schema))

    def _check(self) -> None:
        names = [t.name for t in self.tools] + [str(t.get("name")) for t in self.server_tools]
        check_hooks(self.hooks, self.hook_timeout)
        check_servers(self.mcp_servers)
        check_specs(self.subagents, names)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"duplicate tool names: {', '.join(dupes)}")
        if self.max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        if self.lease_seconds <= 0:
            raise ConfigError("lease_seconds must be positive")
        cap = self.max_subagents_per_step
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:  # spec §13.9-a
            raise ConfigError(f"max_subagents_per_step must be an integer of at least 1, got {cap!r}")
        for name, low in (("max_subagent_depth", 1), ("subagent_depth", 0)):  # [SA2-a]
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} must be an integer of at least {low}, got {value!r}")
        owned = sorted(set(self.request_options) & AGENT_OWNED_PARAMS)
        if owned:
            raise ConfigError(
                f"request_options cannot set {', '.join(owned)}: the agent sets them "
                "(use Agent's model, max_tokens, system, tools, server_tools, thinking_budget)"
            )
        if self.loop_limit is not None and self.loop_limit < 2:
            raise ConfigError("loop_limit must be at least 2 (or None to turn loop detection off)")
        if self.max_structured_output_retries < 0:
            raise ConfigError("max_structured_output_retries must be 0 or more")
        bound = self.max_tool_result_bytes
        wrong = isinstance(bound, bool) or not isinstance(bound, int) or bound < MIN_TOOL_RESULT_BYTES
        if bound is not None and wrong:
            raise ConfigError(
                f"max_tool_result_bytes must be an integer of at least {MIN_TOOL_RESULT_BYTES} "
                f"(or None for no bound), got {bound!r}"
            )
        if not self.memory_timeout > 0:
            raise ConfigError(f"memory_timeout must be positive seconds, got {self.memory_timeout!r}")

    @property
    def effective_permission_mode(self) -> PermissionMode:
        """The mode a root run starts with: ``permission_mode``, or the default (spec §12.5)."""
        return self.permission_mode or default_mode(self.can_use_tool is not None)

    def check_model(self, model: Model) -> None:
        """The checks that need the model: a budget needs its price; its own check of ``request_options``.

        Raises:
            ConfigError: ``max_budget_usd`` with an unpriced model, or options the model refuses.
        """
        if self.max_budget_usd is not None and price_for(model.name, self.prices) is None:
            raise ConfigError(f"max_budget_usd needs a price for model {model.name!r}; add it to prices")
        check = getattr(model, "check_request_options", None)
        if self.request_options and callable(check):
            check(self.request_options)

    def replace(self, **changes: Any) -> AgentOptions:
        """These options with ``changes``, checked again."""
        return dataclasses.replace(self, **changes)

    def for_child(
        self, spec: AgentSpec, store: Store, *, agent_uuid: str | None = None, background: bool = False
    ) -> AgentOptions:
        """A child's options: ``spec``'s settings, the rest inherited from these (spec §13.2-a).

        A child spawns from its parent's ``subagents`` one level deeper, unless it is at
        ``max_subagent_depth`` (then it has none: [SA2-a]); it has no budget, secrets of its
        own, history streaming or output schema. A background child gets no frontend tools:
        nobody waits for it, so it cannot pause (§14.5).
        """
        tools = [t for t in spec.tools if t.executor != "frontend"] if background else spec.tools
        depth = self.subagent_depth + 1
        return AgentOptions(
            subagents=self.subagents if depth < self.max_subagent_depth else {},
            max_subagents_per_step=self.max_subagents_per_step,
            max_subagent_depth=self.max_subagent_depth,
            subagent_depth=depth,
            tools=tools,
            server_tools=self.server_tools if spec.server_tools is None else spec.server_tools,
            store=spec.store or store,
            agent_uuid=agent_uuid,
            system=spec.system,
            max_steps=spec.max_steps or self.max_steps,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            retry=spec.retry or self.retry,
            max_bytes=self.max_bytes,
            profile=self.profile,
            max_tool_concurrency=self.max_tool_concurrency,
            prices=self.prices,
            tool_timeout=self.tool_timeout,
            max_tool_result_bytes=self.max_tool_result_bytes,
            request_options=self.request_options,
            hooks=child_hooks(self.hooks),  # [R12.7-f]: no SessionStart/SessionEnd in a child
            hook_timeout=self.hook_timeout,
            mcp_servers=self.mcp_servers,  # [R19.7-b]: a child gets its parent's MCP servers
            can_use_tool=self.can_use_tool,
            compactor=self.compactor,
            loop_limit=self.loop_limit,
            tracing=self.tracing,  # spec §20.6-a: one trace; memory stays the root's (§21.5-a)
            background=background,  # [AP3-a]: a background task cannot pause its parent's run
            # [WS5-c]: the parent's workspace (its file tools and a shell of the child's own) and sandbox mode
            workspace=self.workspace,
            unsandboxed_bash=self.unsandboxed_bash,
        )

    def to_dict(self) -> dict[str, Any]:
        """The plain-data options (numbers, strings, JSON dicts), for logs and a child's record.

        Objects (tools, the store, hooks, callbacks, the compactor, the retry policy, the
        price table, the schema) are left out: they are code, not data.
        """
        out: dict[str, Any] = {}
        for name in _PLAIN:
            value = getattr(self, name)
            if name == "server_tools":
                value = [dict(t) for t in value]
            elif name == "request_options":
                value = dict(value)
            elif name == "permission_rules":
                value = list(msgspec.to_builtins(value))
            out[name] = value
        return out


#: The modules whose tools ``workspace`` makes: the file tools and the sandboxed shell's.
_WORKSPACE_MODULES: Final = ("agent_ref.tools.workspace", "agent_ref.tools.sandbox.tools")


def _from_workspace(made: Tool) -> bool:
    """``made`` is one of the tools ``workspace`` makes (its function defined in those modules)."""
    return getattr(made.fn, "__module__", None) in _WORKSPACE_MODULES


def _workspace_tools(root: Path, *, unsandboxed: bool) -> list[Tool]:
    """The workspace tools over ``root`` ([WS4-a]), then ``Bash`` and its two in the sandbox ([WS5-a]).

    Raises:
        ConfigError: ``root`` is not an existing directory.
    """
    from ..tools.sandbox import bash_tools
    from ..tools.workspace import WorkspaceError, workspace_tools

    try:
        files = workspace_tools(root)
    except WorkspaceError as exc:
        raise ConfigError(f"workspace: {exc}") from None
    return [*files, *bash_tools(root, unsandboxed=unsandboxed)]


def _rules(rules: object) -> tuple[PermissionRule, ...]:
    """``permission_rules`` as ``PermissionRule`` objects; a JSON object is converted (spec §12.5).

    Raises:
        ConfigError: naming the rule's index and what is wrong with it.
    """
    if isinstance(rules, (str, bytes)) or not isinstance(rules, (list, tuple)):
        raise ConfigError(f"permission_rules must be a list of rules, not {type(rules).__name__}")
    out: list[PermissionRule] = []
    for index, rule in enumerate(rules):
        if isinstance(rule, PermissionRule):
            out.append(rule)
            continue
        try:
            out.append(msgspec.convert(rule, PermissionRule))
        except (msgspec.ValidationError, ValueError) as exc:
            raise ConfigError(f"permission_rules[{index}]: {exc}") from None
    return tuple(out)
