"""Judging a completed request's cache read against what its placement expected.

- ``read``: ``unevaluated`` when the attempt returned no complete usage. When
  g1 was met: ``at_or_above`` when the read is at least the target's stored
  length, ``below_expired`` when the attempt started at or after the
  target's evidence expired, ``below_live`` otherwise. Any other g1 outcome
  records the read size with no verdict (``read`` is None).
- ``hit``: ``identified`` (with the entry's certificate) only when exactly one
  landing entry established on the attempt's route has a stored length equal
  to the read and no landing entry deeper than it has an unknown length;
  ``none`` when nothing was read; else ``unidentified``. With a server tool in
  the request a read is always unidentified (its usage need not describe this
  request's prefix alone).
"""

from __future__ import annotations

import math
from typing import Literal

import attrs

from runtime.cache.blocks import api_order
from runtime.cache.errors import CacheInputError
from runtime.cache.record import Entry, Placement
from runtime.values.usage import Usage

ReadLabel = Literal["unevaluated", "at_or_above", "below_expired", "below_live"]
HitLabel = Literal["identified", "unidentified", "none"]


@attrs.frozen
class ReadVerdict:
    read: ReadLabel | None
    hit: HitLabel
    hit_certificate: str | None
    read_tokens: int | None

    def to_dict(self) -> dict[str, object]:
        return {
            "read": self.read,
            "read_tokens": self.read_tokens,
            "hit": self.hit,
            "hit_certificate": self.hit_certificate,
        }


def attempt_route(placement: Placement, route: str | None) -> str:
    """The route an attempt took: ``route``, or the placement's only route when None."""
    if route is None:
        if len(placement.routes) != 1:
            raise CacheInputError(
                f"route: the placement allows routes {list(placement.routes)!r}; name the one the attempt took"
            )
        return placement.routes[0]
    if route not in placement.routes:
        raise CacheInputError(
            f"route {route!r} is not one the request could take; expected one of {list(placement.routes)!r}"
        )
    return route


def evaluate_read(
    placement: Placement,
    usage: Usage | None,
    *,
    attempt_start: float | None = None,
    route: str | None = None,
) -> ReadVerdict:
    """The read and hit verdicts of one attempt of ``placement``.

    ``usage`` is None when the attempt returned no complete usage.
    ``attempt_start`` defaults to the placement's ``now``; ``route`` may be
    left out when the request had one route.
    """
    route = attempt_route(placement, route)
    start = placement.now if attempt_start is None else attempt_start
    if isinstance(start, bool) or not isinstance(start, (int, float)) or not math.isfinite(start):
        raise CacheInputError(f"attempt_start {start!r} is not a finite time")
    if usage is None:
        return ReadVerdict(read="unevaluated", hit="unidentified", hit_certificate=None, read_tokens=None)
    if not isinstance(usage, Usage):
        raise CacheInputError(f"usage is {type(usage).__name__}, expected runtime.values.usage.Usage or None")
    read_tokens = usage.cache_read_input_tokens
    read: ReadLabel | None = None
    target = placement.read_target
    if placement.g1.status == "met" and target is not None and target.stored_length is not None:
        if read_tokens >= target.stored_length:
            read = "at_or_above"
        elif start >= target.row.expires_at:
            read = "below_expired"
        else:
            read = "below_live"
    hit_entry = _identified(placement, read_tokens, route)
    if read_tokens == 0:
        hit: HitLabel = "none"
    elif hit_entry is None:
        hit = "unidentified"
    else:
        hit = "identified"
    return ReadVerdict(
        read=read,
        hit=hit,
        hit_certificate=None if hit_entry is None else hit_entry.certificate,
        read_tokens=read_tokens,
    )


def _identified(placement: Placement, read_tokens: int, route: str) -> Entry | None:
    if read_tokens == 0 or placement.server_tool:
        return None
    matches = [
        entry
        for entry in placement.landing
        if entry.row.seen_by(route) == placement.process_id and entry.stored_length == read_tokens
    ]
    if len(matches) != 1:
        return None
    found = matches[0]
    depth = api_order(found.location)
    for entry in placement.landing:
        if api_order(entry.location) > depth and entry.stored_length is None:
            return None
    return found
