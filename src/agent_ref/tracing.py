"""Tracing with OpenTelemetry: spans for runs, steps, model calls, tool calls and subagents (spec §20).

Owns: the spans the agent makes and their names and attributes, following the GenAI
semantic conventions (``SEMCONV_VERSION``): ``invoke_agent`` for a run (a subagent's run
is a child ``invoke_agent`` under the spawning tool's span), ``chat`` for each model call
attempt, ``execute_tool`` for each tool call, and a step span of ours between them; the
cost as ``agent_ref.cost_usd``; the W3C ``traceparent`` a pause keeps in the run's state
and the resumed response's run span parented on and linked to it (spec §20.3); and
``configure_tracing`` for ``agent-ref serve --otlp URL`` (spec §20.5).
Does not own: when the agent opens which span (the stages call the helpers of a
``Tracing`` at their seams), the state that keeps the ``traceparent``
(``store/state.py``), or exporting (the OpenTelemetry SDK's).

``opentelemetry-api`` is optional (the ``otel`` extra). Without it every helper is a
no-op: each returns one shared object whose methods do nothing, and ``traceparent`` is
``None`` (spec §20.1-a). No prompt, tool input or tool result goes into an attribute unless
``Tracing(capture_content=True)`` (spec §20.4-a).
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

from envelope._extras import MissingExtraError, needs

from .defaults import VERSION
from .errors import ConfigError
from .policy import scrub

try:
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _otel_trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    HAVE_OTEL: bool = True
except ImportError:  # the ``otel`` extra is not installed: every helper is a no-op
    HAVE_OTEL = False

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.sdk.trace import TracerProvider as SDKTracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer, TracerProvider

__all__ = [
    "HAVE_OTEL",
    "NOOP",
    "OFF",
    "SEMCONV_VERSION",
    "ModelCallSpan",
    "RefusalReason",
    "RunSpan",
    "StepSpan",
    "ToolSpan",
    "Tracing",
    "configure_tracing",
    "default_tracing",
    "otlp_traces_url",
]

log = logging.getLogger("agent_ref")

#: The GenAI semantic conventions these names and attributes follow (spec §20.2-a).
SEMCONV_VERSION: Final = "1.41.0"
#: The instrumentation scope's name.
SCOPE: Final = "agent_ref"
#: ``gen_ai.provider.name`` of the agent's model calls (the conventions' well-known value).
PROVIDER: Final = "anthropic"
#: The step span's name (ours: the conventions have no step span).
STEP_SPAN: Final = "agent_ref.step"
#: Stop reasons of a run that set the run span's status to ERROR (spec §20.2-b).
ERROR_STOPS: Final = frozenset({"error", "lost"})
#: Longest content attribute recorded with ``capture_content`` (characters; cut beyond).
MAX_CONTENT_CHARS: Final = 16_000

ToolExecutor = Literal["backend", "frontend", "subagent", "server"]


def _total_input(usage: Mapping[str, int]) -> int:
    # The conventions' gen_ai.usage.input_tokens includes cached tokens; Anthropic's input_tokens does not.
    return sum(
        int(usage.get(k, 0) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


def _usage_attributes(usage: Mapping[str, int]) -> dict[str, int]:
    return {
        "gen_ai.usage.input_tokens": _total_input(usage),
        "gen_ai.usage.output_tokens": int(usage.get("output_tokens", 0) or 0),
        "gen_ai.usage.cache_read.input_tokens": int(usage.get("cache_read_input_tokens", 0) or 0),
        "gen_ai.usage.cache_creation.input_tokens": int(usage.get("cache_creation_input_tokens", 0) or 0),
    }


def _content(value: object) -> str:
    """A content attribute: JSON (strings as they are), secrets scrubbed, cut at ``MAX_CONTENT_CHARS``."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = scrub.public(text)
    if len(text) > MAX_CONTENT_CHARS:
        text = text[:MAX_CONTENT_CHARS] + f"[… cut at {MAX_CONTENT_CHARS} characters]"
    return text


