"""A request laid out the way the prompt cache sees it (pure).

The blocks of a request in API order: each tool, then each system block, then
each message's content blocks. For every block the layout holds its token
count, the tokens of the prefix through it, its prefix key and its lookback
position, and the cache mark on it, if any.

Prefix keys are a running SHA-256 in three tiers, so a change invalidates
exactly what the API's hierarchy says it does: the tools tier is seeded with
the model and a structured output's ``output_config.format`` (a change of
either, or of the tools, invalidates everything), the system tier chains on
from the tools, and the messages tier is seeded with ``tool_choice``, the
thinking parameters and ``output_config.effort`` (a change of those
invalidates the messages only); each message adds a boundary token with its
role.

Marks are the explicit ``cache_control`` of blocks plus the top-level
(automatic) ``cache_control``, which lands on the last cacheable block. Every
rule the API enforces on marks is enforced here with its 400.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from runtime.sim.errors import invalid_request
from runtime.sim.tokens import MESSAGE_OVERHEAD_TOKENS, SimTokenCounter, block_digest
from runtime.values.canonical import canonical_json, sha256_hex

MAX_MARKS = 4
LOOKBACK_POSITIONS = 20
"""A mark's lookup checks at most this many positions, its own included."""
TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
RUN_TYPES = frozenset({"tool_use", "tool_result"})
UNCACHEABLE_TYPES = frozenset({"thinking", "redacted_thinking"})
KEY_FORMAT = "foldline-sim-prefix/1"

Location = tuple[Any, ...]


@attrs.frozen
class LaidBlock:
    """One block of the request as the cache sees it."""

    index: int
    location: Location
    type: str
    tokens: int
    prefix_tokens: int
    key: str
    position: int
    mark_ttl: str | None = None
    automatic: bool = False


@attrs.frozen
class Layout:
    """A request's blocks in API order, with marks; ``total_tokens`` is the whole input."""

    model: str
    blocks: tuple[LaidBlock, ...]
    total_tokens: int

    @property
    def marks(self) -> tuple[LaidBlock, ...]:
        return tuple(block for block in self.blocks if block.mark_ttl is not None)

    def lookback(self, index: int) -> Iterator[LaidBlock]:
        """Blocks a mark at ``index`` checks, nearest first: its own and back to 20 positions."""
        limit = self.blocks[index].position - LOOKBACK_POSITIONS
        for j in range(index, -1, -1):
            block = self.blocks[j]
            if block.position <= limit:
                return
            yield block

    def block_at(self, location: Location) -> LaidBlock:
        for block in self.blocks:
            if block.location == location:
                return block
        raise KeyError(f"no block at {location!r} in this request")


def location_path(location: Location) -> str:
    """The API's dotted path of a block location: ``messages.2.content.0``."""
    if location[0] == "messages":
        return f"messages.{location[1]}.content.{location[2]}"
    return f"{location[0]}.{location[1]}"


def build_layout(payload: Mapping[str, Any], counter: SimTokenCounter, *, lookback_collapse: bool) -> Layout:
    """Lay out a validated, normalized request (see :func:`runtime.sim.validation.validate_request`)."""
    model = payload["model"]
    raw: list[tuple[Location, Mapping[str, Any], int]] = []
    for i, tool in enumerate(payload.get("tools") or ()):
        raw.append((("tools", i), tool, 0))
    for i, block in enumerate(payload.get("system") or ()):
        raw.append((("system", i), block, 0))
    for m, message in enumerate(payload["messages"]):
        for b, block in enumerate(message["content"]):
            raw.append((("messages", m, b), block, MESSAGE_OVERHEAD_TOKENS if b == 0 else 0))

    explicit = [_explicit_ttl(location, block) for location, block, _ in raw]
    marks = _with_automatic(payload.get("cache_control"), raw, explicit)
    _check_ttl_order(raw, marks)

    key = sha256_hex(canonical_json([KEY_FORMAT, "tools", model, *_format_seed(payload)]))
    tier = "tools"
    blocks: list[LaidBlock] = []
    prefix = 0
    position = 0
    previous: tuple[Location, str] | None = None
    for index, (location, block, overhead) in enumerate(raw):
        if location[0] != tier:
            key = _enter_tier(key, location[0], tier, payload)
            tier = location[0]
        if location[0] == "messages" and location[2] == 0:
            key = sha256_hex(canonical_json(["message", key, payload["messages"][location[1]]["role"]]))
        digest = block_digest(block)
        key = sha256_hex(f"{key}:{digest}")
        tokens = counter.block_tokens(block, digest) + overhead
        prefix += tokens
        kind = "tool" if location[0] == "tools" else block["type"]
        same_run = (
            lookback_collapse
            and previous is not None
            and kind in RUN_TYPES
            and previous[1] == kind
            and previous[0][:2] == location[:2]
        )
        if not same_run:
            position += 1
        previous = (location, kind)
        ttl, automatic = marks[index]
        blocks.append(LaidBlock(index, location, kind, tokens, prefix, key, position, ttl, automatic))
    return Layout(model=model, blocks=tuple(blocks), total_tokens=prefix)


