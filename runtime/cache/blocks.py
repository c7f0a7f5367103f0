"""Reading an Anthropic Messages payload block by block, as the API reads it.

The API reads a request as tools, then system blocks, then each message's
content blocks. A string ``system`` or string message ``content`` is read as the
one text block it stands for. Every function here takes the payload shape of
docs/CONTRACTS.md and raises :class:`CacheInputError` naming the payload path
when the shape is not that.

A block's *location* is ``("tools", i)``, ``("system", i)`` or
``("messages", m, b)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime.cache.errors import CacheInputError
from runtime.request.prepared import UNMARKABLE_KINDS

Location = tuple[str, int] | tuple[str, int, int]

_TIER_RANK = {"tools": 0, "system": 1, "messages": 2}
RUN_KINDS = frozenset({"tool_use", "tool_result"})

# Anthropic's server-executed tools: with one in the request, usage may count
# work the server did beyond this request's own prefix.
SERVER_TOOL_TYPE_PREFIXES = ("web_search_", "web_fetch_", "code_execution_")


def api_order(location: Location) -> tuple[int, ...]:
    """A sort key putting locations in the order the API reads them."""
    try:
        return (_TIER_RANK[location[0]], *location[1:])
    except (KeyError, IndexError, TypeError):
        raise CacheInputError(
            f"location {location!r} is not a block location; expected ('tools', i), ('system', i) or ('messages', m, b)"
        ) from None


def check_location(location: Any, *, what: str = "location") -> Location:
    """Return ``location`` as a tuple after checking its shape (not its existence)."""
    if isinstance(location, list):
        location = tuple(location)
    ok = (
        isinstance(location, tuple)
        and location
        and (
            (location[0] in ("tools", "system") and len(location) == 2)
            or (location[0] == "messages" and len(location) == 3)
        )
        and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in location[1:])
    )
    if not ok:
        raise CacheInputError(
            f"{what} {location!r} is not a block location; expected ('tools', i), "
            "('system', i) or ('messages', m, b) with non-negative integer indices"
        )
    return location


def as_payload(payload: Any) -> Mapping[str, Any]:
    if not isinstance(payload, Mapping):
        raise CacheInputError(f"payload is {type(payload).__name__}, expected a mapping (the Messages payload)")
    return payload


def tools_of(payload: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """The payload's tools, checked: a list of mappings (empty when absent)."""
    tools = payload.get("tools")
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise CacheInputError(f"tools is {type(tools).__name__}, expected a list of tool definitions")
    for i, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise CacheInputError(f"tools[{i}] is {type(tool).__name__}, expected a mapping")
    return tools


def system_blocks(payload: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """The system blocks as the API reads them (a string is one text block)."""
    system = payload.get("system")
    if system is None:
        return ()
    return content_blocks(system, "system")


def messages_of(payload: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    messages = payload.get("messages")
    if messages is None:
        return ()
    if not isinstance(messages, list):
        raise CacheInputError(f"messages is {type(messages).__name__}, expected a list of messages")
    for m, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise CacheInputError(f"messages[{m}] is {type(message).__name__}, expected a mapping")
        if "content" not in message:
            raise CacheInputError(f"messages[{m}] has no 'content'; expected a string or a list of blocks")
    return messages


def content_blocks(content: Any, path: str) -> Sequence[Mapping[str, Any]]:
    """A message's (or the system's) content as blocks: a string is one text block."""
    if isinstance(content, str):
        return ({"type": "text", "text": content},)
    if not isinstance(content, list):
        raise CacheInputError(f"{path} is {type(content).__name__}, expected a string or a list of blocks")
    for b, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise CacheInputError(f"{path}[{b}] is {block!r:.80}, expected a block mapping with a string 'type'")
    return content


def without_cache_control(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """The block with its own ``cache_control`` removed (the same object when it has none)."""
    if "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def is_markable(block: Mapping[str, Any]) -> bool:
    """Whether a content block may carry a cache mark: not thinking, not blank text."""
    kind = block.get("type")
    if kind in UNMARKABLE_KINDS:
        return False
    if kind == "text":
        text = block.get("text")
        return isinstance(text, str) and text.strip() != ""
    return True


def has_server_tool(payload: Mapping[str, Any]) -> bool:
    """Whether the request carries a server tool (web search, web fetch, code execution)."""
    for tool in tools_of(payload):
        kind = tool.get("type")
        if isinstance(kind, str) and kind.startswith(SERVER_TOOL_TYPE_PREFIXES):
            return True
    return False


def block_at(payload: Mapping[str, Any], location: Location) -> Mapping[str, Any]:
    """The block at ``location`` as the API reads it; a clear error when there is none."""
    location = check_location(location)
    tier = location[0]
    if tier == "tools":
        seq: Sequence[Mapping[str, Any]] = tools_of(payload)
        index = location[1]
    elif tier == "system":
        seq = system_blocks(payload)
        index = location[1]
    else:
        messages = messages_of(payload)
        m = location[1]
        if m >= len(messages):
            raise CacheInputError(f"location {location!r}: the payload has {len(messages)} messages")
        seq = content_blocks(messages[m]["content"], f"messages[{m}].content")
        index = location[-1]  # the block index is last: ('messages', m, b)
    if index >= len(seq):
        raise CacheInputError(f"location {location!r}: there are only {len(seq)} blocks there")
    return seq[index]
