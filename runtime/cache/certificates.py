"""Prefix certificates: a running SHA-256 through every block of a request.

Equal certificates mean two requests are byte-identical (as the API reads
them) through that block; they say nothing about whether the provider still
holds an entry there.

The hash runs in three tiers, in API order:

- the **tools** tier is seeded with the certificate format version, the model,
  the ``thinking`` setting and ``output_config.effort`` (thinking and effort sit
  here, the conservative choice, until a rule per model is documented);
- the **system** tier continues the tools tier and adds ``speed`` when present;
- the **messages** tier continues the system tier and adds ``tool_choice``.
  Each message first adds a boundary token carrying every field of the message
  except its content (the role, and anything else present), so a block moved
  across a message boundary, or an inserted message, changes every later
  certificate.

The only edit before hashing is removing ``cache_control`` from the block
itself; string content certifies as the one text block the API reads it as.
Every token is one canonical JSON array, so the concatenation is unambiguous.

Each block also gets its lookback *position*: the index the provider's
20-position lookback counts in. With ``collapse_runs`` (the default, the
current API rule) a run of consecutive ``tool_use`` blocks, or of
``tool_result`` blocks, inside one message is one position.

Cost: one canonical JSON encoding and one hash update per block.
:func:`certify_payload` can also reuse an earlier result for the unchanged
part of the next request; see there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from runtime.cache.blocks import (
    RUN_KINDS,
    Location,
    as_payload,
    content_blocks,
    is_markable,
    messages_of,
    system_blocks,
    tools_of,
    without_cache_control,
)
from runtime.cache.errors import CacheInputError
from runtime.canonical import canonical_bytes

CERTIFICATE_FORMAT = "foldline.cache.certificate/1"

_TOOL = b'["tool",'
_SYSTEM = b'["system",'
_MESSAGE = b'["message",'
_BLOCK = b'["block",'
_END = b"]"


@attrs.frozen(slots=True)
class BlockRef:
    """One block of a request: where it is, its prefix certificate, its lookback position.

    ``kind`` is the block's ``type`` (``"tool"`` for a tool definition);
    ``markable`` is False for thinking blocks and blank text blocks, which
    take no cache mark.
    """

    location: Location
    certificate: str
    position: int
    kind: str
    markable: bool = True

    @property
    def tier(self) -> str:
        """``"tools"``, ``"system"`` or ``"messages"``."""
        return self.location[0]


@attrs.frozen(eq=False)
class CertifiedPayload:
    """The certificates of one payload, with what a later certification reuses.

    ``refs`` holds one :class:`BlockRef` per block, in API order. The other
    fields are private to :func:`certify_payload`: digests of the stable part
    and of each message (to recognise an unchanged prefix), and the hash state
    and lookback position after the stable part and after each message. A
    result holds every block ref of its payload: keep the latest one for
    reuse, not one per request.
    """

    refs: tuple[BlockRef, ...]
    collapse_runs: bool
    _stable_key: bytes = attrs.field(repr=False)
    _message_keys: tuple[bytes, ...] = attrs.field(repr=False)
    _ends: tuple[int, ...] = attrs.field(repr=False)
    _states: tuple[Any, ...] = attrs.field(repr=False)
    _positions: tuple[int, ...] = attrs.field(repr=False)

    def reused_messages(self, previous: CertifiedPayload | None) -> int:
        """How many leading messages this result shares with ``previous`` (for diagnostics)."""
        if previous is None or previous._stable_key != self._stable_key:
            return 0
        count = 0
        for mine, theirs in zip(self._message_keys, previous._message_keys):
            if mine != theirs:
                break
            count += 1
        return count


def certify(payload: Mapping[str, Any], *, collapse_runs: bool = True) -> tuple[BlockRef, ...]:
    """The prefix certificates of every block of ``payload``, in API order."""
    return certify_payload(payload, collapse_runs=collapse_runs).refs


def certify_payload(
    payload: Mapping[str, Any],
    *,
    collapse_runs: bool = True,
    previous: CertifiedPayload | None = None,
) -> CertifiedPayload:
    """Certify ``payload``, reusing ``previous`` for the prefix the two share.

    Reuse is exact, never assumed: the stable part (seeds, tools, system,
    tool_choice) and each leading message are compared by the SHA-256 of their
    canonical bytes with the previous payload's, and only an identical prefix is taken
    over; from the first difference on every block is certified afresh. The
    result is always equal to certifying ``payload`` from scratch.
    """
    payload = as_payload(payload)
    tools = tools_of(payload)
    system = system_blocks(payload)
    messages = messages_of(payload)
    output_config = payload.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, Mapping) else None
    tools_seed = {
        "format": CERTIFICATE_FORMAT,
        "model": payload.get("model"),
        "thinking": payload.get("thinking"),
        "effort": effort,
    }
    system_seed = {"speed": payload["speed"]} if "speed" in payload else {}
    messages_seed = {"tool_choice": payload["tool_choice"]} if "tool_choice" in payload else {}
    try:
        return _certify(tools, system, messages, tools_seed, system_seed, messages_seed, collapse_runs, previous)
    except CacheInputError:
        raise
    except (ValueError, TypeError) as exc:
        raise CacheInputError(f"payload holds a value with no canonical JSON form ({exc}); expected JSON data") from exc


def _certify(
    tools: Sequence[Mapping[str, Any]],
    system: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    tools_seed: dict[str, Any],
    system_seed: dict[str, Any],
    messages_seed: dict[str, Any],
    collapse_runs: bool,
    previous: CertifiedPayload | None,
) -> CertifiedPayload:
    # Keys are digests, so a kept result costs a few dozen bytes per message.
    stable_key = _sha(canonical_bytes([tools_seed, list(tools), list(system), system_seed, messages_seed]))
    message_keys = tuple(_sha(canonical_bytes(message)) for message in messages)

    if previous is not None and (previous.collapse_runs != collapse_runs or previous._stable_key != stable_key):
        previous = None

    refs: list[BlockRef] = []
    ends: list[int] = []
    states: list[Any] = []
    positions: list[int] = []
    start = 0
    if previous is not None:
        while (
            start < len(message_keys)
            and start < len(previous._message_keys)
            and message_keys[start] == previous._message_keys[start]
        ):
            start += 1
        # Index 0 of the saved lists is the state after the stable part; index
        # m + 1 the state after message m.
        refs.extend(previous.refs[: previous._ends[start]])
        ends.extend(previous._ends[: start + 1])
        states.extend(previous._states[: start + 1])
        positions.extend(previous._positions[: start + 1])
        hasher = previous._states[start].copy()
        position = previous._positions[start]
    else:
        hasher = hashlib.sha256()
        position = -1
        hasher.update(canonical_bytes(["tools", tools_seed]))
        for i, tool in enumerate(tools):
            hasher.update(_TOOL + canonical_bytes(without_cache_control(tool)) + _END)
            position += 1
            refs.append(BlockRef(("tools", i), hasher.hexdigest(), position, "tool", True))
        hasher.update(canonical_bytes(["system", system_seed]))
        for i, block in enumerate(system):
            hasher.update(_SYSTEM + canonical_bytes(without_cache_control(block)) + _END)
            position += 1
            refs.append(BlockRef(("system", i), hasher.hexdigest(), position, block["type"], is_markable(block)))
        hasher.update(canonical_bytes(["messages", messages_seed]))
        ends.append(len(refs))
        states.append(hasher.copy())
        positions.append(position)

    for m in range(start, len(messages)):
        message = messages[m]
        envelope = {k: v for k, v in message.items() if k != "content"}
        hasher.update(_MESSAGE + canonical_bytes(envelope) + _END)
        previous_kind = None
        for b, block in enumerate(content_blocks(message["content"], f"messages[{m}].content")):
            kind = block["type"]
            hasher.update(_BLOCK + canonical_bytes(without_cache_control(block)) + _END)
            if not (collapse_runs and kind == previous_kind and kind in RUN_KINDS):
                position += 1
            previous_kind = kind
            refs.append(BlockRef(("messages", m, b), hasher.hexdigest(), position, kind, is_markable(block)))
        ends.append(len(refs))
        states.append(hasher.copy())
        positions.append(position)

    return CertifiedPayload(
        refs=tuple(refs),
        collapse_runs=collapse_runs,
        stable_key=stable_key,
        message_keys=message_keys,
        ends=tuple(ends),
        states=tuple(states),
        positions=tuple(positions),
    )


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def refs_by_location(refs: Sequence[BlockRef]) -> dict[Location, BlockRef]:
    """Index block refs by location."""
    return {ref.location: ref for ref in refs}
