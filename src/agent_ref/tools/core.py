"""Tools: the ``@tool`` decorator, the result of a tool, and the executor of one step's calls.

Owns: turning a typed, documented Python function into an Anthropic tool definition
(JSON schema from the type hints, description from the docstring), running backend
tools of one step concurrently under a bound, and turning what a tool returns (or
raises) into a ``tool_result`` content block plus its envelope lines (spec
``spec/agent-ref.md`` §2).
Does not own: deciding which calls to run (``agent.py``), or the wire form of the
lines (``envelope.Emitter``). Server tools (run by Anthropic) are plain API dicts that
``agent.py`` passes through; nothing here executes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import re
import threading
import typing
from dataclasses import dataclass, field
from typing import Any, Final, Literal, overload

import msgspec

from ..errors import ToolDefinitionError
from ..policy import scrub
from ..tracing import OFF, Tracing
from .context import ProgressStream, ToolContext, ToolContextBase, ToolProgress
from .required import missing_fields
from .result_bound import bound_result
from .schema import (
    SUPPORTED_HINTS,
    default_value,
    json_able,
    parse_docstring,
    pydantic_convert,
    pydantic_schema,
    schema_of,
    unexpected_field,
    uses_pydantic,
)

if typing.TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from envelope import Emitter, ImageRef

__all__ = [
    "SUPPORTED_HINTS",
    "Executor",
    "Tool",
    "ToolCallRequest",
    "ToolContext",
    "ToolContextBase",
    "ToolOutcome",
    "ToolOutput",
    "ToolProgress",
    "run_tools",
    "tool",
]

#: Where a tool runs: here, or in the browser (schema only, the agent pauses for it).
Executor = Literal["backend", "frontend"]

#: Longest error message a failing tool puts into its result (spec §2.4-b).
MAX_ERROR_CHARS: Final = 500

_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """What a tool may return when it has images: text plus images (spec §2.4-c).

    Attributes:
        text: the text part of the result.
        images: data URIs (``data:image/png;base64,...``) or URLs, with their MIME type.
    """

    text: str = ""
    images: Sequence[ImageRef] = ()


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the model may call.

    Attributes:
        name: the tool name the model uses.
        description: what the tool does (the docstring's first part).
        input_schema: JSON schema of the arguments.
        executor: ``"backend"`` (run by ``fn`` here) or ``"frontend"`` (run by the browser).
        fn: the function; ``None`` for a schema-only frontend tool.
        param_types: the annotated type of each parameter, used to check the model's input.
        timeout: seconds a call may run before it is answered "timed out" (spec §2.5-a);
            ``None``: the agent's ``tool_timeout``.
        context_param: the parameter annotated ``ToolContext``, given the call's context
            and absent from the schema (spec §2.6-a); ``None`` when there is none.
        writes: the parameters naming the paths the tool writes; what it changed there is
            recorded per step for undo (spec RU1-f).
        idempotent: a second call with the same input does no more than the first: a call
            a dead process had started may be run again when its run is continued from a
            checkpoint (spec [CK1.3-a]); ``False`` (the default): never run twice.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    executor: Executor = "backend"
    fn: Callable[..., Any] | None = None
    param_types: Mapping[str, Any] = field(default_factory=dict)
    timeout: float | None = None
    context_param: str | None = None
    writes: tuple[str, ...] = ()
    idempotent: bool = False

    def definition(self) -> dict[str, Any]:
        """The tool as the Messages API takes it in ``tools``."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    executor: Executor = "backend",
    description: str | None = None,
    timeout: float | None = None,
    writes: tuple[str, ...] = (),
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    executor: Executor = "backend",
    description: str | None = None,
    timeout: float | None = None,
    writes: tuple[str, ...] = (),
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a function with type hints and a Google-style docstring.

    Use bare (``@tool``) or with options (``@tool(executor="frontend")``). The
    parameters become the schema's properties; those without a default are required.
    The docstring's text before ``Args:`` is the description; each ``name: text`` line
    under ``Args:`` describes that property. A frontend tool's body never runs.

    Args:
        fn: the function (when used bare).
        name: the tool name; the function's name by default.
        executor: ``"backend"`` or ``"frontend"``.
        description: overrides the docstring's description.
        timeout: seconds a call may run (spec §2.5-a); the agent's ``tool_timeout`` when ``None``.
        writes: parameters whose value is a path the tool writes (a file or a directory);
            what the call changed below them is recorded for undo (spec RU1-f).
        idempotent: the tool may be run again after a process died during its call (spec [CK1.3-a]).

    Returns:
        The ``Tool`` (or a decorator that makes it).

    Raises:
        ToolDefinitionError: a parameter without a type hint, an unsupported hint,
            ``*args``/``**kwargs``, or an invalid name.
    """

    def build(f: Callable[..., Any]) -> Tool:
        made = _build(f, name=name, executor=executor, description=description)
        if writes:
            made = dataclasses.replace(made, writes=_writes(made, writes))
        if idempotent:
            made = dataclasses.replace(made, idempotent=True)
        return made if timeout is None else dataclasses.replace(made, timeout=timeout)

    return build(fn) if fn is not None else build


def _writes(made: Tool, writes: object) -> tuple[str, ...]:
    """``writes`` checked: a tuple of the tool's own parameters (spec RU1-f)."""
    if isinstance(writes, str) or not isinstance(writes, tuple | list):
        raise ToolDefinitionError(f"tool {made.name}: writes must be a tuple of parameter names, got {writes!r}")
    for param in writes:
        if param not in made.param_types:
            known = ", ".join(made.param_types) or "none"
            raise ToolDefinitionError(f"tool {made.name}: writes names {param!r}, not a parameter (it has {known})")
    return tuple(writes)


