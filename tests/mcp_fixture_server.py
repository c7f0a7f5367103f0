"""An MCP server written with the SDK's own server API, run over stdio by tests/test_mcp_tools.py.

Run with no argument it serves stdio; with ``--http PORT``, streamable HTTP on
loopback at ``/mcp``. Its tools exercise what a real server can do to a client: answer, raise
(an ``isError`` result), take longer than the client's timeout, return a large
result, list a second tool page's worth of names, and exit mid-run.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("foldline-fixture", log_level="ERROR")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def explode(message: str) -> str:
    """Fail with the message (an ``isError`` result)."""
    raise ToolError(message)


@server.tool()
async def sleepy(seconds: float) -> str:
    """Sleep for the given seconds, then answer."""
    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def big(size: int) -> str:
    """Return exactly `size` characters of text."""
    line = "0123456789abcdefghijklmnopqrstuvwxyz\n"
    return (line * (size // len(line) + 1))[:size]


@server.tool()
def die(code: int) -> str:
    """Exit the server process at once with the exit code."""
    print("fixture: exiting on request", file=sys.stderr, flush=True)
    os._exit(code)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # streamable HTTP on loopback, at /mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
