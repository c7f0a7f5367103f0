"""One row of a branch's cache ledger: what is known of one provider cache entry."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from runtime.cache.errors import CacheInputError
from runtime.cache.marks import TTL_SECONDS, Lifetime, check_lifetime

TIERS = ("tools", "system", "messages")


def _seen_converter(value: Iterable[tuple[str, str]] | Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    pairs = value.items() if isinstance(value, Mapping) else value
    seen = dict(pairs)
    return tuple(sorted(seen.items()))


@attrs.frozen
class LedgerRow:
    """One entry a completed request of this branch wrote or read, keyed by its certificate.

    - ``lifetime``: ``"5m"`` or ``"1h"``; ``tier``: where its block is.
    - ``stored_length``: the tokens of the prefix through the entry, when a
      response told us (None when unknown).
    - ``last_marked`` / ``last_read``: attempt start times (``last_read`` None
      until a read of it was identified).
    - ``expires_at``: when the provider drops it unless read again; the row is
      live while ``now < expires_at``.
    - ``seen``: per route (an account name, or ``"direct"``), the id of the
      process that saw the entry written or read there. This is the evidence:
      a row copied into another process, a clone or a restored branch carries
      none that counts there.
    """

    certificate: str
    lifetime: Lifetime
    tier: str
    stored_length: int | None
    last_marked: float
    last_read: float | None
    expires_at: float
    seen: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_seen_converter)

    def __attrs_post_init__(self) -> None:
        check_lifetime(self.lifetime, what=f"ledger row {self.certificate[:12]} lifetime")
        if self.tier not in TIERS:
            raise CacheInputError(f"ledger row tier {self.tier!r} is not one of {', '.join(TIERS)}")
        if self.stored_length is not None and (
            isinstance(self.stored_length, bool) or not isinstance(self.stored_length, int) or self.stored_length < 0
        ):
            raise CacheInputError(f"ledger row stored_length {self.stored_length!r} is not a token count >= 0 or None")

    def live(self, now: float) -> bool:
        """Whether the entry may still be held at ``now``."""
        return now < self.expires_at

    def seen_by(self, route: str) -> str | None:
        """The process that saw this entry on ``route``, or None."""
        for seen_route, process_id in self.seen:
            if seen_route == route:
                return process_id
        return None

    def established_routes(self, process_id: str) -> tuple[str, ...]:
        """The routes on which ``process_id`` itself saw this entry written or read."""
        return tuple(route for route, seen_process in self.seen if seen_process == process_id)

    def established(self, routes: Iterable[str], process_id: str) -> bool:
        """Whether ``process_id`` saw the entry on every one of ``routes``."""
        mine = set(self.established_routes(process_id))
        return all(route in mine for route in routes)

    def seen_on(self, route: str, process_id: str) -> LedgerRow:
        """This row with ``process_id`` recorded as having seen it on ``route``."""
        seen = dict(self.seen)
        seen[route] = process_id
        return attrs.evolve(self, seen=seen)

    def refreshed(self, start: float) -> LedgerRow:
        """This row after a read starting at ``start`` (a read renews the lifetime)."""
        return attrs.evolve(
            self,
            last_read=start,
            expires_at=max(self.expires_at, start + TTL_SECONDS[self.lifetime]),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "certificate": self.certificate,
            "lifetime": self.lifetime,
            "tier": self.tier,
            "stored_length": self.stored_length,
            "last_marked": self.last_marked,
            "last_read": self.last_read,
            "expires_at": self.expires_at,
            "seen": dict(self.seen),
        }
