"""Server tools (web search, web fetch, code execution, tool search, ...): offered, never run (pure).

A request may offer server tools and hold their blocks in its history
(``server_tool_use``, ``web_search_tool_result``, ...): both are taken. The
simulator runs none of them: the default model never calls one, and a script
step that calls one is answered with a 400 ``invalid_request_error`` saying
the tool is not simulated (a script should call a client tool, which the
caller runs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.scripted.policies import Reply
from runtime.sim.errors import invalid_request

SERVER_TOOL_PREFIXES = ("web_search_", "web_fetch_", "code_execution_", "tool_search_tool_", "advisor_", "mcp_toolset")
"""The ``type`` prefixes of the tools Anthropic runs on its side (client tools such as ``bash_...`` or
``text_editor_...`` have a ``type`` too, but the caller runs them)."""


def server_tools(payload: Mapping[str, Any]) -> dict[str, str]:
    """The server tools a request offers: name to type."""
    found: dict[str, str] = {}
    for tool in payload.get("tools") or ():
        kind = tool.get("type") if isinstance(tool, Mapping) else None
        if isinstance(kind, str) and kind.startswith(SERVER_TOOL_PREFIXES):
            found[str(tool.get("name", kind))] = kind
    return found


def refuse_server_tool_calls(reply: Reply, payload: Mapping[str, Any]) -> Reply:
    """``reply``, or a 400 when it calls a server tool the request offers (the simulator runs none)."""
    offered = server_tools(payload)
    for block in reply.content:
        if block.get("type") == "tool_use" and block.get("name") in offered:
            name = block["name"]
            raise invalid_request(
                f"tools: the server tool {name!r} ({offered[name]}) is not simulated by foldline's simulator; "
                "a script step may call client tools only"
            )
    return reply
