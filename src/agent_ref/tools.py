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
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Union, overload

import msgspec

from . import scrub
from .errors import ToolDefinitionError

if typing.TYPE_CHECKING:
    from envelope import Emitter, ImageRef

__all__ = [
    "Executor",
    "Tool",
    "ToolCallRequest",
    "ToolOutcome",
    "ToolOutput",
    "run_tools",
    "tool",
]

#: Where a tool runs: here, or in the browser (schema only, the agent pauses for it).
Executor = Literal["backend", "frontend"]

#: Longest error message a failing tool puts into its result (spec §2.4-b).
MAX_ERROR_CHARS: Final = 500

_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SIMPLE: Final[dict[type, dict[str, Any]]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
}


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
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    executor: Executor = "backend"
    fn: Callable[..., Any] | None = None
    param_types: Mapping[str, Any] = field(default_factory=dict)
    timeout: float | None = None

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
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    executor: Executor = "backend",
    description: str | None = None,
    timeout: float | None = None,
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

    Returns:
        The ``Tool`` (or a decorator that makes it).

    Raises:
        ToolDefinitionError: a parameter without a type hint, an unsupported hint,
            ``*args``/``**kwargs``, or an invalid name.
    """

    def build(f: Callable[..., Any]) -> Tool:
        made = _build(f, name=name, executor=executor, description=description)
        return made if timeout is None else dataclasses.replace(made, timeout=timeout)

    return build(fn) if fn is not None else build


def _build(f: Callable[..., Any], *, name: str | None, executor: Executor, description: str | None) -> Tool:
    tool_name = name or f.__name__
    if not _NAME_RE.match(tool_name):
        raise ToolDefinitionError(f"tool name {tool_name!r} must match {_NAME_RE.pattern}")
    if executor not in ("backend", "frontend"):
        raise ToolDefinitionError(f"executor must be 'backend' or 'frontend', got {executor!r}")
    summary, arg_docs = _parse_docstring(inspect.getdoc(f) or "")
    try:
        hints = typing.get_type_hints(f)
    except Exception as exc:  # a hint that does not resolve is a definition error, not a crash
        raise ToolDefinitionError(f"tool {tool_name}: cannot resolve type hints ({exc})") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    param_types: dict[str, Any] = {}
    for param in inspect.signature(f).parameters.values():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {tool_name}: *args and **kwargs cannot be described as a schema")
        if param.name not in hints:
            raise ToolDefinitionError(f"tool {tool_name}: parameter {param.name!r} has no type hint")
        hint = hints[param.name]
        where = f"tool {tool_name}: parameter {param.name!r}"
        try:
            msgspec.inspect.type_info(hint)  # what the call's conversion will need (spec §2.1-b)
        except (TypeError, ValueError) as exc:
            raise ToolDefinitionError(f"{where}: {hint!r} cannot be read from JSON: {exc}") from None
        has_default = param.default is not inspect.Parameter.empty
        schema = _schema(hint, where, omit_none=has_default)
        if param.name in arg_docs:
            schema = {**schema, "description": arg_docs[param.name]}
        if not has_default:
            required.append(param.name)
        elif param.default is not None and _json_able(param.default):
            schema = {**schema, "default": param.default}
        properties[param.name] = schema
        param_types[param.name] = hint
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    return Tool(
        name=tool_name,
        description=description if description is not None else (summary or tool_name),
        input_schema=input_schema,
        executor=executor,
        fn=f if executor == "backend" else None,
        param_types=param_types,
    )


def _json_able(value: object) -> bool:
    return isinstance(value, str | int | float | bool)


#: What ``@tool`` can describe, for the error that names a type it cannot.
SUPPORTED_HINTS: Final = (
    "str, int, float, bool, None, Any, Literal[...], unions and Optional, list[T], Sequence[T], set[T], "
    "tuple[T, ...], tuple[T1, T2, ...], dict[str, T], and dataclasses of these"
)


def _schema(hint: Any, where: str, *, omit_none: bool = False, seen: tuple[type, ...] = ()) -> dict[str, Any]:
    """JSON Schema of one type hint (spec §2.1-a, §2.1-b).

    Args:
        hint: the annotation.
        where: the place, for errors (``tool t: parameter 'p'``, then ``.field`` or ``[]`` deeper).
        omit_none: ``None`` in a union is left out (a property with a default: the model
            omits it rather than sending ``null``); elsewhere ``None`` is ``{"type": "null"}``.
        seen: the dataclasses being described, outermost first (a recursive one is refused).

    Raises:
        ToolDefinitionError: a hint with no JSON form here, naming the place and why.
    """
    if hint in _SIMPLE:
        return dict(_SIMPLE[hint])
    if hint is Any:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args) and not omit_none
        schemas = [_schema(a, where, seen=seen) for a in members] + ([{"type": "null"}] if nullable else [])
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _dataclass_schema(hint, where, seen)
    if hint is tuple or hint is typing.Tuple:  # noqa: UP006  # the bare typing alias is a hint too
        return {"type": "array"}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": _schema(args[0], f"{where}[]", seen=seen)}
        if not args:  # tuple[()]: the empty array
            return {"type": "array", "maxItems": 0}
        # A fixed shape: position i has type args[i], and nothing more (JSON Schema 2020-12).
        items = [_schema(a, f"{where}[{i}]", seen=seen) for i, a in enumerate(args)]
        return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items), "maxItems": len(items)}
    if origin in (list, Sequence, set, frozenset) or hint in (list, set, frozenset):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _schema(args[0], f"{where}[]", seen=seen)
        if origin in (set, frozenset) or hint in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin in (dict, Mapping) or hint is dict:
        if args and args[0] is not str:
            raise ToolDefinitionError(f"{where}: {hint!r}: a JSON object's keys are strings; use dict[str, ...]")
        if args and args[1] is not Any:
            return {"type": "object", "additionalProperties": _schema(args[1], f"{where}{{}}", seen=seen)}
        return {"type": "object"}
    raise ToolDefinitionError(f"{where}: {hint!r} has no JSON Schema form here (supported: {SUPPORTED_HINTS})")


def _dataclass_schema(cls: type, where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    """An object of the dataclass's fields; those without a default are required (spec §2.1-b).

    The class docstring's summary describes the object and its ``Attributes:`` lines the
    fields. Other keys are refused (``additionalProperties: false``): they would be dropped.
    """
    if cls in seen:
        chain = " -> ".join(c.__name__ for c in (*seen, cls))
        raise ToolDefinitionError(f"{where}: dataclass {cls.__name__} contains itself ({chain}); not supported")
    try:
        hints = typing.get_type_hints(cls)
    except Exception as exc:  # a hint that does not resolve is a definition error, not a crash
        raise ToolDefinitionError(f"{where}: cannot resolve the type hints of {cls.__name__} ({exc})") from None
    doc = inspect.getdoc(cls) or ""
    summary, docs = ("", {}) if doc.startswith(f"{cls.__name__}(") else _parse_docstring(doc)  # not the generated one
    properties: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue  # not an argument of the class: the model cannot give it
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        schema = _schema(hints[f.name], f"{where}.{f.name}", omit_none=has_default, seen=(*seen, cls))
        if f.name in docs:
            schema = {**schema, "description": docs[f.name]}
        if not has_default:
            required.append(f.name)
        elif f.default is not None and f.default is not dataclasses.MISSING and _json_able(f.default):
            schema = {**schema, "default": f.default}
        properties[f.name] = schema
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    if summary:
        out["description"] = summary
    return out


def _unexpected_field(value: object, hint: Any, path: str) -> str | None:
    """Where ``value`` has a key a dataclass in ``hint`` does not have (msgspec would drop it), or ``None``.

    Follows the hint, not the value, so the walk is as deep as the type (recursive
    dataclasses are refused when the tool is made).
    """
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, dict):
            return None  # the conversion reports the wrong type
        hints = typing.get_type_hints(hint)
        fields = {f.name: hints[f.name] for f in dataclasses.fields(hint) if f.init}
        for key in value:
            if key not in fields:
                return f"unexpected field {key!r} at `{path}` (the fields of {hint.__name__}: {', '.join(fields)})"
        for key, item in value.items():
            found = _unexpected_field(item, fields[key], f"{path}.{key}")
            if found:
                return found
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        for member in args:  # msgspec allows one dict-like member at most, so the first match is the one
            if isinstance(value, dict) and (
                dataclasses.is_dataclass(member) or typing.get_origin(member) in (dict, Mapping)
            ):
                return _unexpected_field(value, member, path)
            if isinstance(value, list) and typing.get_origin(member) in (list, tuple, Sequence, set, frozenset):
                return _unexpected_field(value, member, path)
        return None
    if isinstance(value, list) and args:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            pairs = list(zip(value, args, strict=False))
        elif origin in (list, tuple, Sequence, set, frozenset):
            pairs = [(item, args[0]) for item in value]
        else:
            return None
        for i, (item, item_hint) in enumerate(pairs):
            found = _unexpected_field(item, item_hint, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(value, dict) and origin in (dict, Mapping) and len(args) == 2:
        for key, item in value.items():
            found = _unexpected_field(item, args[1], f"{path}.{key}")
            if found:
                return found
    return None


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the summary and the ``Args:`` descriptions."""
    lines = doc.splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for raw in lines:
        stripped = raw.strip()
        if re.fullmatch(r"(Args|Arguments|Parameters|Attributes|Returns|Raises|Yields|Examples?|Notes?):", stripped):
            section = stripped[:-1]
            current = None
            continue
        if section is None:
            summary.append(stripped)
        elif section in ("Args", "Arguments", "Parameters", "Attributes"):
            match = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if match and raw.startswith((" ", "\t")) and (len(raw) - len(raw.lstrip())) <= 4:
                current = match.group(1)
                args[current] = match.group(2)
            elif current is not None and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
    return " ".join(p for p in " ".join(summary).split()), args


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


