"""``.mcp.json``, tool names and result mapping of agent_ref.tools.mcp (spec/agent-ref.md §19), without a server."""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

import mcp_types as mt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_ref import ConfigError, ToolOutput
from agent_ref.tools.mcp import (
    HttpServer,
    InProcessServer,
    McpToolError,
    McpToolset,
    StdioServer,
    load_mcp_config,
    map_result,
    parse_mcp_config,
    tool_name,
)

if TYPE_CHECKING:
    from pathlib import Path

API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / ".mcp.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_mcp_json_reads_stdio_and_http_servers(tmp_path: Path) -> None:
    """The common shape: command/args/env/cwd, or type http|streamable-http with url and headers [R19.6-a]."""
    path = _write(
        tmp_path,
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "server-fs", "."], "env": {"A": "1"}, "cwd": "/tmp"},
                "plain": {"type": "stdio", "command": "srv"},
                "web": {"type": "http", "url": "https://example.test/mcp", "headers": {"Authorization": "Bearer x"}},
                "web2": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
            }
        },
    )
    assert load_mcp_config(path) == {
        "files": StdioServer("npx", ("-y", "server-fs", "."), {"A": "1"}, "/tmp"),
        "plain": StdioServer("srv"),
        "web": HttpServer("https://example.test/mcp", {"Authorization": "Bearer x"}),
        "web2": HttpServer("http://127.0.0.1:1/mcp"),
    }


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{nope", r"\.mcp\.json:1:2: not JSON"),
        ([], r"\.mcp\.json: the top level must be an object"),
        ({}, r"\.mcp\.json: no 'mcpServers' key"),
        ({"mcpServers": []}, r"mcpServers must be an object"),
        ({"mcpServers": {"a b": {"command": "x"}}}, r"mcpServers: server name 'a b' must be 1 to 32"),
        ({"mcpServers": {"s": "x"}}, r"mcpServers\.s: must be an object"),
        ({"mcpServers": {"s": {}}}, r"mcpServers\.s: needs 'command'"),
        ({"mcpServers": {"s": {"command": ""}}}, r"mcpServers\.s\.command: must be a non-empty string"),
        ({"mcpServers": {"s": {"command": "x", "args": "y"}}}, r"mcpServers\.s\.args: must be a list of strings"),
        ({"mcpServers": {"s": {"command": "x", "env": {"A": 1}}}}, r"mcpServers\.s\.env: must be an object of strings"),
        ({"mcpServers": {"s": {"command": "x", "arg": []}}}, r"mcpServers\.s\.arg: unknown key"),
        ({"mcpServers": {"s": {"type": "sse", "url": "http://x"}}}, r"mcpServers\.s\.type: 'sse' is not supported"),
        ({"mcpServers": {"s": {"type": "http", "url": "ftp://x"}}}, r"mcpServers\.s\.url: must be an http"),
        ({"mcpServers": {"s": {"type": "http", "url": "http://x", "headers": []}}}, r"mcpServers\.s\.headers"),
    ],
)
def test_mcp_json_errors_name_the_file_and_the_key(tmp_path: Path, data: Any, message: str) -> None:
    """Each wrong file is a ConfigError naming the file and the key [R19.6-a] [R19.1-b]."""
    path = _write(tmp_path, data)
    with pytest.raises(ConfigError, match=message) as caught:
        load_mcp_config(path)
    assert str(caught.value).startswith(str(path))


def test_mcp_json_unreadable(tmp_path: Path) -> None:
    """A missing file or a directory: a ConfigError naming it [R19.6-a]."""
    with pytest.raises(ConfigError, match="no such file"):
        load_mcp_config(tmp_path / "missing.json")
    with pytest.raises(ConfigError, match="is a directory"):
        load_mcp_config(tmp_path)