def _build(f: Callable[..., Any], *, name: str | None, executor: Executor, description: str | None) -> Tool:
    tool_name = name or f.__name__
    if not _NAME_RE.match(tool_name):
        raise ToolDefinitionError(f"tool name {tool_name!r} must match {_NAME_RE.pattern}")
    if executor not in ("backend", "frontend"):
        raise ToolDefinitionError(f"executor must be 'backend' or 'frontend', got {executor!r}")
    summary, arg_docs = parse_docstring(inspect.getdoc(f) or "")
    try:
        hints = typing.get_type_hints(f, include_extras=True)
    except Exception as exc:  # a hint that does not resolve is a definition error, not a crash
        raise ToolDefinitionError(f"tool {tool_name}: cannot resolve type hints ({exc})") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    param_types: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(f).parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {tool_name}: *args and **kwargs cannot be described as a schema")
        if param.name not in hints:
            raise ToolDefinitionError(f"tool {tool_name}: parameter {param.name!r} has no type hint")
        where = f"tool {tool_name}: parameter {param.name!r}"
        if _is_context(hints[param.name]):
            if context_param is not None:  # spec §2.6-a: one context per call
                raise ToolDefinitionError(f"{where}: a second ToolContext parameter (the first is {context_param!r})")
            context_param = param.name
            continue
        has_default = param.default is not inspect.Parameter.empty
        schema = _param_schema(hints[param.name], where, has_default, defs)
        if param.name in arg_docs:
            schema = {**schema, "description": arg_docs[param.name]}
        if not has_default:
            required.append(param.name)
        elif param.default is not None and json_able(param.default):
            schema = {**schema, "default": default_value(param.default)}
        properties[param.name] = schema
        param_types[param.name] = hints[param.name]
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    if defs:
        input_schema["$defs"] = defs
    return Tool(
        name=tool_name,
        description=description if description is not None else (summary or tool_name),
        input_schema=input_schema,
        executor=executor,
        fn=f if executor == "backend" else None,
        param_types=param_types,
        context_param=context_param,
    )


def _is_context(hint: Any) -> bool:
    """The parameter asks for the call's ``ToolContext`` (spec §2.6-a)."""
    return isinstance(hint, type) and issubclass(hint, ToolContext)


