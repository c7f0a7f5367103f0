"""A request already split into the canonical bytes certification reads.

:func:`runtime.cache.certificates.certify_payload` reads a Messages payload
mapping: it re-serialises every block to canonical JSON and hashes each
message to recognise an unchanged prefix. A caller that already holds the
canonical bytes of every block (the compiler does) hands over a
:class:`PreparedPayload` instead: the same bytes, so the same certificates,
with nothing parsed or re-serialised, and messages compared by ``keys``.

The caller's promise, pinned by tests against the mapping path: each block's
``data`` is the canonical JSON of that block as the API reads it without its
``cache_control``; each message's envelope is the canonical JSON of the
message without ``content``; two messages with equal keys render equal bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import attrs

from runtime.values.canonical import canonical_bytes

UNMARKABLE_KINDS = frozenset({"thinking", "redacted_thinking"})
"""Block types a cache mark may not sit on (the API refuses ``cache_control`` on thinking)."""


@attrs.frozen
class PreparedBlock:
    """One block: canonical JSON bytes (no cache_control), its type, whether it takes a mark."""

    data: bytes
    kind: str
    markable: bool = True


@attrs.frozen
class PreparedMessage:
    """One message: the canonical JSON of its envelope (every field but content) and its blocks."""

    envelope: bytes
    blocks: tuple[PreparedBlock, ...]


ABSENT: Any = object()
"""The value of a seed field the payload does not carry."""


@attrs.frozen(eq=False)
class PreparedPayload:
    """A payload as certification reads it (see the module docstring).

    ``model``, ``thinking``, ``effort``, ``speed`` and ``tool_choice`` are the
    JSON values of the payload fields that seed the certificates
    (:data:`ABSENT` for a field not present; ``thinking`` and ``effort`` are
    None when absent, as the mapping path reads them). ``message`` renders
    the message with a given key.
    """

    model: Any
    tools: tuple[PreparedBlock, ...]
    system: tuple[PreparedBlock, ...]
    keys: tuple[Hashable, ...]
    message: Callable[[Any], PreparedMessage]
    thinking: Any = None
    effort: Any = None
    speed: Any = ABSENT
    tool_choice: Any = ABSENT
    server_tool: bool = False

    @property
    def message_count(self) -> int:
        return len(self.keys)

    def messages(self) -> Sequence[PreparedMessage]:
        """Every message rendered (for tests and diagnostics; certification renders only what is new)."""
        return tuple(self.message(key) for key in self.keys)


_CANONICAL_BY_CONSTRUCTION = frozenset({"text", "tool_result", "tool"})


def prepare_block(json_text: str, kind: str) -> PreparedBlock:
    """A :class:`PreparedBlock` from a block's JSON text as the compiler renders it (no cache_control).

    Text, tool_result and tool definition blocks are rendered by canonical
    JSON encoding, so their text is their canonical form; any other block
    (a tool_use carries its arguments as given) is parsed and re-encoded once.
    A text block takes a mark only when its text is not blank.
    """
    data = json_text.encode("utf-8") if kind in _CANONICAL_BY_CONSTRUCTION else canonical_bytes(json.loads(json_text))
    markable = True
    if kind in UNMARKABLE_KINDS:
        markable = False
    elif kind == "text":
        text = json.loads(json_text).get("text")
        markable = isinstance(text, str) and text.strip() != ""
    return PreparedBlock(data, kind, markable)
