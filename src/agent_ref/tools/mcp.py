"""Tools from MCP servers, through the official ``mcp`` SDK (spec ``spec/agent-ref.md`` §19).

Owns: the server configurations (``StdioServer``, ``HttpServer``, ``InProcessServer``),
reading the common ``.mcp.json`` shape (``load_mcp_config``), and ``McpToolset``: an
async context manager that connects every server, lists its tools and gives them as
``agent_ref.tools.core.Tool`` objects named ``mcp__<server>__<tool>``, maps each call's
result to what a tool returns, bounds every wait (connect, list, call) and closes every
server when it exits. Does not own: running the calls (``agent_ref.tools.core.run_tools``,
with the hooks, permissions, loop guard and redactor of any tool), or the protocol
itself (the SDK's ``mcp.Client``).

Named ``mcp_tools`` and not ``mcp``: a module ``agent_ref/mcp.py`` would read, inside the
package, as if it were the SDK. The SDK is imported only when a toolset opens, so this
module (and ``load_mcp_config``) loads without the ``mcp`` extra.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from envelope import ImageRef
from envelope._extras import MissingExtraError, missing, needs

from ..errors import AgentRefError, ConfigError
from .core import Tool, ToolOutput

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from types import TracebackType

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "HttpServer",
    "InProcessServer",
    "McpServerConfig",
    "McpToolError",
    "McpToolset",
    "StdioServer",
    "check_server_name",
    "check_servers",
    "load_mcp_config",
    "map_result",
    "parse_mcp_config",
    "tool_name",
]

log = logging.getLogger("agent_ref.mcp")

#: Seconds a server has to start, answer the handshake and list its tools (spec R19.4-a).
DEFAULT_CONNECT_TIMEOUT: Final = 30.0
#: Seconds one ``tools/call`` may take before the model is told it timed out (spec R19.4-b).
DEFAULT_CALL_TIMEOUT: Final = 120.0
#: Seconds the close of one server may take before its task is cancelled (spec R19.5-a).
CLOSE_TIMEOUT: Final = 10.0
#: Seconds the agent's bound on an MCP call exceeds the toolset's own (spec R19.4-b).
_TIMEOUT_MARGIN: Final = 1.0
#: Pages of ``tools/list`` read at most (a server whose cursor never ends cannot hang the start).
MAX_LIST_PAGES: Final = 100
#: A server name: what the Messages API allows in a tool name, so the prefix fits (spec R19.1-a).
_SERVER_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
#: The Messages API's rule for a tool name.
_API_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_NOT_ALLOWED: Final = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME: Final = 64
_HASH_CHARS: Final = 8
#: Lines of a stdio server's stderr kept for the reason it did not start (spec R19.4-d).
STDERR_TAIL_LINES: Final = 5
#: Characters of that tail at most: the reason stays one bounded message.
STDERR_TAIL_CHARS: Final = 600
#: Seconds a failed server's stderr may take to reach its end once its process is gone.
_STDERR_DRAIN: Final = 2.0
#: Commands that mean the interpreter running the agent (spec R19.6-c).
PYTHON_COMMANDS: Final = frozenset({"python", "python3"})
#: Longest text of a result the model reads from one content block that is not text (a resource's blob, audio).
_BINARY_NOTE: Final = "[{kind} {mime}, {size} bytes, not shown]"


class McpToolError(AgentRefError):
    """An MCP call the model is told failed: the server said ``isError``, died, or did not answer.

    ``agent_ref.tools`` turns it into an ``is_error`` result whose text is
    ``McpToolError: <message>``; the message is public (no traceback, no header, no env).
    """


@dataclass(frozen=True, slots=True)
class StdioServer:
    """A server started as a process and spoken to over its stdin and stdout.

    Attributes:
        command: the program (looked up on ``PATH``); ``python`` and ``python3`` mean the
            interpreter running the agent (``sys.executable``, spec R19.6-c).
        args: its arguments.
        env: variables set for it, over the few the SDK passes on (``PATH``, ``HOME``, ...);
            the rest of this process's environment is not passed (no secret leaks by default).
        cwd: its working directory; this process's when ``None``.
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] | None = None
    cwd: str | None = None


@dataclass(frozen=True, slots=True)
class HttpServer:
    """A server reached over streamable HTTP.

    Attributes:
        url: its MCP endpoint (``http://host:port/mcp``).
        headers: sent with every request (an ``Authorization`` header, say); never logged.
    """

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InProcessServer:
    """A server object built with the SDK in this process (``MCPServer`` or a low-level ``Server``).

    Attributes:
        server: the object; spoken to in memory, without a process or a socket.
    """

    server: Any