def _param_schema(hint: Any, where: str, has_default: bool, defs: dict[str, Any]) -> dict[str, Any]:
    """One parameter's schema: pydantic's for a pydantic model (§2.1-d), ours otherwise (§2.1-b)."""
    if uses_pydantic(hint):
        return pydantic_schema(hint, where, defs)
    try:
        msgspec.inspect.type_info(hint)  # what the call's conversion will need (spec §2.1-b)
    except (TypeError, ValueError) as exc:
        raise ToolDefinitionError(f"{where}: {hint!r} cannot be read from JSON: {exc}") from None
    return schema_of(hint, where, omit_none=has_default)


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One ``tool_use`` block the model asked for."""

    id: str
    name: str
    input: dict[str, Any]


@dataclass(slots=True)
class ToolOutcome:
    """A finished call: the ``tool_result`` block for history and the envelope lines sent for it.

    Attributes:
        block: ``{"type": "tool_result", "tool_use_id", "content", "is_error"?}``.
        lines: the envelope lines (``tool_result`` [+ images + closing marker]).
        text: the text part, as streamed.
        is_error: the tool failed.
    """

    block: dict[str, Any]
    lines: list[bytes]
    text: str
    is_error: bool


def result_block(
    tool_use_id: str, text: str, images: Sequence[ImageRef] = (), *, is_error: bool = False
) -> dict[str, Any]:
    """The ``tool_result`` content block the Messages API takes (spec §2.4-a).

    Args:
        tool_use_id: the call it answers.
        text: the text content.
        images: images as data URIs or URLs.
        is_error: mark the result as an error.

    Returns:
        The block.
    """
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text or not images else []
    for image in images:
        content.append({"type": "image", "source": _image_source(image)})
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block


def _image_source(image: ImageRef) -> dict[str, Any]:
    if image.src.startswith("data:"):
        header, _, data = image.src.partition(",")
        media_type = header[5:].split(";", 1)[0] or image.media_type
        return {"type": "base64", "media_type": media_type, "data": data}
    return {"type": "url", "url": image.src}


def outcome(
    emitter: Emitter,
    call: ToolCallRequest,
    value: object,
    *,
    is_error: bool = False,
    max_bytes: int | None = None,
) -> ToolOutcome:
    """Turn what a tool returned into its history block and envelope lines (spec §2.4-c).

    ``str`` is the text; ``ToolOutput`` is text plus images; ``bytes`` of an image are
    not guessed at (return a ``ToolOutput`` with a data URI); anything else is
    encoded as JSON, and if it cannot be, the call is an error. A result over
    ``max_bytes`` keeps its head and tail with a note between (spec §2.4-e), before
    anything is streamed or kept, so the client and the model read the same result.
    """
    images: Sequence[ImageRef] = ()
    if isinstance(value, ToolOutput):
        text, images = value.text, tuple(value.images)
    elif isinstance(value, str):
        text = value
    else:
        try:
            text = msgspec.json.encode(value).decode()
        except (TypeError, msgspec.EncodeError):
            text = f"tool {call.name} returned a {type(value).__name__}, which is not JSON-able"
            is_error = True
    text = scrub.held_text(text)  # spec [SC1-a]: no held secret in a result, its stream or history
    text, images = scrub.held_images(text, images)  # spec [HY2-a]: nor in an image's source
    # spec §2.4-e: cut after the scrub (a cut through a held value would show part of it),
    # before the lines, the history block or any record is made from it.
    text, images, _ = bound_result(text, images, max_bytes)
    lines = emitter.tool_result(call.id, call.name, text, images)
    return ToolOutcome(
        block=result_block(call.id, text, images, is_error=is_error), lines=lines, text=text, is_error=is_error
    )


def error_outcome(emitter: Emitter, call: ToolCallRequest, message: str) -> ToolOutcome:
    """An ``is_error`` result with ``message`` (already public: no traceback, no secret)."""
    return outcome(emitter, call, message, is_error=True)


async def _call(tool_def: Tool, call: ToolCallRequest, context: ToolContext | None = None) -> object:
    """Convert the model's input to the annotated types and call the tool (spec §2.1-b, §2.6-a).

    Args:
        tool_def: the tool.
        call: the call.
        context: given to the tool's ``ToolContext`` parameter; one whose progress goes
            nowhere when ``None``.
    """
    assert tool_def.fn is not None
    missing = missing_fields(tool_def.input_schema, call.input)  # [MA1-b]: the fields, not a KeyError
    if missing is not None:
        raise TypeError(missing)
    kwargs = {key: convert_argument(tool_def, key, value) for key, value in call.input.items()}
    if tool_def.context_param is not None:
        kwargs[tool_def.context_param] = context or ToolContext(
            agent_uuid="", run_id="", tool_use_id=call.id, tool_name=call.name
        )
    fn = tool_def.fn
    if tool_def.writes and context is not None:
        from .snapshots import recorded_call  # spec RU1-f

        return await recorded_call(tool_def, kwargs, context, _call_fn)
    return await _call_fn(fn, kwargs)


async def _call_fn(fn: Callable[..., Any], kwargs: dict[str, Any]) -> object:
    """Call ``fn`` (a coroutine function awaited, another in a daemon thread)."""
    if inspect.iscoroutinefunction(fn):
        result = await fn(**kwargs)
    else:
        result = await _in_daemon_thread(fn, kwargs)
        if inspect.isawaitable(result):
            result = await result
    return result


def convert_argument(tool_def: Tool, key: str, value: object) -> object:
    """One argument as the tool's annotation wants it, nothing the model sent dropped (spec §2.1-b).

    Raises:
        TypeError: an argument the tool does not have, or a key a conversion would drop.
        msgspec.ValidationError: a value that does not fit, naming the parameter and the path.
    """
    hint = tool_def.param_types.get(key)
    if hint is None:
        raise TypeError(f"unexpected argument {key!r}")
    if hint is Any:
        return value
    if uses_pydantic(hint):  # spec §2.1-d: pydantic validates its own models
        try:
            return pydantic_convert(value, hint)
        except TypeError as exc:
            raise TypeError(f"parameter {key!r}: {exc}") from None
        except msgspec.ValidationError as exc:
            raise msgspec.ValidationError(f"parameter {key!r}: {exc}") from None
    extra = unexpected_field(value, hint, "$")
    if extra is not None:  # spec §2.1-b: msgspec would drop it; nothing the model sends is dropped
        raise TypeError(f"parameter {key!r}: {extra}")
    try:
        # strict=False: msgspec's lax coercions (3 for a float, "3" for an int, "true" for a
        # bool). A dataclass or a tuple is built from its JSON object or array (spec §2.1-b).
        return msgspec.convert(value, type=hint, strict=False)
    except msgspec.ValidationError as exc:
        raise msgspec.ValidationError(f"parameter {key!r}: {exc}") from None


async def _in_daemon_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> object:
    """Run a blocking tool in a thread of its own that nothing waits for (spec §2.5-a).

    Not ``asyncio.to_thread``: a thread of the default executor that overruns would hold
    up ``asyncio.run``'s shutdown (it joins the executor), so a timeout or an abort would
    still wait for it. A daemon thread is left to finish (or not) alone; its result, if
    it ever comes, is dropped. Python cannot stop a thread: that is the cost.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[object] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: object, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = context.run(fn, **kwargs), None
        except BaseException as exc:
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=target, name=f"tool-{getattr(fn, '__name__', 'fn')}", daemon=True).start()
    return await future