def test_toolset_refuses_bad_server_names_and_timeouts() -> None:
    """Server names are checked in code as in files; timeouts must be positive [R19.1-b]."""
    with pytest.raises(ConfigError, match="server name 'mcp server'"):
        McpToolset({"mcp server": StdioServer("x")})
    with pytest.raises(ConfigError, match="server name"):
        McpToolset({"x" * 33: StdioServer("x")})
    with pytest.raises(ConfigError, match="not a server configuration"):
        McpToolset({"s": "srv"})  # type: ignore[dict-item]  # the wrong type is the point
    with pytest.raises(ConfigError, match="positive"):
        McpToolset({}, call_timeout=0)
    assert parse_mcp_config({"mcpServers": {"a-b_9": {"command": "x"}}}) == {"a-b_9": StdioServer("x")}


def test_tool_names_fit_as_they_are() -> None:
    """mcp__<server>__<tool>, unchanged when it fits the API's rule [R19.1-a]."""
    assert tool_name("files", "read_file") == "mcp__files__read_file"
    assert tool_name("s", "a-b") == "mcp__s__a-b"


def test_tool_names_that_do_not_fit_are_sanitised() -> None:
    """Other characters become _, long names are cut with a hash of the tool name [R19.1-a]."""
    dotted = tool_name("s", "files.read")
    assert dotted.startswith("mcp__s__files_read_")
    assert len(dotted) == len("mcp__s__files_read_") + 8
    long = tool_name("server", "x" * 100)
    assert len(long) == 64
    assert long.startswith("mcp__server__xxx")
    assert tool_name("server", "x" * 100 + "1") != tool_name("server", "x" * 100 + "2")


@given(server=st.from_regex(r"[A-Za-z0-9_-]{1,32}", fullmatch=True), tool=st.text(min_size=1, max_size=120))
def test_tool_names_always_fit_and_are_deterministic(server: str, tool: str) -> None:
    """Any tool name gives a name the API takes; the same input the same name [R19.1-a]."""
    name = tool_name(server, tool)
    assert API_NAME.match(name)
    assert name == tool_name(server, tool)
    assert name.startswith("mcp__")


@given(
    tools=st.lists(st.text(min_size=1, max_size=90), min_size=2, max_size=6, unique=True),
)
def test_distinct_tool_names_stay_distinct(tools: list[str]) -> None:
    """Two different tool names of one server never map to one name (sanitised ones carry a hash) [R19.1-a]."""
    names = [tool_name("srv", t) for t in tools]
    assert len(set(names)) == len(names)


def _result(*content: Any, structured: Any = None, is_error: bool = False) -> mt.CallToolResult:
    return mt.CallToolResult(content=list(content), structured_content=structured, is_error=is_error)


def test_result_mapping() -> None:
    """Text, images, resources, links, audio and structured content, as spec'd [R19.3-a]."""
    text = mt.TextContent(type="text", text="one")
    assert map_result(_result(text, mt.TextContent(type="text", text="two")), "s", "t") == "one\n\ntwo"
    image = mt.ImageContent(type="image", data="QUJD", mime_type="image/png")
    out = map_result(_result(text, image), "s", "t")
    assert isinstance(out, ToolOutput)
    assert out.text == "one"
    assert [(i.src, i.media_type) for i in out.images] == [("data:image/png;base64,QUJD", "image/png")]
    assert map_result(_result(structured={"a": [1, "é"]}), "s", "t") == '{"a":[1,"é"]}'
    assert map_result(_result(text, structured={"a": 1}), "s", "t") == "one"  # said once, not twice
    resource = mt.EmbeddedResource(type="resource", resource=mt.TextResourceContents(uri="file:///n", text="notes"))
    blob = mt.EmbeddedResource(
        type="resource", resource=mt.BlobResourceContents(uri="file:///b", blob="AAAA", mime_type="application/pdf")
    )
    link = mt.ResourceLink(type="resource_link", name="doc", uri="file:///doc")
    audio = mt.AudioContent(type="audio", data="AAAAAAAA", mime_type="audio/wav")
    assert map_result(_result(resource, blob, link, audio), "s", "t") == (
        "notes\n\n[resource file:///b application/pdf, 3 bytes, not shown]\n\n"
        "[resource doc: file:///doc]\n\n[audio audio/wav, 6 bytes, not shown]"
    )
    picture = mt.EmbeddedResource(
        type="resource", resource=mt.BlobResourceContents(uri="file:///p", blob="QUJD", mime_type="image/gif")
    )
    pictured = map_result(_result(picture), "s", "t")
    assert isinstance(pictured, ToolOutput)
    assert pictured.images[0].src == "data:image/gif;base64,QUJD"
    assert map_result(_result(), "s", "t") == ""