def _format_seed(payload: Mapping[str, Any]) -> list[Any]:
    """A structured output's format seeds the whole prefix: changing it invalidates the cache (the docs' rule)."""
    output_config = payload.get("output_config")
    form = output_config.get("format") if isinstance(output_config, Mapping) else None
    return [["format", form]] if form is not None else []


def _enter_tier(key: str, new_tier: str, old_tier: str, payload: Mapping[str, Any]) -> str:
    # A tier seed is applied even when a tier is empty, so "no system" and
    # "empty system" lay out the same and the messages tier is always seeded.
    if old_tier == "tools":
        key = sha256_hex(canonical_json(["system", key]))
        if new_tier == "system":
            return key
    output_config = payload.get("output_config")
    effort = output_config.get("effort") if isinstance(output_config, Mapping) else None
    return sha256_hex(canonical_json(["messages", key, payload.get("tool_choice"), payload.get("thinking"), effort]))


def _explicit_ttl(location: Location, block: Mapping[str, Any]) -> str | None:
    value = block.get("cache_control")
    if value is None:
        return None
    where = f"{location_path(location)}.cache_control"
    ttl = parse_cache_control(value, where)
    reason = _uncacheable_reason(location, block)
    if reason is not None:
        raise invalid_request(f"{where}: cache_control cannot be set {reason}")
    return ttl


def parse_cache_control(value: Any, where: str) -> str:
    """The TTL (``"5m"`` or ``"1h"``) of a ``cache_control`` object, or a 400 naming ``where``."""
    if not isinstance(value, dict):
        raise invalid_request(f"{where}: expected an object like {{'type': 'ephemeral'}}, got {value!r}")
    for extra in value:
        if extra not in ("type", "ttl"):
            raise invalid_request(f"{where}.{extra}: Extra inputs are not permitted")
    if value.get("type") != "ephemeral":
        raise invalid_request(f"{where}.type: Input should be 'ephemeral', got {value.get('type')!r}")
    ttl = value.get("ttl", "5m")
    if not isinstance(ttl, str) or ttl not in TTL_SECONDS:
        raise invalid_request(f"{where}.ttl: Input should be '5m' or '1h', got {ttl!r}")
    return ttl


def _uncacheable_reason(location: Location, block: Mapping[str, Any]) -> str | None:
    if location[0] == "tools":
        return None
    kind = block.get("type")
    if kind in UNCACHEABLE_TYPES:
        return f"on {kind} blocks"
    if kind == "text" and not block.get("text"):
        return "for empty text blocks"
    return None


def _too_many(found: int) -> Exception:
    return invalid_request(f"A maximum of {MAX_MARKS} blocks with cache_control may be provided. Found {found}.")


def _with_automatic(
    top_level: Any, raw: list[tuple[Location, Mapping[str, Any], int]], explicit: list[str | None]
) -> list[tuple[str | None, bool]]:
    marks: list[tuple[str | None, bool]] = [(ttl, False) for ttl in explicit]
    found = sum(1 for ttl in explicit if ttl is not None)
    if found > MAX_MARKS:
        raise _too_many(found)
    if top_level is None:
        return marks
    ttl = parse_cache_control(top_level, "cache_control")
    # The automatic mark goes on the last cacheable block, walking back over
    # ineligible ones; with none eligible the request is simply not cached.
    for index in range(len(raw) - 1, -1, -1):
        location, block, _ = raw[index]
        if _uncacheable_reason(location, block) is not None:
            continue
        existing = explicit[index]
        if existing is not None:
            if existing != ttl:
                raise invalid_request(
                    f"cache_control: the top-level cache_control (ttl {ttl!r}) conflicts with the cache_control "
                    f"(ttl {existing!r}) on the last cacheable block, {location_path(location)}"
                )
            return marks
        if found >= MAX_MARKS:
            raise _too_many(found + 1)
        marks[index] = (ttl, True)
        return marks
    return marks


def _check_ttl_order(raw: list[tuple[Location, Mapping[str, Any], int]], marks: list[tuple[str | None, bool]]) -> None:
    first_short: Location | None = None
    for (location, _, _), (ttl, automatic) in zip(raw, marks, strict=True):
        if ttl == "5m" and first_short is None:
            first_short = location
        elif ttl == "1h" and first_short is not None:
            where = "the top-level cache_control" if automatic else location_path(location)
            raise invalid_request(
                "Cache entries with longer TTL must appear before shorter TTLs: a '1h' cache_control at "
                f"{where} comes after a '5m' one at {location_path(first_short)}"
            )
