"""The prompt-cache rules of the simulated server (pure: ``now`` is an argument).

Given a request's :class:`~runtime.sim.layout.Layout`, :meth:`CacheEngine.apply`
decides what the request reads and writes, updates the store, and returns the
usage split the API reports:

- Only marks whose prefix is at least the model's minimum take part; below it
  a mark neither reads nor writes, and there is no error.
- Each taking-part mark looks up its own prefix key, then walks back one
  position at a time, at most 20 positions counting its own. It reads the
  first entry that is readable (its writer's response has begun:
  ``readable_at <= now``) and not expired (``now < expires_at``).
- A = the deepest block read; B = the deepest 1h mark after A; C = the last
  mark. Billed: read = tokens through A, 1h write = B - A, 5m write =
  C - max(A, B), input = tokens after C (all tokens when nothing takes part).
- Entries are written at every taking-part mark after A, with the mark's TTL,
  lifetime measured from the request's start (``now``). A read refreshes the
  entry it read: its lifetime restarts at ``now``.
- The store is scoped by (API key, model); expired entries are dropped.

A 1h mark that reads a 5m entry at its own block does not upgrade that
entry's lifetime: nothing is written there, so nothing is billed as a 1h write.
"""

from __future__ import annotations

from typing import Any

import attrs

from runtime.sim.layout import TTL_SECONDS, LaidBlock, Layout, Location


@attrs.frozen
class CacheEntry:
    """A cached prefix. Times are the server clock's seconds."""

    key: str
    ttl: str
    prefix_tokens: int
    location: Location
    written_at: float
    readable_at: float
    expires_at: float
    last_touch: float

    def readable(self, now: float) -> bool:
        return self.readable_at <= now < self.expires_at


@attrs.frozen
class CacheOutcome:
    """What one request read and wrote, and its usage split (output tokens excluded)."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_write_5m_tokens: int
    cache_write_1h_tokens: int
    read_location: Location | None
    written: tuple[Location, ...]
    refreshed: tuple[Location, ...]

    @classmethod
    def uncached(cls, total_tokens: int) -> CacheOutcome:
        return cls(total_tokens, 0, 0, 0, None, (), ())

    def usage_fields(self) -> dict[str, Any]:
        """The API's usage fields for input and cache (``output_tokens`` is the caller's)."""
        return {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_write_5m_tokens + self.cache_write_1h_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_write_5m_tokens,
                "ephemeral_1h_input_tokens": self.cache_write_1h_tokens,
            },
        }


Scope = tuple[str, str]


@attrs.define(eq=False)
class CacheEngine:
    """The cache store, scoped by (API key, model), and the rules that read and write it."""

    _scopes: dict[Scope, dict[str, CacheEntry]] = attrs.field(factory=dict, init=False)

    def entries(self, api_key: str, model: str) -> tuple[CacheEntry, ...]:
        """The entries stored for (``api_key``, ``model``), shortest prefix first (expired ones included
        until the next request of that scope drops them)."""
        store = self._scopes.get((api_key, model), {})
        return tuple(sorted(store.values(), key=lambda entry: (entry.prefix_tokens, entry.key)))

    def apply(self, api_key: str, layout: Layout, *, min_tokens: int, now: float, readable_at: float) -> CacheOutcome:
        """Read and write for one request that started at ``now`` and whose response begins at
        ``readable_at`` (>= ``now``); return the usage split."""
        if readable_at < now:
            raise ValueError(f"CacheEngine.apply: readable_at {readable_at!r} is before the request start {now!r}")
        store = self._scopes.setdefault((api_key, layout.model), {})
        for key in [key for key, entry in store.items() if entry.expires_at <= now]:
            del store[key]

        marks = [mark for mark in layout.marks if mark.prefix_tokens >= min_tokens]
        if not marks:
            return CacheOutcome.uncached(layout.total_tokens)

        hits: dict[int, CacheEntry] = {}
        for mark in marks:
            hit = _lookup(layout, mark, store, now)
            if hit is not None:
                hits[hit[0].index] = hit[1]
        a = layout.blocks[max(hits)] if hits else None
        read = a.prefix_tokens if a is not None else 0
        after_a = [mark for mark in marks if a is None or mark.index > a.index]
        one_hour = [mark for mark in after_a if mark.mark_ttl == "1h"]
        b_tokens = one_hour[-1].prefix_tokens if one_hour else read
        c = marks[-1]
        outcome = CacheOutcome(
            input_tokens=layout.total_tokens - c.prefix_tokens,
            cache_read_input_tokens=read,
            cache_write_5m_tokens=max(0, c.prefix_tokens - b_tokens),
            cache_write_1h_tokens=b_tokens - read,
            read_location=a.location if a is not None else None,
            written=tuple(mark.location for mark in after_a),
            refreshed=tuple(layout.blocks[index].location for index in sorted(hits)),
        )
        for entry in hits.values():
            store[entry.key] = attrs.evolve(entry, expires_at=now + TTL_SECONDS[entry.ttl], last_touch=now)
        for mark in after_a:
            store[mark.key] = _written(store.get(mark.key), mark, now, readable_at)
        return outcome


def _lookup(
    layout: Layout, mark: LaidBlock, store: dict[str, CacheEntry], now: float
) -> tuple[LaidBlock, CacheEntry] | None:
    for block in layout.lookback(mark.index):
        entry = store.get(block.key)
        if entry is not None and entry.readable(now):
            return block, entry
    return None


def _written(existing: CacheEntry | None, mark: LaidBlock, now: float, readable_at: float) -> CacheEntry:
    assert mark.mark_ttl is not None
    entry = CacheEntry(
        key=mark.key,
        ttl=mark.mark_ttl,
        prefix_tokens=mark.prefix_tokens,
        location=mark.location,
        written_at=now,
        readable_at=readable_at,
        expires_at=now + TTL_SECONDS[mark.mark_ttl],
        last_touch=now,
    )
    if existing is None:
        return entry
    # A concurrent writer of the same prefix whose response has not begun yet:
    # both pay the write; the entry becomes readable when the first response
    # begins and lives as long as the longer-lived write.
    longer = entry if entry.expires_at >= existing.expires_at else existing
    return attrs.evolve(longer, readable_at=min(existing.readable_at, readable_at), written_at=now, last_touch=now)
