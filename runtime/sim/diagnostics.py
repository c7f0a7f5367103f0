"""Prompt-cache diagnostics: why a request could not reuse the prefix of the one it names (pure).

A request with ``diagnostics: {"previous_message_id": "msg_..."}`` gets
``diagnostics.cache_miss_reason`` in its response, by the ``anthropic`` SDK's
documented types (``CacheMissReason``): the server compares the prompt
fingerprint of the named response's request with this one's, in the cache's
order, and names the first difference:

- ``model_changed`` (the model), ``tools_changed``, ``system_changed``, with
  ``cache_missed_input_tokens``: the previous request's tokens from the change
  on (what would have been read had the prefix matched);
- ``messages_changed``: model, system and tools match but an earlier message
  differs (not only messages appended); tokens likewise;
- ``unavailable``: model, system and tools match but another prompt-affecting
  parameter (``thinking``, ``tool_choice``, ``output_config``) differs;
- ``previous_message_not_found``: the server keeps no record of that id.

No divergence (this request only appends to the previous one): ``diagnostics``
is null, as the API answers. ``previous_message_id: null`` opts in with
nothing to compare (null too).
"""

from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import attrs

from runtime.sim.errors import invalid_request
from runtime.sim.layout import Layout
from runtime.values.canonical import canonical_bytes

KEY_BYTES = 32
"""A prefix key's length in a fingerprint (a SHA-256 digest)."""


@attrs.frozen
class Fingerprint:
    """What a request's prompt was, tier by tier, as the cache reads it.

    Kept for every recent response (:class:`FingerprintLog`), so it is kept
    small: the tiers' prefix keys as raw SHA-256 digests, the tools and the
    system text each one digest of their blocks' keys (they are only compared
    whole), the messages' keys back to back in one ``bytes``.
    """

    model: str
    tools: bytes
    """The digest of the tools' block keys, in order."""
    tools_tokens: int
    system: bytes
    """The digest of the system blocks' keys, in order."""
    system_tokens: int
    seed: bytes
    message_keys: bytes
    """Per message, :data:`KEY_BYTES` each: the prefix key at its last block."""
    message_tokens: tuple[int, ...]
    """Per message: the prefix tokens through its last block."""
    total: int

    @property
    def messages(self) -> int:
        return len(self.message_tokens)

    def message_key(self, m: int) -> bytes:
        return self.message_keys[m * KEY_BYTES : (m + 1) * KEY_BYTES]


def _keys_digest(keys: list[str]) -> bytes:
    return hashlib.sha256("\x1e".join(keys).encode("ascii")).digest()


def fingerprint(payload: Mapping[str, Any], layout: Layout) -> Fingerprint:
    tools = [b for b in layout.blocks if b.location[0] == "tools"]
    system = [b for b in layout.blocks if b.location[0] == "system"]
    ends: dict[int, tuple[str, int]] = {}
    for block in layout.blocks:
        if block.location[0] == "messages":
            ends[block.location[1]] = (block.key, block.prefix_tokens)
    config = payload.get("output_config")
    seed = canonical_bytes([payload.get("thinking"), payload.get("tool_choice"), config])
    ordered = [ends[m] for m in sorted(ends)]
    return Fingerprint(
        model=sys.intern(str(payload["model"])),
        tools=_keys_digest([b.key for b in tools]),
        tools_tokens=tools[-1].prefix_tokens if tools else 0,
        system=_keys_digest([b.key for b in system]),
        system_tokens=system[-1].prefix_tokens if system else (tools[-1].prefix_tokens if tools else 0),
        seed=hashlib.sha256(seed).digest(),
        message_keys=b"".join(bytes.fromhex(key) for key, _ in ordered),
        message_tokens=tuple(tokens for _, tokens in ordered),
        total=layout.total_tokens,
    )


def previous_id(payload: Mapping[str, Any]) -> tuple[bool, str | None]:
    """Whether the request asks for diagnostics, and the previous message id it names."""
    value = payload.get("diagnostics")
    if value is None:
        return False, None
    if not isinstance(value, Mapping) or set(value) - {"previous_message_id"}:
        raise invalid_request(f"diagnostics: expected {{'previous_message_id': 'msg_...' or null}}, got {value!r}")
    named = value.get("previous_message_id")
    if named is not None and (not isinstance(named, str) or not named or len(named) > 256):
        raise invalid_request(f"diagnostics.previous_message_id: expected a message id or null, got {named!r}")
    return True, named


def cache_miss_reason(previous: Fingerprint | None, current: Fingerprint) -> dict[str, Any] | None:
    """The reason the prefix of ``previous`` could not be reused by ``current`` (None: no divergence)."""
    if previous is None:
        return {"type": "previous_message_not_found"}
    if previous.model != current.model:
        return _missed("model_changed", previous.total)
    if previous.tools != current.tools:
        return _missed("tools_changed", previous.total)
    if previous.system != current.system:
        return _missed("system_changed", previous.total - previous.tools_tokens)
    if previous.seed != current.seed:
        return {"type": "unavailable"}
    for m in range(previous.messages):
        if m >= current.messages or current.message_key(m) != previous.message_key(m):
            kept = previous.message_tokens[m - 1] if m > 0 else previous.system_tokens
            return _missed("messages_changed", previous.total - kept)
    return None


def _missed(kind: str, tokens: int) -> dict[str, Any]:
    return {"type": kind, "cache_missed_input_tokens": max(0, tokens)}


@attrs.define(eq=False)
class FingerprintLog:
    """The fingerprints of the most recent responses, by message id (the least recent is forgotten)."""

    limit: int = 10_000
    _by_id: OrderedDict[str, Fingerprint] = attrs.field(factory=OrderedDict, init=False)

    def remember(self, message_id: str, print_: Fingerprint) -> None:
        self._by_id[message_id] = print_
        self._by_id.move_to_end(message_id)
        while len(self._by_id) > self.limit:
            self._by_id.popitem(last=False)

    def get(self, message_id: str) -> Fingerprint | None:
        return self._by_id.get(message_id)
