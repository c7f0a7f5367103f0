"""Tools: the registry and built-ins, tools from Python functions, the workspace
tools, loading a user's registry, and the executor that runs a round's calls.

``from actors.tools import X`` keeps working for every name the single module
had; the new names are re-exported here too, each loaded on first use (``import runtime.runtime``
needs the registry, not the function-tool builder or the workspace tools).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.values.exports import lazy_getattr

if TYPE_CHECKING:
    from actors.tools.functions import function_tool, tool, tool_output
    from actors.tools.registry import (
        BUILTIN_TOOLS,
        DEFAULT_MAX_CONCURRENT,
        DEFAULT_TIMEOUT_S,
        Tool,
        ToolArgumentError,
        ToolContext,
        ToolFailed,
        ToolFunc,
        ToolRegistry,
        synthetic_text,
    )
    from actors.tools.stopping import ToolStopped, check_stop, stop_requested
    from actors.tools.workspace import WORKSPACE_TOOL_NAMES, WorkspacePathError, workspace_tools
    from runtime.request.compiler import ToolSpec

__all__ = [
    "BUILTIN_TOOLS",
    "DEFAULT_MAX_CONCURRENT",
    "DEFAULT_TIMEOUT_S",
    "WORKSPACE_TOOL_NAMES",
    "Tool",
    "ToolArgumentError",
    "ToolContext",
    "ToolFailed",
    "ToolFunc",
    "ToolRegistry",
    "ToolSpec",
    "ToolStopped",
    "WorkspacePathError",
    "check_stop",
    "function_tool",
    "stop_requested",
    "synthetic_text",
    "tool",
    "tool_output",
    "workspace_tools",
]

_ELSEWHERE = {
    **dict.fromkeys(("function_tool", "tool", "tool_output"), "actors.tools.functions"),
    **dict.fromkeys(("ToolStopped", "check_stop", "stop_requested"), "actors.tools.stopping"),
    **dict.fromkeys(("WORKSPACE_TOOL_NAMES", "WorkspacePathError", "workspace_tools"), "actors.tools.workspace"),
    "ToolSpec": "runtime.request.compiler",
}
_HOMES = {name: _ELSEWHERE.get(name, "actors.tools.registry") for name in __all__}
"""Each name's module (the registry's, unless named above), imported when the name is first read."""


__getattr__ = lazy_getattr(__name__, _HOMES)