# long: its docstring documents eleven parameters; the body is under thirty lines.
async def run_tools(
    calls: Sequence[ToolCallRequest],
    tools: Mapping[str, Tool],
    emitter: Emitter,
    send: Callable[[list[bytes]], Awaitable[None]],
    *,
    max_concurrency: int = 4,
    on_result: Callable[[ToolCallRequest, ToolOutcome], None] | None = None,
    timeout: float | None = None,
    context: ToolContextBase | None = None,
    tracing: Tracing = OFF,
    shown: Mapping[str, Any] | None = None,
    max_result_bytes: int | None = None,
) -> list[ToolOutcome]:
    """Run backend calls concurrently (at most ``max_concurrency`` at once) and send their results.

    Each call's lines go as one contiguous group, in call order, once it and every earlier call
    have ended (spec §2.3-a); a tool that raises, an unknown tool name or invalid input gives an
    ``is_error`` result with a short message (spec §2.4-b). Cancellation propagates (abort).

    Args:
        calls: the backend calls of one step, in the order the model made them.
        tools: tools by name.
        emitter: the agent's emitter.
        send: sends a group of lines (and logs them).
        max_concurrency: the bound on calls running at once.
        on_result: told of each outcome just before its lines are sent (spec §5.5-b).
        timeout: seconds a call may run (a tool's own ``timeout`` wins); ``None``: no bound.
        context: what a tool's ``ToolContext`` holds of the run (spec §2.6-a, §2.6-b); ``None``: empty.
        tracing: each call in an ``execute_tool`` span (spec §20.2-a); off by default.
        shown: by call id, the input its ``tool_call`` showed; a call run with another gets
            its edit right before its result (``_with_edit``). ``None``: no edits.
        max_result_bytes: the bound on each result (spec §2.4-e); ``None``: unbounded.

    Returns:
        One outcome per call, in call order.
    """
    gate = asyncio.Semaphore(max(1, max_concurrency))
    progress = ProgressStream(context, emitter, send)

    async def one(call: ToolCallRequest) -> ToolOutcome:
        try:
            with tracing.tool_call(name=call.name, call_id=call.id, arguments=call.input) as span:
                done = await _run_one(call, tools, emitter, gate, timeout, progress, max_result_bytes)
                span.record_result(is_error=done.is_error, result=done.text, error_type=_error_type(done))
                return done
        finally:
            progress.ended(call.id)

    tasks = [asyncio.ensure_future(one(call)) for call in calls]
    outcomes: list[ToolOutcome] = []
    try:
        for call, task in zip(calls, tasks, strict=True):
            done = await task
            outcomes.append(done)
            if on_result is not None:
                on_result(call, done)
            await progress.send(_with_edit(emitter, call, done.lines, shown))
    finally:
        for task in tasks:
            task.cancel()
        await progress.close()
    return outcomes


