"""Tools from MCP servers, through the official ``mcp`` SDK (the ``mcp`` extra).

::

    from actors.tools.mcp import mcp_servers
    from runtime.config.mcp import McpServerSpec

    async with mcp_servers({"time": McpServerSpec(command=["mcp-server-time"])}) as mcp:
        profile = Profile(tools=[*mcp.tools, my_tool])
        ...  # run the flow inside the block: the servers live as long as it

:func:`mcp_servers` starts each server once (a command over stdio, or a
streamable-HTTP ``url``), lists its tools (every page, bounded) and gives them
as foldline :class:`~actors.tools.Tool` values: the name, description and input
schema are the server's, a call goes through the server's session, and its
result comes back as text, measured, folded and recovered like any other tool
result. Leaving the block shuts every server down.

Untrusted as every input: a server's tool list is bounded (count, name form,
description and schema sizes) and refused with the server's name when it breaks
a bound; a result is bounded in characters. What a call can go wrong with
becomes an error result the model sees (the executor's ``tool_errors``): a
result with ``isError``, a call past the server's ``timeout_s``, a server that
exited (its last stderr lines are quoted), a result with content foldline does
not pass on yet (images, audio, binary resources: "not built yet").

A server runs in a task of its own (the SDK's client is a context manager
whose tasks must end in the task that started them); a server that dies never
takes the run down with it, it only answers every later call with an error.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import anyio
import attrs
from anyio.abc import TaskGroup, TaskStatus

from actors.tools.registry import Tool, ToolContext, ToolFailed, ToolRegistry
from runtime.config.mcp import McpServerSpec
from runtime.errors import ConfigError
from runtime.request.compiler import ToolSpec
from runtime.values.canonical import canonical_json

if TYPE_CHECKING:
    from mcp import Client

MAX_MCP_TOOLS = 512
"""Tools one server may list."""
MAX_LIST_PAGES = 64
"""Pages of ``tools/list`` read from one server."""
MAX_DESCRIPTION_CHARS = 16_384
MAX_SCHEMA_BYTES = 65_536
MAX_RESULT_CHARS = 2_000_000
"""The most characters an MCP tool result may have (the same bound as the built-in tools')."""
STDERR_TAIL_CHARS = 600
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class McpServerError(ConfigError):
    """An MCP server could not be started, or listed tools foldline refuses (named by server)."""


@attrs.define(eq=False)
class _Server:
    """One running server: its client (once started), why it stopped, its stderr file."""

    name: str
    spec: McpServerSpec
    errlog: TextIO | None
    client: Client | None = None
    stopped: str | None = None

    def stderr_tail(self) -> str:
        if self.errlog is None:
            return ""
        try:
            self.errlog.flush()
            self.errlog.seek(0, os.SEEK_END)
            size = self.errlog.tell()
            self.errlog.seek(max(0, size - STDERR_TAIL_CHARS * 4))
            lines = [line.strip() for line in self.errlog.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        tail = " | ".join(lines[-3:])[-STDERR_TAIL_CHARS:]
        return f"; its stderr ends: {tail!r}" if tail else ""


@attrs.frozen
class McpTools:
    """The tools of the started servers, in server then listing order."""

    tools: tuple[Tool, ...]
    by_server: Mapping[str, tuple[str, ...]]

    def names(self) -> frozenset[str]:
        return frozenset(t.name for t in self.tools)

    def registry(self) -> ToolRegistry:
        return ToolRegistry({t.name: t for t in self.tools})


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ConfigError(
            "MCP servers need the mcp extra: pip install 'foldline[mcp]' (the official MCP Python SDK)"
        ) from None


@asynccontextmanager
async def mcp_servers(servers: Mapping[str, McpServerSpec], *, base_dir: Path | None = None) -> AsyncIterator[McpTools]:
    """Start ``servers`` (name -> spec), yield their tools, shut them down on exit (see the module doc).

    ``base_dir`` is what a relative ``cwd`` is relative to (the scenario file's
    directory; default: the working directory). A server that cannot start, or
    lists tools out of bounds, raises :class:`McpServerError` naming it, after
    the servers started before it were shut down. With no servers, nothing is
    imported and nothing starts.
    """
    if not servers:
        yield McpTools((), {})
        return
    _require_sdk()
    stop = anyio.Event()
    failure: Exception | None = None
    async with anyio.create_task_group() as group:
        try:
            mcp = await _start_all(group, servers, base_dir or Path.cwd(), stop)
            yield mcp
        except Exception as exc:  # raised as itself below, not wrapped in the task group's ExceptionGroup
            failure = exc
        finally:
            stop.set()
    if failure is not None:
        raise failure


async def _start_all(
    group: TaskGroup, servers: Mapping[str, McpServerSpec], base_dir: Path, stop: anyio.Event
) -> McpTools:
    tools: list[Tool] = []
    by_server: dict[str, tuple[str, ...]] = {}
    for name, spec in servers.items():
        server = _Server(name, spec, None)
        listed = await group.start(_serve, server, base_dir, stop)
        server_tools = [_tool(server, item) for item in listed]
        by_server[name] = tuple(t.name for t in server_tools)
        tools.extend(server_tools)
    return McpTools(_unique(tools, by_server), by_server)


def _unique(tools: list[Tool], by_server: Mapping[str, tuple[str, ...]]) -> tuple[Tool, ...]:
    seen: dict[str, str] = {}
    for server, names in by_server.items():
        for name in names:
            if name in seen:
                raise McpServerError(
                    f"mcp.{server}: tool {name!r} is also listed by server {seen[name]!r}; tool names must be unique"
                )
            seen[name] = server
    return tuple(tools)


async def _serve(server: _Server, base_dir: Path, stop: anyio.Event, *, task_status: TaskStatus[Any]) -> None:
    """One server's life: start it, list its tools (``task_status.started``), wait for ``stop``, shut it down."""
    spec = server.spec
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        server.errlog = cast(TextIO, errlog) if spec.command is not None else None
        started = False
        try:
            with anyio.move_on_after(spec.startup_timeout_s) as startup:
                async with _client(server, base_dir) as client:
                    listed = await _list_tools(server, client)
                    startup.deadline = math.inf  # started: from now on only `stop` ends it
                    server.client = client
                    started = True
                    task_status.started(listed)
                    await stop.wait()
        except Exception as exc:  # the SDK's errors, a dead process, a group of them
            server.stopped = _why(exc)
            if not started:
                raise McpServerError(
                    f"mcp.{server.name}: the server could not be started: {server.stopped}{server.stderr_tail()}"
                ) from None
            return
        finally:
            server.client = None
        if not started:
            raise McpServerError(
                f"mcp.{server.name}: the server did not start and list its tools within "
                f"startup_timeout_s = {spec.startup_timeout_s:g} s{server.stderr_tail()}"
            )
        server.stopped = server.stopped or "shut down at the end of the run"


def _why(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"


def _client(server: _Server, base_dir: Path) -> Client:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    spec = server.spec
    if spec.url is not None:
        return Client(spec.url, cache=None)
    assert spec.command is not None and server.errlog is not None
    cwd = base_dir / spec.cwd if spec.cwd is not None else None
    if cwd is not None and not cwd.is_dir():
        raise McpServerError(f"mcp.{server.name}.cwd: {spec.cwd!r} is not a directory (relative to {base_dir})")
    params = StdioServerParameters(
        command=_program(spec.command[0]), args=list(spec.command[1:]), env=dict(spec.env), cwd=cwd
    )
    return Client(stdio_client(params, errlog=server.errlog), cache=None)


def _program(name: str) -> str:
    """``name`` as found on PATH, else beside this Python (a venv's scripts, when it is not activated)."""
    if os.sep in name:
        return name
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent)) or name


async def _list_tools(server: _Server, client: Client) -> list[Any]:
    listed: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        listed.extend(page.tools)
        if len(listed) > MAX_MCP_TOOLS:
            raise McpServerError(f"mcp.{server.name}: the server lists more than {MAX_MCP_TOOLS} tools")
        cursor = page.next_cursor
        if cursor is None:
            return listed
    raise McpServerError(f"mcp.{server.name}: the tool list goes on past {MAX_LIST_PAGES} pages")


def _tool(server: _Server, listed: Any) -> Tool:
    """A foldline tool from one listed MCP tool, its name, description and schema checked."""
    where = f"mcp.{server.name}: tool {str(listed.name)[:80]!r}"
    if not _TOOL_NAME.fullmatch(listed.name):
        raise McpServerError(f"{where}: the name is not 1 to 64 letters, digits, '_' or '-' (what a model API takes)")
    description = listed.description or listed.title or listed.name
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise McpServerError(
            f"{where}: a description of {len(description)} characters is above {MAX_DESCRIPTION_CHARS}"
        )
    schema = dict(listed.input_schema)
    size = len(canonical_json(schema).encode("utf-8"))
    if size > MAX_SCHEMA_BYTES:
        raise McpServerError(f"{where}: an input schema of {size} bytes is above {MAX_SCHEMA_BYTES}")
    name = listed.name

    async def call(arguments: Mapping[str, Any], context: ToolContext) -> str:
        client = server.client
        if client is None:
            raise ToolFailed(
                f"{name}: MCP server {server.name!r} is not running ({server.stopped}){server.stderr_tail()}"
            )
        try:
            result = await client.call_tool(name, dict(arguments))
        except Exception as exc:
            why = server.stopped or _why(exc)
            raise ToolFailed(
                f"{name}: MCP server {server.name!r} failed the call ({why}){server.stderr_tail()}"
            ) from None
        text = result_text(name, result)
        if result.is_error:
            raise ToolFailed(f"{name}: {text}" if text else f"{name}: the MCP server returned an error result")
        return text

    return Tool(ToolSpec.create(name, description, schema), call, timeout_s=server.spec.timeout_s)


def result_text(tool: str, result: Any) -> str:
    """A ``CallToolResult`` as the text of a tool result (text blocks, embedded text resources, links)."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource" and isinstance(getattr(block.resource, "text", None), str):
            parts.append(block.resource.text)
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        else:
            raise ToolFailed(f"{tool}: an MCP result with {kind} content is not built yet; foldline passes on text")
    if not parts and result.structured_content is not None:
        parts.append(canonical_json(result.structured_content))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        raise ToolFailed(f"{tool}: the MCP result is {len(text)} characters, above the bound of {MAX_RESULT_CHARS}")
    return text