def outcome(emitter: Emitter, call: ToolCallRequest, value: object, *, is_error: bool = False) -> ToolOutcome:
    """Turn what a tool returned into its history block and envelope lines (spec §2.4-c).

    ``str`` is the text; ``ToolOutput`` is text plus images; ``bytes`` of an image are
    not guessed at (return a ``ToolOutput`` with a data URI); anything else is
    encoded as JSON, and if it cannot be, the call is an error.
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
    lines = emitter.tool_result(call.id, call.name, text, images)
    return ToolOutcome(
        block=result_block(call.id, text, images, is_error=is_error), lines=lines, text=text, is_error=is_error
    )


def error_outcome(emitter: Emitter, call: ToolCallRequest, message: str) -> ToolOutcome:
    """An ``is_error`` result with ``message`` (already public: no traceback, no secret)."""
    return outcome(emitter, call, message, is_error=True)


async def _call(tool_def: Tool, call: ToolCallRequest) -> object:
    assert tool_def.fn is not None
    kwargs: dict[str, Any] = {}
    for key, value in call.input.items():
        hint = tool_def.param_types.get(key)
        if hint is None:
            raise TypeError(f"unexpected argument {key!r}")
        if hint is Any:
            kwargs[key] = value
            continue
        extra = _unexpected_field(value, hint, "$")
        if extra is not None:  # spec §2.1-b: msgspec would drop it; nothing the model sends is dropped
            raise TypeError(f"parameter {key!r}: {extra}")
        try:
            # strict=False: msgspec's lax coercions (3 for a float, "3" for an int, "true" for a
            # bool). A dataclass or a tuple is built from its JSON object or array (spec §2.1-b).
            kwargs[key] = msgspec.convert(value, type=hint, strict=False)
        except msgspec.ValidationError as exc:
            raise msgspec.ValidationError(f"parameter {key!r}: {exc}") from None
    fn = tool_def.fn
    if inspect.iscoroutinefunction(fn):
        result = await fn(**kwargs)
    else:
        result = await _in_daemon_thread(fn, kwargs)
        if inspect.isawaitable(result):
            result = await result
    return result


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


async def run_tools(
    calls: Sequence[ToolCallRequest],
    tools: Mapping[str, Tool],
    emitter: Emitter,
    send: Callable[[list[bytes]], Awaitable[None]],
    *,
    max_concurrency: int = 4,
    on_result: Callable[[ToolCallRequest, ToolOutcome], None] | None = None,
    timeout: float | None = None,
) -> list[ToolOutcome]:
    """Run backend calls concurrently (at most ``max_concurrency`` at once) and send their results.

    Each call's lines are sent as one contiguous group, in the order of the calls, as
    soon as that call and every earlier one have finished (spec §2.3-a). A tool that
    raises gives an ``is_error`` result with a short message (spec §2.4-b); an unknown
    tool name or invalid input likewise. Cancellation propagates (abort).

    Args:
        calls: the backend calls of one step, in the order the model made them.
        tools: tools by name.
        emitter: the agent's emitter.
        send: sends a group of lines (and logs them).
        max_concurrency: the bound on calls running at once.
        on_result: told of each outcome just before its lines are sent (the agent keeps
            the answered calls, so an abort answers only the others, spec §5.5-b).
        timeout: seconds a call may run (a tool's own ``timeout`` wins); ``None``: no bound.

    Returns:
        One outcome per call, in call order.
    """
    gate = asyncio.Semaphore(max(1, max_concurrency))

    async def one(call: ToolCallRequest) -> ToolOutcome:
        tool_def = tools.get(call.name)
        if tool_def is None or tool_def.executor != "backend":
            return error_outcome(emitter, call, f"unknown tool {call.name!r}")
        limit = tool_def.timeout if tool_def.timeout is not None else timeout
        async with gate:
            try:
                if limit is None:
                    value = await _call(tool_def, call)
                else:
                    value = await asyncio.wait_for(_call(tool_def, call), limit)
            except TimeoutError:
                # spec §2.5-a: an overrun is a result; the run goes on (a thread is left to finish alone).
                return error_outcome(emitter, call, f"timed out after {limit:g} s")
            except (msgspec.ValidationError, TypeError) as exc:
                return error_outcome(emitter, call, f"invalid input for {call.name}: {scrub.public(str(exc))}")
            except Exception as exc:  # spec §2.4-b: a failing tool is a result, never a crash
                text = scrub.public(f"{type(exc).__name__}: {exc}")[:MAX_ERROR_CHARS]
                return error_outcome(emitter, call, text)
        return outcome(emitter, call, value)

    tasks = [asyncio.ensure_future(one(call)) for call in calls]
    outcomes: list[ToolOutcome] = []
    try:
        for call, task in zip(calls, tasks, strict=True):
            done = await task
            outcomes.append(done)
            if on_result is not None:
                on_result(call, done)
            await send(done.lines)
    finally:
        for task in tasks:
            task.cancel()
    return outcomes