def _part(block: Mapping[str, Any]) -> dict[str, Any]:
    """One Anthropic content block as a part of the conventions' message schema."""
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "content": block.get("text", "")}
    if kind == "tool_use":
        return {"type": "tool_call", "id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
    if kind == "tool_result":
        return {"type": "tool_call_response", "id": block.get("tool_use_id"), "result": block.get("content")}
    if kind == "thinking":
        return {"type": "reasoning", "content": block.get("thinking", "")}
    return {"type": str(kind)}  # a generic part: images, documents, server tool blocks by type only


def _messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        out.append({"role": message.get("role"), "parts": [_part(b) for b in blocks if isinstance(b, Mapping)]})
    return out


class _Span:
    """A span as a context manager: started on ``__enter__`` and made current, ended on ``__exit__``.

    An exception leaving the block sets the status to ERROR and ``error.type`` to its class
    name (``cancelled`` for a cancellation) unless ``error`` named the failure first; its
    message and traceback are recorded only with ``capture_content`` (spec §20.4-a).
    """

    __slots__ = (
        "_capture",
        "_errored",
        "_kind",
        "_links",
        "_name",
        "_parent",
        "_span",
        "_start_attrs",
        "_token",
        "_tracer",
    )

    def __init__(
        self,
        tracer: Tracer,
        name: str,
        kind: Any,
        attributes: dict[str, Any],
        capture: bool,
        *,
        parent: Any = None,
        links: Sequence[Any] = (),
    ) -> None:
        self._tracer = tracer
        self._name = name
        self._kind = kind
        self._start_attrs = attributes
        self._capture = capture
        self._parent = parent
        self._links = list(links)
        self._span: Span | None = None
        self._token: object = None
        self._errored = False

    def parent_on(self, traceparent: str) -> None:
        """Start (when entered) as a child of the span ``traceparent`` names; a malformed one changes nothing."""
        paused = _parse_traceparent(traceparent)
        if paused is not None:
            self._parent = _otel_trace.set_span_in_context(_otel_trace.NonRecordingSpan(paused))

    def __enter__(self) -> Any:
        span = self._tracer.start_span(
            self._name, context=self._parent, kind=self._kind, attributes=self._start_attrs, links=self._links
        )
        self._span = span
        # A span with no context (the API's no-op tracer, no SDK) has nothing to carry to its children.
        if span.is_recording() or span.get_span_context().is_valid:
            self._token = _otel_context.attach(_otel_trace.set_span_in_context(span))
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        span = self._span
        assert span is not None
        try:
            if exc is not None and span.is_recording() and not self._errored:
                cancelled = kind is not None and kind.__name__ == "CancelledError"
                error_type = "cancelled" if cancelled else type(exc).__qualname__
                span.set_attribute("error.type", error_type)
                span.set_status(_otel_trace.StatusCode.ERROR, error_type)
                if self._capture and not cancelled:
                    span.record_exception(exc)
        finally:
            if self._token is not None:
                _otel_context.detach(self._token)  # type: ignore[arg-type]  # the token attach returned
            span.end()

    @property
    def recording(self) -> bool:
        """Whether the span records (a configured SDK samples it); attributes are built only then."""
        return self._span is not None and self._span.is_recording()

    def set(self, key: str, value: Any) -> None:
        """Set one attribute (ignored when the span does not record)."""
        if self._span is not None and value is not None:
            self._span.set_attribute(key, value)

    def error(self, error_type: str) -> None:
        """Mark the operation failed: ``error.type`` and an ERROR status (spec §20.2-b).

        An exception that then leaves the block keeps this ``error.type`` (the stage's
        classification, not the class of the exception that carries it out).
        """
        self._errored = True
        if self._span is not None:
            self._span.set_attribute("error.type", error_type)
            self._span.set_status(_otel_trace.StatusCode.ERROR, error_type)

    def traceparent(self) -> str | None:
        """This span's context as a W3C ``traceparent`` string, or ``None`` when it has none (spec §20.3-a)."""
        if self._span is None:
            return None
        ctx = self._span.get_span_context()
        if not ctx.is_valid:
            return None
        return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


class RunSpan(_Span):
    """The ``invoke_agent`` span of one response of a run (spec §20.2-a)."""

    __slots__ = ("resumed_from",)

    def __init__(self, tracer: Tracer, name: str, kind: Any, attributes: dict[str, Any], capture: bool) -> None:
        """A run span; ``resumed_from`` (set by ``Tracing.run``) is the pause's ``traceparent``, if any."""
        super().__init__(tracer, name, kind, attributes, capture)
        self.resumed_from: str | None = None

    def __enter__(self) -> Any:
        # The parent and links are decided when the span starts: the span current then is the resume's caller.
        self._parent = None
        self._links = []
        paused = _parse_traceparent(self.resumed_from) if self.resumed_from is not None else None
        if paused is not None:
            self._parent = _otel_trace.set_span_in_context(_otel_trace.NonRecordingSpan(paused))
            self._links.append(_otel_trace.Link(paused, {"agent_ref.link": "paused_response"}))
            ambient = _otel_trace.get_current_span().get_span_context()
            if ambient.is_valid and ambient.trace_id != paused.trace_id:
                self._links.append(_otel_trace.Link(ambient, {"agent_ref.link": "resumed_by"}))
        return super().__enter__()

    def end_run(
        self,
        stop_reason: str,
        *,
        usage: Mapping[str, int] | None = None,
        cost_usd: float | None = None,
        steps: int | None = None,
        error_type: str | None = None,
    ) -> None:
        """Record how the run (or this response of it) ended: its stop reason, tokens, cost, steps.

        ``usage`` is the run's summed usage (``Usage.to_dict()``); a stop reason in
        ``ERROR_STOPS`` or an ``error_type`` sets the status to ERROR (spec §20.2-b).
        """
        if not self.recording:
            return
        self.set("agent_ref.stop_reason", stop_reason)
        self.set("gen_ai.response.finish_reasons", [stop_reason])
        if usage is not None:
            for key, value in _usage_attributes(usage).items():
                self.set(key, value)
        self.set("agent_ref.cost_usd", cost_usd)
        self.set("agent_ref.steps", steps)
        if error_type is not None or stop_reason in ERROR_STOPS:
            self.error(error_type or stop_reason)


class StepSpan(_Span):
    """A step of a run: its model call and the tools the call asked for (spec §20.2-a)."""


class ModelCallSpan(_Span):
    """The ``chat`` span of one model call attempt (spec §20.2-a)."""

    def record_request(self, params: Mapping[str, Any]) -> None:
        """The request's messages and system prompt: recorded only with ``capture_content`` (spec §20.4-a)."""
        if not (self._capture and self.recording):
            return
        messages = params.get("messages")
        if isinstance(messages, Sequence):
            self.set("gen_ai.input.messages", _content(_messages(messages)))
        system = params.get("system")
        if system:
            text = system if isinstance(system, str) else json.dumps(system, ensure_ascii=False, default=str)
            self.set("gen_ai.system_instructions", _content([{"type": "text", "content": text}]))

    def record_response(
        self,
        *,
        stop_reason: str | None,
        usage: Mapping[str, int],
        response_model: str | None = None,
        response_id: str | None = None,
        cost_usd: float | None = None,
        content: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """What the call returned: finish reason, tokens, cost; the content only with ``capture_content``."""
        if not self.recording:
            return
        if stop_reason is not None:
            self.set("gen_ai.response.finish_reasons", [stop_reason])
        self.set("gen_ai.response.model", response_model)
        self.set("gen_ai.response.id", response_id)
        for key, value in _usage_attributes(usage).items():
            self.set(key, value)
        self.set("agent_ref.cost_usd", cost_usd)
        if self._capture and content is not None:
            message = {"role": "assistant", "parts": [_part(b) for b in content], "finish_reason": stop_reason}
            self.set("gen_ai.output.messages", _content([message]))


class ToolSpan(_Span):
    """The ``execute_tool`` span of one tool call (spec §20.2-a)."""

    def record_result(self, *, is_error: bool, result: object = None, error_type: str | None = None) -> None:
        """The call's outcome: an error result sets ``error.type`` (``tool_error`` unless given).

        The result text is recorded only with ``capture_content``.
        """
        if not self.recording:
            return
        if is_error:
            self.error(error_type or "tool_error")
        if self._capture and result is not None:
            self.set("gen_ai.tool.call.result", _content(result))

    def record_paused(self) -> None:
        """A frontend call: the span ends at the pause; the browser runs the tool (spec §20.2-a)."""
        self.set("agent_ref.tool.awaiting_frontend", True)


class _Noop:
    """Every span helper's stand-in when tracing is off or the ``otel`` extra is absent: does nothing."""

    __slots__ = ()
    recording = False

    def __enter__(self) -> _Noop:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        return None

    def set(self, key: str, value: Any) -> None:
        """Nothing."""

    def error(self, error_type: str) -> None:
        """Nothing."""

    def traceparent(self) -> str | None:
        """No context: ``None``."""
        return None

    def end_run(self, stop_reason: str, **_: Any) -> None:
        """Nothing."""

    def record_request(self, params: Mapping[str, Any]) -> None:
        """Nothing."""

    def record_response(self, **_: Any) -> None:
        """Nothing."""

    def record_result(self, **_: Any) -> None:
        """Nothing."""

    def record_paused(self) -> None:
        """Nothing."""


#: The one no-op span every helper returns when tracing is off (spec §20.1-a).
NOOP: Final = _Noop()


def _parse_traceparent(traceparent: str) -> Any:
    """The span context a stored ``traceparent`` names, or ``None`` when it is malformed (logged, spec §20.3-b)."""
    carrier = {"traceparent": traceparent}
    ctx = TraceContextTextMapPropagator().extract(carrier)
    span_context = _otel_trace.get_current_span(ctx).get_span_context()
    if not span_context.is_valid:
        shown = traceparent[:80].encode("unicode_escape").decode("ascii")
        log.warning("tracing: ignoring a stored traceparent that is not W3C trace context: %r", shown)
        return None
    return span_context


class Tracing:
    """The agent's tracer: which spans a run makes, and whether content goes into them (spec §20).

    Example::

        tracing = Tracing()  # the global tracer provider (configure_tracing or the OpenTelemetry SDK's)
        with tracing.run(agent_id=uuid, run_id=run_id, model="claude-...") as run_span:
            with tracing.step(1), tracing.model_call(model="claude-...", attempt=1) as call:
                ...
            run_span.end_run("end_turn", usage=usage, cost_usd=0.01)

    Args:
        tracer_provider: where spans go; the global provider when omitted.
        capture_content: put prompts, system prompts, model output, tool inputs and tool
            results into attributes (``gen_ai.input.messages`` ...); off by default (spec §20.4-a).
        enabled: ``False`` makes every helper a no-op.
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        capture_content: bool = False,
        enabled: bool = True,
    ) -> None:
        """See the class docstring."""
        self.capture_content = capture_content
        self.enabled = enabled and HAVE_OTEL
        self._tracer: Tracer | None = None
        if self.enabled:
            self._tracer = _otel_trace.get_tracer(SCOPE, VERSION, tracer_provider=tracer_provider)

    def run(
        self,
        *,
        agent_id: str,
        run_id: str,
        model: str,
        agent_name: str | None = None,
        response: int = 0,
        parent_tool_use_id: str | None = None,
        resumed_from: str | None = None,
    ) -> RunSpan | _Noop:
        """The ``invoke_agent`` span of one response of a run; enter it around the response.

        A subagent's run entered while its parent's tool span is current is that span's
        child. ``resumed_from`` is the ``traceparent`` the pause stored: the span is its
        child (one trace across the pause) and links to it; the span current at the
        resume (a server request's, say) gets a link too (spec §20.3-a).
        """
        if self._tracer is None:
            return NOOP
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.agent.id": agent_id,
            "gen_ai.conversation.id": agent_id,
            "gen_ai.request.model": model,
            "agent_ref.run_id": run_id,
            "agent_ref.response": response,
        }
        if agent_name is not None:
            attributes["gen_ai.agent.name"] = agent_name
        if parent_tool_use_id is not None:
            attributes["agent_ref.parent_tool_use_id"] = parent_tool_use_id
        if resumed_from is not None:
            attributes["agent_ref.resumed"] = True
        name = f"invoke_agent {agent_name}" if agent_name else "invoke_agent"
        kind = _otel_trace.SpanKind.INTERNAL
        span = RunSpan(self._tracer, name, kind, attributes, self.capture_content)
        span.resumed_from = resumed_from
        return span

    def step(self, step: int) -> StepSpan | _Noop:
        """The span of step ``step`` (1-based, counted over the run as ``meta_init``'s ``resume.step`` counts)."""
        if self._tracer is None:
            return NOOP
        kind = _otel_trace.SpanKind.INTERNAL
        return StepSpan(self._tracer, STEP_SPAN, kind, {"agent_ref.step": step}, self.capture_content)

    def model_call(self, *, model: str, attempt: int = 1, max_tokens: int | None = None) -> ModelCallSpan | _Noop:
        """The ``chat`` span of one attempt of a model call (a retry is a sibling span, spec §20.2-a)."""
        if self._tracer is None:
            return NOOP
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER,
            "gen_ai.request.model": model,
            "agent_ref.attempt": attempt,
        }
        if max_tokens is not None:
            attributes["gen_ai.request.max_tokens"] = max_tokens
        kind = _otel_trace.SpanKind.CLIENT
        return ModelCallSpan(self._tracer, f"chat {model}", kind, attributes, self.capture_content)

    def tool_call(
        self,
        *,
        name: str,
        call_id: str,
        executor: ToolExecutor = "backend",
        arguments: object = None,
    ) -> ToolSpan | _Noop:
        """The ``execute_tool`` span of one call; ``arguments`` are recorded only with ``capture_content``."""
        if self._tracer is None:
            return NOOP
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "extension" if executor == "server" else "function",
            "agent_ref.tool.executor": executor,
        }
        if self.capture_content and arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = _content(arguments)
        kind = _otel_trace.SpanKind.INTERNAL
        return ToolSpan(self._tracer, f"execute_tool {name}", kind, attributes, self.capture_content)

    def refused_call(
        self,
        *,
        name: str,
        call_id: str,
        reason: RefusalReason,
        message: str | None = None,
        arguments: object = None,
        parent_traceparent: str | None = None,
    ) -> None:
        """An ``execute_tool`` span, started and ended at once, for a call refused before it ran (spec [IN3-a]).

        Status ERROR with ``error.type`` set to ``reason`` and ``agent_ref.tool.refused`` to
        ``reason`` too; ``message`` (the text the model was given) and ``arguments`` only
        with ``capture_content``. ``parent_traceparent``: the span is that span's child (an
        approval denied on a resume belongs to the response that asked for it); otherwise the
        span current now (the step's) is its parent.
        """
        if self._tracer is None:
            return
        span = self.tool_call(name=name, call_id=call_id, arguments=arguments)
        if parent_traceparent is not None and isinstance(span, _Span):
            span.parent_on(parent_traceparent)
        with span:
            span.set("agent_ref.tool.refused", reason)
            span.error(reason)
            if self.capture_content and message is not None:
                span.set("agent_ref.tool.refusal_message", message)


#: Why a call was refused before it ran (spec [IN3-a]): its span's ``error.type``.
RefusalReason = Literal["permission_denied", "hook_blocked", "loop_detected", "approval_denied", "interrupted"]

#: Tracing turned off: every helper returns ``NOOP`` (for code that takes a ``Tracing`` and has none).
OFF: Final = Tracing(enabled=False)

_GLOBAL: list[Tracing] = []


def default_tracing() -> Tracing:
    """The ``Tracing`` of an agent given none: the global tracer provider, no content (spec §20.6-a).

    One shared object; the global provider's tracer follows a provider installed later
    (``configure_tracing``), and is the API's no-op until one is.
    """
    if not _GLOBAL:
        _GLOBAL.append(Tracing())
    return _GLOBAL[0]


def otlp_traces_url(url: str) -> str:
    """The OTLP/HTTP traces endpoint for ``--otlp URL``: ``/v1/traces`` added to a URL with no path (spec §20.5-a).

    Raises:
        ConfigError: not an ``http``/``https`` URL with a host.
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--otlp: {url!r} is not an http:// or https:// URL of an OTLP collector")
    path = parts.path if parts.path not in ("", "/") else "/v1/traces"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def configure_tracing(
    otlp_url: str | None,
    *,
    service_name: str = "agent-ref",
    set_global: bool = True,
    exporter: SpanExporter | None = None,
) -> SDKTracerProvider | None:
    """Set up the OpenTelemetry SDK for ``agent-ref serve --otlp URL`` (spec §20.5).

    Args:
        otlp_url: the collector's OTLP/HTTP URL (``/v1/traces`` is added to a bare host);
            ``None``: nothing is set up and ``None`` returned (the agent then traces into
            whatever provider the application installed, or nowhere).
        service_name: the ``service.name`` resource attribute.
        set_global: install the provider as the global one (which ``Tracing()`` uses).
        exporter: export with this instead of the OTLP exporter (tests: an in-memory one).

    Returns:
        The SDK's provider (call ``shutdown()`` at exit to flush), or ``None``.

    Raises:
        MissingExtraError: the ``otel`` extra is not installed (one line naming it).
        ConfigError: the URL is not an http(s) URL.
    """
    if otlp_url is None:
        return None
    endpoint = otlp_traces_url(otlp_url)
    wanted = ["opentelemetry.sdk"] + ([] if exporter is not None else ["opentelemetry.exporter.otlp.proto.http"])
    if not HAVE_OTEL or any(_find(name) is None for name in wanted):
        raise MissingExtraError(needs("--otlp", "otel"))
    from opentelemetry.sdk.resources import Resource  # optional
    from opentelemetry.sdk.trace import TracerProvider as _SDKProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=endpoint)
    provider = _SDKProvider(resource=Resource.create({"service.name": service_name}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if set_global:
        _otel_trace.set_tracer_provider(provider)
    return provider


def _find(name: str) -> object:
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a parent package missing (or blocked) is "not installed"
        return None