#: One server's configuration.
McpServerConfig = StdioServer | HttpServer | InProcessServer


# --------------------------------------------------------------------------- names


def tool_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``: ``mcp__<server>__<tool>`` (spec R19.1-a).

    When that does not fit the Messages API's rule (``^[a-zA-Z0-9_-]{1,64}$``), each
    character outside the rule becomes ``_``, the name is cut to 55 characters and
    ``_`` plus the first 8 hex digits of the SHA-256 of the MCP tool name are appended:
    deterministic, and two tools that differ only where the rule cut still differ.

    Args:
        server: the server's name (already checked by ``check_server_name``).
        tool: the tool's name as the server lists it.
    """
    name = f"mcp__{server}__{tool}"
    if _API_NAME.match(name):
        return name
    digest = hashlib.sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    cut = _NOT_ALLOWED.sub("_", name)[: _MAX_NAME - _HASH_CHARS - 1]
    return f"{cut}_{digest}"


def check_server_name(name: object, where: str) -> str:
    """``name`` if it may name a server (1 to 32 of ``A-Z a-z 0-9 _ -``), else a ``ConfigError`` naming ``where``."""
    if not isinstance(name, str) or not _SERVER_NAME.match(name):
        raise ConfigError(
            f"{where}: server name {name!r} must be 1 to 32 letters, digits, '_' or '-' "
            "(it becomes part of the tool names mcp__<server>__<tool>)"
        )
    return name


# --------------------------------------------------------------------------- .mcp.json


def load_mcp_config(path: str | Path) -> dict[str, McpServerConfig]:
    """Read a ``.mcp.json`` file: ``{"mcpServers": {NAME: SERVER, ...}}`` (spec R19.6-a).

    ``SERVER`` is ``{"command", "args"?, "env"?, "cwd"?}`` (``"type": "stdio"`` optional)
    or ``{"type": "http" | "streamable-http", "url", "headers"?}``. Other keys of a
    server are refused (a misspelt ``"arg"`` would otherwise be dropped in silence).

    Args:
        path: the file.

    Returns:
        The servers by name, in the file's order.

    Raises:
        ConfigError: the file cannot be read, is not JSON, or a key is missing or wrong;
            the message names the file and the key (``.mcp.json: mcpServers.fs.args: ...``).
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{where}: is a directory, not an MCP configuration") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{where}: cannot read it ({reason})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    return parse_mcp_config(data, where)