def test_is_error_raises_with_the_servers_text() -> None:
    """isError: McpToolError with the server's text, or a message naming the tool [R19.3-b]."""
    with pytest.raises(McpToolError, match=r"^disk full$"):
        map_result(_result(mt.TextContent(type="text", text="disk full"), is_error=True), "s", "t")
    with pytest.raises(McpToolError, match="MCP tool t of server s failed without a message"):
        map_result(_result(is_error=True), "s", "t")


def test_empty_toolset_opens_and_closes() -> None:
    """No servers: no tools, nothing failed [R19.5-a]."""

    async def main() -> McpToolset:
        async with McpToolset({}) as toolset:
            return toolset

    toolset = asyncio.run(main())
    assert toolset.tools == []
    assert toolset.failed == {}
    assert InProcessServer(object()).server is not None


def test_without_the_mcp_extra_one_line_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``mcp`` installed: opening a toolset raises MissingExtraError with the extra's one line."""
    from agent_ref.tools import mcp as mcp_tools
    from envelope._extras import MissingExtraError

    monkeypatch.setattr(mcp_tools, "missing", lambda extra: ["mcp"] if extra == "mcp" else [])

    async def main() -> None:
        async with McpToolset({}):
            pass

    with pytest.raises(
        MissingExtraError, match=r"^MCP servers needs the 'mcp' extra: pip install 'envelope-stream\[mcp\]'$"
    ):
        asyncio.run(main())


_NAMES = st.from_regex(r"[A-Za-z0-9_-]{1,32}", fullmatch=True)
_STRINGS = st.text(max_size=20)
_STDIO = st.builds(
    StdioServer,
    command=st.text(min_size=1, max_size=20),
    args=st.lists(_STRINGS, max_size=4).map(tuple),
    env=st.none() | st.dictionaries(_STRINGS, _STRINGS, max_size=3),
    cwd=st.none() | _STRINGS,
)
_HTTP = st.builds(
    HttpServer,
    url=st.sampled_from(["http://", "https://"]).flatmap(lambda s: _STRINGS.map(lambda rest: s + rest)),
    headers=st.dictionaries(_STRINGS, _STRINGS, max_size=3),
)


def _as_json(config: StdioServer | HttpServer, kind: str) -> dict[str, Any]:
    if isinstance(config, HttpServer):
        return {"type": kind, "url": config.url, "headers": dict(config.headers)}
    entry: dict[str, Any] = {"command": config.command, "args": list(config.args)}
    if config.env is not None:
        entry["env"] = dict(config.env)
    if config.cwd is not None:
        entry["cwd"] = config.cwd
    return entry


@given(
    servers=st.dictionaries(_NAMES, _STDIO | _HTTP, max_size=5),
    kind=st.sampled_from(["http", "streamable-http"]),
)
def test_any_valid_mcp_json_reads_back_what_it_says(servers: dict[str, StdioServer | HttpServer], kind: str) -> None:
    """Whatever servers a valid file lists, in any order, are read back as they are written [R19.6-a]."""
    document = json.loads(json.dumps({"mcpServers": {n: _as_json(c, kind) for n, c in servers.items()}}))
    read = parse_mcp_config(document, "x.json")
    assert read == servers
    assert list(read) == list(servers)
