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
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
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
from runtime.request.prepared import (
    ABSENT,
    PreparedBlock,
    PreparedMessage,
    PreparedPayload,
)
from runtime.values.canonical import canonical_bytes
from runtime.values.prefix import common_prefix

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
    fields are private to :func:`certify_payload`: keys of the stable part
    and of each message (to recognise an unchanged prefix: digests of their
    canonical bytes for a mapping, the caller's message keys for a
    :class:`~runtime.request.prepared.PreparedPayload`), the hash state and
    lookback position after the stable part and after each message, and an
    index of refs by certificate. A result holds every block ref of its
    payload: keep the latest one for reuse, not one per request.
    """

    refs: tuple[BlockRef, ...]
    collapse_runs: bool
    _stable_key: bytes = attrs.field(repr=False)
    _message_keys: tuple[Hashable, ...] = attrs.field(repr=False)
    _ends: tuple[int, ...] = attrs.field(repr=False)
    _states: tuple[Any, ...] = attrs.field(repr=False)
    _positions: tuple[int, ...] = attrs.field(repr=False)
    _by_certificate: dict[str, int] = attrs.field(repr=False)
    _tool_count: int = attrs.field(repr=False)

    def reused_messages(self, previous: CertifiedPayload | None) -> int:
        """How many leading messages this result shares with ``previous`` (for diagnostics)."""
        if previous is None or previous._stable_key != self._stable_key:
            return 0
        return common_prefix(self._message_keys, previous._message_keys)

    @property
    def message_count(self) -> int:
        return len(self._ends) - 1

    @property
    def stable_refs(self) -> tuple[BlockRef, ...]:
        """The refs of the tools and system blocks (the stable part), in API order."""
        return self.refs[: self._ends[0]]

    def ref_at(self, location: Location) -> BlockRef | None:
        """The ref at ``location``, or None when the payload has no block there."""
        tier = location[0]
        if tier == "messages":
            if len(location) != 3:
                return None
            m, b = location[1], location[2]
            if not (0 <= m < len(self._ends) - 1) or b < 0 or self._ends[m] + b >= self._ends[m + 1]:
                return None
            return self.refs[self._ends[m] + b]
        if len(location) != 2 or location[1] < 0:
            return None
        if tier == "tools":
            index = location[1]
            return self.refs[index] if index < self._tool_count else None
        if tier == "system":
            index = self._tool_count + location[1]
            return self.refs[index] if index < self._ends[0] else None
        return None

    def by_location(self) -> Mapping[Location, BlockRef]:
        """The refs as a read-only mapping by location (looked up, not built)."""
        return _RefsByLocation(self)

    def index_of(self, certificate: str) -> int | None:
        """The position in ``refs`` of the block with ``certificate``, or None."""
        return self._by_certificate.get(certificate)


class _RefsByLocation(Mapping[Location, BlockRef]):
    def __init__(self, certified: CertifiedPayload) -> None:
        self._certified = certified

    def __getitem__(self, location: Location) -> BlockRef:
        ref = self._certified.ref_at(location) if isinstance(location, tuple) and location else None
        if ref is None:
            raise KeyError(location)
        return ref

    def __iter__(self) -> Iterator[Location]:
        return (ref.location for ref in self._certified.refs)

    def __len__(self) -> int:
        return len(self._certified.refs)


def certify(payload: Mapping[str, Any] | PreparedPayload, *, collapse_runs: bool = True) -> tuple[BlockRef, ...]:
    """The prefix certificates of every block of ``payload``, in API order."""
    return certify_payload(payload, collapse_runs=collapse_runs).refs


def certify_payload(
    payload: Mapping[str, Any] | PreparedPayload,
    *,
    collapse_runs: bool = True,
    previous: CertifiedPayload | None = None,
) -> CertifiedPayload:
    """Certify ``payload``, reusing ``previous`` for the prefix the two share.

    Reuse is exact, never assumed: the stable part (seeds, tools, system,
    tool_choice) and each leading message are compared by the SHA-256 of their
    canonical bytes with the previous payload's (a
    :class:`~runtime.request.prepared.PreparedPayload`'s messages by their keys),
    and only an identical prefix is taken over; from the first difference on
    every block is certified afresh. The result is always equal to certifying
    ``payload`` from scratch.
    """
    source = _prepared_source(payload) if isinstance(payload, PreparedPayload) else _mapping_source(as_payload(payload))
    try:
        return _certify(source, collapse_runs, previous)
    except CacheInputError:
        raise
    except (ValueError, TypeError) as exc:
        raise CacheInputError(f"payload holds a value with no canonical JSON form ({exc}); expected JSON data") from exc


@attrs.frozen(eq=False)
class _Source:
    """What certification reads, whichever shape the payload came in."""

    stable_key: Callable[[], bytes]
    seeds: tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
    tools: Callable[[], Sequence[PreparedBlock]]
    system: Callable[[], Sequence[PreparedBlock]]
    keys: Callable[[], tuple[Hashable, ...]]
    message: Callable[[int], PreparedMessage]
    match: Callable[[tuple[Hashable, ...], tuple[Hashable, ...]], int]


def _seeds(model: Any, thinking: Any, effort: Any, speed: Any, tool_choice: Any) -> tuple[dict[str, Any], ...]:
    tools_seed = {"format": CERTIFICATE_FORMAT, "model": model, "thinking": thinking, "effort": effort}
    system_seed = {} if speed is ABSENT else {"speed": speed}
    messages_seed = {} if tool_choice is ABSENT else {"tool_choice": tool_choice}
    return tools_seed, system_seed, messages_seed


def _mapping_source(payload: Mapping[str, Any]) -> _Source:
    tools = tools_of(payload)
    system = system_blocks(payload)
    messages = messages_of(payload)
    output_config = payload.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, Mapping) else None
    seeds = _seeds(
        payload.get("model"),
        payload.get("thinking"),
        effort,
        payload.get("speed", ABSENT),
        payload.get("tool_choice", ABSENT),
    )

    def message(m: int) -> PreparedMessage:
        envelope = {k: v for k, v in messages[m].items() if k != "content"}
        return PreparedMessage(
            canonical_bytes(envelope),
            tuple(_mapping_block(block) for block in content_blocks(messages[m]["content"], f"messages[{m}].content")),
        )

    def match(keys: tuple[Hashable, ...], previous: tuple[Hashable, ...]) -> int:
        start = 0
        while start < len(keys) and start < len(previous) and keys[start] == previous[start]:
            start += 1
        return start

    return _Source(
        stable_key=lambda: _sha(canonical_bytes([seeds[0], list(tools), list(system), seeds[1], seeds[2]])),
        seeds=seeds,  # type: ignore[arg-type]
        tools=lambda: tuple(PreparedBlock(canonical_bytes(without_cache_control(t)), "tool") for t in tools),
        system=lambda: tuple(_mapping_block(block) for block in system),
        keys=lambda: tuple(_sha(canonical_bytes(message)) for message in messages),
        message=message,
        match=match,
    )


def _mapping_block(block: Mapping[str, Any]) -> PreparedBlock:
    return PreparedBlock(canonical_bytes(without_cache_control(block)), block["type"], is_markable(block))


def _prepared_source(payload: PreparedPayload) -> _Source:
    seeds = _seeds(payload.model, payload.thinking, payload.effort, payload.speed, payload.tool_choice)

    def stable_key() -> bytes:
        hasher = hashlib.sha256(b"prepared\x00" + canonical_bytes(list(seeds)))
        for block in (*payload.tools, *payload.system):
            hasher.update(canonical_bytes([block.kind, block.markable, len(block.data)]) + block.data)
        return hasher.digest()

    return _Source(
        stable_key=stable_key,
        seeds=seeds,  # type: ignore[arg-type]
        tools=lambda: payload.tools,
        system=lambda: payload.system,
        keys=lambda: payload.keys,
        message=lambda m: payload.message(payload.keys[m]),
        match=lambda keys, previous: common_prefix(keys, previous),
    )


def _certify(source: _Source, collapse_runs: bool, previous: CertifiedPayload | None) -> CertifiedPayload:
    # Mapping keys are digests, so a kept result costs a few dozen bytes per message.
    stable_key = source.stable_key()
    message_keys = source.keys()
    if previous is not None and (previous.collapse_runs != collapse_runs or previous._stable_key != stable_key):
        previous = None
    start = 0
    if previous is not None:
        start = source.match(message_keys, previous._message_keys)
        # Index 0 of the saved lists is the state after the stable part; index
        # m + 1 the state after message m.
        kept = previous._ends[start]
        refs = list(previous.refs[:kept])
        ends = list(previous._ends[: start + 1])
        states = list(previous._states[: start + 1])
        positions = list(previous._positions[: start + 1])
        by_certificate = previous._by_certificate.copy()
        for ref in previous.refs[kept:]:
            by_certificate.pop(ref.certificate, None)
        hasher = previous._states[start].copy()
        position = previous._positions[start]
        tool_count = previous._tool_count
    else:
        refs, hasher, position = _certify_stable(source)
        tool_count = sum(1 for ref in refs if ref.location[0] == "tools")
        ends, states, positions = [len(refs)], [hasher.copy()], [position]
        by_certificate = {ref.certificate: i for i, ref in enumerate(refs)}

    for m in range(start, len(message_keys)):
        message = source.message(m)
        hasher.update(_MESSAGE + message.envelope + _END)
        previous_kind = None
        for b, block in enumerate(message.blocks):
            kind = block.kind
            hasher.update(_BLOCK + block.data + _END)
            if not (collapse_runs and kind == previous_kind and kind in RUN_KINDS):
                position += 1
            previous_kind = kind
            certificate = hasher.hexdigest()
            by_certificate[certificate] = len(refs)
            refs.append(BlockRef(("messages", m, b), certificate, position, kind, block.markable))
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
        by_certificate=by_certificate,
        tool_count=tool_count,
    )


def _certify_stable(source: _Source) -> tuple[list[BlockRef], Any, int]:
    """The refs of the tools and system blocks, the hash state after them and the last position."""
    tools_seed, system_seed, messages_seed = source.seeds
    refs: list[BlockRef] = []
    hasher = hashlib.sha256()
    position = -1
    hasher.update(canonical_bytes(["tools", tools_seed]))
    for i, tool in enumerate(source.tools()):
        hasher.update(_TOOL + tool.data + _END)
        position += 1
        refs.append(BlockRef(("tools", i), hasher.hexdigest(), position, "tool", True))
    hasher.update(canonical_bytes(["system", system_seed]))
    for i, block in enumerate(source.system()):
        hasher.update(_SYSTEM + block.data + _END)
        position += 1
        refs.append(BlockRef(("system", i), hasher.hexdigest(), position, block.kind, block.markable))
    hasher.update(canonical_bytes(["messages", messages_seed]))
    return refs, hasher, position


def _sha(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def refs_by_location(refs: Sequence[BlockRef]) -> dict[Location, BlockRef]:
    """Index block refs by location."""
    return {ref.location: ref for ref in refs}