def parse_mcp_config(data: object, where: str = "<config>") -> dict[str, McpServerConfig]:
    """The servers of an already-parsed ``.mcp.json`` document (see ``load_mcp_config``)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: the top level must be an object with 'mcpServers'")
    servers = data.get("mcpServers")
    if servers is None:
        raise ConfigError(f"{where}: no 'mcpServers' key")
    if not isinstance(servers, dict):
        raise ConfigError(f"{where}: mcpServers must be an object of servers by name")
    out: dict[str, McpServerConfig] = {}
    for name, entry in servers.items():
        at = f"{where}: mcpServers.{name}"
        check_server_name(name, f"{where}: mcpServers")
        if not isinstance(entry, dict):
            raise ConfigError(f"{at}: must be an object")
        out[name] = _server(entry, at)
    return out


_STDIO_KEYS: Final = frozenset({"type", "command", "args", "env", "cwd"})
_HTTP_KEYS: Final = frozenset({"type", "url", "headers"})


def _server(entry: dict[str, Any], at: str) -> McpServerConfig:
    kind = entry.get("type", "stdio" if "command" in entry else None)
    if kind in ("http", "streamable-http", "streamable_http"):
        _no_other_keys(entry, _HTTP_KEYS, at)
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError(f"{at}.url: must be an http:// or https:// URL, got {url!r}")
        return HttpServer(url=url, headers=_strings(entry.get("headers", {}), f"{at}.headers"))
    if kind == "stdio":
        _no_other_keys(entry, _STDIO_KEYS, at)
        command = entry.get("command")
        if not isinstance(command, str) or not command:
            raise ConfigError(f"{at}.command: must be a non-empty string, got {command!r}")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"{at}.args: must be a list of strings")
        env = _strings(entry["env"], f"{at}.env") if "env" in entry else None
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise ConfigError(f"{at}.cwd: must be a string")
        return StdioServer(command=command, args=tuple(args), env=env, cwd=cwd)
    if kind is None:
        raise ConfigError(f"{at}: needs 'command' (a process over stdio) or 'type': 'http' with 'url'")
    raise ConfigError(f"{at}.type: {kind!r} is not supported (stdio, http or streamable-http)")


def _no_other_keys(entry: dict[str, Any], allowed: frozenset[str], at: str) -> None:
    extra = sorted(set(entry) - allowed)
    if extra:
        raise ConfigError(f"{at}.{extra[0]}: unknown key (allowed here: {', '.join(sorted(allowed))})")


def _strings(value: object, at: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ConfigError(f"{at}: must be an object of strings")
    return dict(value)


# --------------------------------------------------------------------------- results


def map_result(result: Any, server: str, tool: str) -> str | ToolOutput:
    """What a tool returns for an MCP ``CallToolResult`` (spec R19.3-a).

    Text blocks are the text, joined by blank lines; images become ``ToolOutput`` images
    (data URIs); an embedded text resource is its text, a binary one (or audio) a short
    note; a resource link its name and URI; structured content, when no block is text,
    its JSON. ``isError`` raises ``McpToolError`` with that text.
    """
    texts: list[str] = []
    images: list[ImageRef] = []
    for block in result.content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            images.append(ImageRef(src=f"data:{block.mime_type};base64,{block.data}", media_type=block.mime_type))
        elif kind == "audio":
            texts.append(_BINARY_NOTE.format(kind="audio", mime=block.mime_type, size=_b64_size(block.data)))
        elif kind == "resource":
            resource = block.resource
            mime = getattr(resource, "mime_type", None) or "application/octet-stream"
            text = getattr(resource, "text", None)
            if isinstance(text, str):
                texts.append(text)
            elif mime.startswith("image/"):
                images.append(ImageRef(src=f"data:{mime};base64,{resource.blob}", media_type=mime))
            else:
                size = _b64_size(getattr(resource, "blob", ""))
                texts.append(_BINARY_NOTE.format(kind=f"resource {resource.uri}", mime=mime, size=size))
        elif kind == "resource_link":
            texts.append(f"[resource {block.name}: {block.uri}]")
        else:
            texts.append(f"[a {kind} block, not shown]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not texts:
        texts.append(json.dumps(structured, ensure_ascii=False, separators=(",", ":")))
    text = "\n\n".join(texts)
    if getattr(result, "is_error", False):
        raise McpToolError(text or f"MCP tool {tool} of server {server} failed without a message")
    return ToolOutput(text=text, images=tuple(images)) if images else text


def _b64_size(data: object) -> int:
    return len(data) * 3 // 4 if isinstance(data, str) else 0


# --------------------------------------------------------------------------- the toolset


class _AnyArgument(Mapping[str, Any]):
    """``param_types`` for an MCP tool: every argument name is ``Any`` (the server checks its input)."""

    def __init__(self, names: list[str]) -> None:
        self._names = names

    def __getitem__(self, key: str) -> Any:
        return Any

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str)

    def __iter__(self) -> Any:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class _StderrTail:
    """A stdio server's stderr: passed on to ``forward`` as it comes, its last lines kept (spec R19.4-d).

    The SDK hands the process a file with a descriptor, so the server writes to a pipe; a
    thread reads it, writes each piece to ``forward`` and keeps the last
    ``STDERR_TAIL_CHARS`` characters. ``tail()`` closes this side's copy of the pipe's
    write end and waits (bounded) for the rest, so a server that died has said all it will.
    """

    def __init__(self, forward: TextIO) -> None:
        read, write = os.pipe()
        self.writer: TextIO = os.fdopen(write, "w", encoding="utf-8", errors="replace")
        self._forward = forward
        self._kept = ""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, args=(read,), name="mcp-stderr", daemon=True)
        self._thread.start()

    def _pump(self, fd: int) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(4096):
                text = decoder.decode(chunk)
                with contextlib.suppress(Exception):  # a closed or odd stream must not stop the reading
                    self._forward.write(text)
                    self._forward.flush()
                with self._lock:
                    self._kept = (self._kept + text)[-STDERR_TAIL_CHARS * 2 :]

    def close_writer(self) -> None:
        with contextlib.suppress(OSError):
            self.writer.close()

    def tail(self) -> str:
        """The last lines the server wrote, joined by `` | `` (empty when it wrote nothing)."""
        self.close_writer()
        self._thread.join(_STDERR_DRAIN)
        with self._lock:
            kept = self._kept
        lines = [line.strip() for line in kept.splitlines() if line.strip()]
        return " | ".join(lines[-STDERR_TAIL_LINES:])[-STDERR_TAIL_CHARS:]


class _Server:
    """One connected server: its client lives in a task of its own (spec R19.5-a).

    The SDK's transports run task groups; a transport that fails cancels the task that
    entered it. That task is this one, never the agent's, so a server that dies fails
    its own calls and nothing else.
    """

    def __init__(self, name: str, config: McpServerConfig, errlog: TextIO | None) -> None:
        self.name = name
        self.config = config
        self.errlog = errlog
        self.client: Any = None
        self.listed: list[Any] = []
        self.down: str | None = None  # why it cannot be called, once it cannot
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self._own(), name=f"mcp-server-{self.name}")

    async def wait_ready(self, timeout: float) -> None:
        await asyncio.wait_for(asyncio.shield(self._ready), timeout)

    async def _own(self) -> None:
        from mcp import Client

        stderr = _StderrTail(self.errlog or sys.stderr) if isinstance(self.config, StdioServer) else None
        try:
            errlog = stderr.writer if stderr is not None else self.errlog
            async with Client(_transport(self.config, errlog), raise_exceptions=False) as client:
                self.client = client
                cursor: str | None = None
                for _ in range(MAX_LIST_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    self.listed.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            reason = _reason(exc)
            failed = stderr is not None and isinstance(exc, Exception) and not self._closing.is_set()
            said = await asyncio.to_thread(stderr.tail) if failed and stderr is not None else ""
            if said:
                reason = f"{reason}; its stderr ended: {said}"  # spec R19.4-d: why, in the server's words
            if not self._ready.done():
                self._ready.set_exception(McpToolError(reason))
                self._ready.exception()  # read here: a start that timed out has nobody waiting any more
            elif not self._closing.is_set():
                self.down = f"MCP server {self.name!r} stopped: {reason}"
                log.warning("%s", self.down)
            if not isinstance(exc, Exception):
                raise
        finally:
            if stderr is not None:
                stderr.close_writer()
            if self.down is None:
                self.down = f"MCP server {self.name!r} is closed"
            self.client = None

    async def close(self) -> None:
        self._closing.set()
        task = self.task
        if task is None or task.done():
            return
        if not self._ready.done() or self._ready.exception() is not None:
            task.cancel()  # still starting: nothing to say goodbye to (the SDK still stops a process it started)
        _, pending = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if pending:
            log.warning("MCP server %r did not close within %g s; cancelling it", self.name, CLOSE_TIMEOUT)
            task.cancel()
            await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> str | ToolOutput:
        if self.down is not None or self.client is None:
            raise McpToolError(self.down or f"MCP server {self.name!r} is not connected")
        watch = asyncio.ensure_future(self.client.call_tool(tool, arguments))
        ended = self.task
        waits: set[asyncio.Future[Any]] = {watch} if ended is None else {watch, ended}
        try:
            done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not watch.done():
                watch.cancel()
        if watch in done:
            if watch.cancelled():
                raise McpToolError(self.down or f"MCP server {self.name!r}: the call was cancelled")
            try:
                result = watch.result()
            except Exception as exc:
                if self.down is not None:
                    raise McpToolError(self.down) from None
                message = f"MCP server {self.name!r} failed the call: {_reason(exc)}"
                log.warning("%s (%s)", message, tool)
                raise McpToolError(message) from None
            return map_result(result, self.name, tool)
        if ended is not None and ended in done:
            raise McpToolError(self.down or f"MCP server {self.name!r} stopped")
        log.warning("MCP server %r did not answer %s within %g s", self.name, tool, timeout)
        raise McpToolError(f"MCP server {self.name!r} did not answer {tool} within {timeout:g} s")


def _reason(exc: BaseException) -> str:
    """A short public reason: the exception's kind and first line, never a traceback or the server's environment."""
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _reason(inner)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    kind = type(exc).__name__
    return f"{kind}: {text}"[:300] if text else kind


def _transport(config: McpServerConfig, errlog: TextIO | None) -> Any:
    """What ``mcp.Client`` connects to for ``config``."""
    if isinstance(config, InProcessServer):
        return config.server
    if isinstance(config, StdioServer):
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(
            # spec R19.6-c: `python` is the interpreter running the agent, the one with its packages
            command=sys.executable if config.command in PYTHON_COMMANDS and sys.executable else config.command,
            args=list(config.args),
            env=dict(config.env) if config.env is not None else None,
            cwd=config.cwd,
        )
        return stdio_client(params, errlog=errlog if errlog is not None else sys.stderr)
    return _http(config)


@contextlib.asynccontextmanager
async def _http(config: HttpServer) -> AsyncIterator[Any]:
    """Streamable HTTP with the configured headers; the HTTP client is closed with the transport."""
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=dict(config.headers)) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams


def check_servers(servers: Mapping[str, object], where: str = "mcp_servers") -> None:
    """Refuse a server name or configuration no toolset takes, naming it ([R19.7-a]).

    Raises:
        ConfigError: a bad name, or a value that is not a server configuration.
    """
    for name, config in servers.items():
        check_server_name(name, where)
        if not isinstance(config, StdioServer | HttpServer | InProcessServer):
            raise ConfigError(f"{where}[{name!r}]: {type(config).__name__} is not a server configuration")


class McpToolset:
    """Connect MCP servers for the length of an ``async with``; their tools are ``tools`` (spec §19).

    Example::

        files = StdioServer("npx", ("-y", "@modelcontextprotocol/server-filesystem", "."))
        async with McpToolset({"files": files}) as mcp:
            agent = Agent(model, tools=[*default_tools(), *mcp.tools])
            await agent.run("...", sink)

    Args:
        servers: the servers by name (``load_mcp_config`` reads them from a file).
        connect_timeout: seconds each server has to start, shake hands and list its tools.
        call_timeout: seconds each call may take; past it the model reads a timeout result.
        errlog: where a stdio server's stderr goes (this process's stderr by default).

    Attributes:
        tools: the tools of every server that started, in server then listing order.
        failed: why each server that did not start did not (its tools are absent; logged too).
    """

    def __init__(
        self,
        servers: Mapping[str, McpServerConfig],
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        errlog: TextIO | None = None,
    ) -> None:
        """See the class docstring."""
        for name, config in servers.items():
            check_server_name(name, "McpToolset")
            if not isinstance(config, StdioServer | HttpServer | InProcessServer):
                raise ConfigError(f"McpToolset: server {name!r}: {type(config).__name__} is not a server configuration")
        if connect_timeout <= 0 or call_timeout <= 0:
            raise ConfigError("McpToolset: connect_timeout and call_timeout must be positive")
        self.servers = dict(servers)
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.errlog = errlog
        self.tools: list[Tool] = []
        self.failed: dict[str, str] = {}
        self._open: list[_Server] = []

    async def __aenter__(self) -> McpToolset:
        """Start every server at once, wait (bounded) for each to list its tools, and make the tools."""
        if missing("mcp"):
            raise MissingExtraError(needs("MCP servers", "mcp"))
        started = [_Server(name, config, self.errlog) for name, config in self.servers.items()]
        self._open = started
        try:
            for server in started:
                server.start()
            waits = [self._wait(server) for server in started]
            await asyncio.gather(*waits)
        except BaseException:
            await self._close_all()
            raise
        names: set[str] = set()
        for server in started:
            if server.name in self.failed:
                continue
            for listed in server.listed:
                made = self._tool(server, listed)
                if made.name in names:
                    log.warning("MCP server %r: a second tool named %s is left out", server.name, made.name)
                    continue
                names.add(made.name)
                self.tools.append(made)
        return self

    async def _wait(self, server: _Server) -> None:
        try:
            await server.wait_ready(self.connect_timeout)
        except TimeoutError:
            self.failed[server.name] = f"did not start and list its tools within {self.connect_timeout:g} s"
        except McpToolError as exc:
            self.failed[server.name] = f"did not start: {exc}"
        else:
            return
        log.warning("MCP server %r %s; its tools are left out", server.name, self.failed[server.name])
        await server.close()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close every server, even when the block was cancelled (spec R19.5-a)."""
        await self._close_all()

    async def _close_all(self) -> None:
        closing = asyncio.ensure_future(asyncio.gather(*(s.close() for s in self._open), return_exceptions=True))
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            # Cancelled while closing: finish the close (each step is bounded), then go on being cancelled.
            with contextlib.suppress(asyncio.CancelledError):
                await closing
            raise

    def _tool(self, server: _Server, listed: Any) -> Tool:
        schema = listed.input_schema if isinstance(listed.input_schema, dict) else {"type": "object"}
        properties = schema.get("properties")
        names = list(properties) if isinstance(properties, dict) else []
        call_timeout = self.call_timeout
        mcp_name = str(listed.name)

        async def call(**arguments: Any) -> str | ToolOutput:
            return await server.call(mcp_name, arguments, call_timeout)

        description = listed.description or getattr(listed, "title", None) or f"{mcp_name} (MCP server {server.name})"
        return Tool(
            name=tool_name(server.name, mcp_name),
            description=description,
            input_schema=schema,
            fn=call,
            param_types=_AnyArgument(names),
            # spec R19.4-b: the toolset's bound governs its calls (a tool's own timeout wins over the
            # agent's tool_timeout); the margin lets its message, which names the server, be the answer.
            timeout=call_timeout + _TIMEOUT_MARGIN,
        )
