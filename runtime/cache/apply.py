"""Writing marks into a payload.

:func:`apply_marks` returns a new payload with ``cache_control`` set on the
marked blocks; the input is never mutated. Only the containers on the path to
a marked block are copied (the top-level dict, the marked tier's list, a
marked message and its content list, the marked block); everything else is
shared with the input, so the cost is independent of the payload's size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from runtime.cache.blocks import block_at, content_blocks, is_markable
from runtime.cache.errors import CacheInputError
from runtime.cache.marks import Mark, check_marks


def cache_control(ttl: str) -> dict[str, str]:
    """The API's cache_control value for a lifetime."""
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": "1h"}


def apply_marks(payload: Mapping[str, Any], marks: Sequence[Mark]) -> dict[str, Any]:
    """A copy of ``payload`` with each mark's ``cache_control`` on its block.

    The marks must be a set the API accepts (at most four, one per block,
    1h before 5m) on blocks that exist and take a mark. String content that
    carries a mark becomes the one text block it stands for. With no marks
    the result equals the input.
    """
    ordered = check_marks(tuple(marks))
    for mark in ordered:
        block = block_at(payload, mark.location)
        if not is_markable(block):
            raise CacheInputError(
                f"mark at {mark.location!r}: a {block.get('type')!r} block that is thinking or blank takes no mark"
            )
    out = dict(payload)
    for mark in ordered:
        tier = mark.location[0]
        control = cache_control(mark.ttl)
        if tier == "tools":
            tools = out["tools"] = _copied(out["tools"], payload.get("tools"))
            i = mark.location[1]
            tools[i] = {**tools[i], "cache_control": control}
        elif tier == "system":
            system = out["system"] = _as_block_list(out["system"], payload.get("system"), "system")
            i = mark.location[1]
            system[i] = {**system[i], "cache_control": control}
        else:
            m, b = mark.location[1], mark.location[-1]  # ('messages', m, b)
            messages = out["messages"] = _copied(out["messages"], payload.get("messages"))
            message = messages[m]
            if message is payload["messages"][m]:
                message = messages[m] = dict(message)
            content = message["content"] = _as_block_list(
                message["content"], payload["messages"][m]["content"], f"messages[{m}].content"
            )
            content[b] = {**content[b], "cache_control": control}
    return out


def _copied(current: Any, original: Any) -> list[Any]:
    """``current`` as a list of our own: copied once, the first time it is touched."""
    return list(current) if current is original else current


def _as_block_list(current: Any, original: Any, path: str) -> list[Any]:
    if isinstance(current, str):
        return [dict(block) for block in content_blocks(current, path)]
    return _copied(current, original)