def _with_edit(
    emitter: Emitter, call: ToolCallRequest, lines: list[bytes], shown: Mapping[str, Any] | None
) -> list[bytes]:
    """A result's lines, after the call's edit when it ran with another input than shown (envelope-v1 §4.6-a).

    The input changes when a PreToolUse hook, a permission callback or a person's approval
    changed it; the edit is a second ``tool_call`` of the id with the input that ran.
    """
    if shown is None or call.id not in shown or shown[call.id] == call.input:
        return lines
    edit = msgspec.json.encode(dict(call.input)).decode()
    return [*emitter.buffered("tool_call", edit, id=call.id, name=call.name), *lines]


_ERROR_PREFIXES: Final = (
    ("timed out after ", "timeout"),
    ("invalid input for ", "invalid_input"),
    ("unknown tool ", "unknown_tool"),
)


def _error_type(done: ToolOutcome) -> str | None:
    """The span's ``error.type`` of a failed call (``timeout``, ``invalid_input``, ``unknown_tool``, ``tool_error``)."""
    if not done.is_error:
        return None
    for prefix, kind in _ERROR_PREFIXES:
        if done.text.startswith(prefix):
            return kind
    return "tool_error"


async def _run_one(
    call: ToolCallRequest,
    tools: Mapping[str, Tool],
    emitter: Emitter,
    gate: asyncio.Semaphore,
    timeout: float | None,
    progress: ProgressStream,
    max_result_bytes: int | None = None,
) -> ToolOutcome:
    """One call, under the concurrency gate and its time limit; every failure is a result (spec §2.4-b, §2.5-a)."""
    tool_def = tools.get(call.name)
    if tool_def is None or tool_def.executor != "backend":
        return error_outcome(emitter, call, f"unknown tool {call.name!r}")
    limit = tool_def.timeout if tool_def.timeout is not None else timeout
    context = progress.context(call.id, call.name) if tool_def.context_param is not None or tool_def.writes else None
    async with gate:
        try:
            if limit is None:
                value = await _call(tool_def, call, context)
            else:
                value = await asyncio.wait_for(_call(tool_def, call, context), limit)
        except TimeoutError:
            # spec §2.5-a: an overrun is a result; the run goes on (a thread is left to finish alone).
            return error_outcome(emitter, call, f"timed out after {limit:g} s")
        except (msgspec.ValidationError, TypeError) as exc:
            return error_outcome(emitter, call, f"invalid input for {call.name}: {scrub.public(str(exc))}")
        except Exception as exc:  # spec §2.4-b: a failing tool is a result, never a crash
            text = scrub.public(f"{type(exc).__name__}: {exc}")[:MAX_ERROR_CHARS]
            return error_outcome(emitter, call, text)
    return outcome(emitter, call, value, max_bytes=max_result_bytes)
