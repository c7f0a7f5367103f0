"""Cache marks: where, with which lifetime, and why.

A request carries at most :data:`MAX_MARKS` marks, and in API order every
one-hour mark comes before every five-minute mark (the API requires longer
lifetimes first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any, Literal

import attrs

from runtime.cache.blocks import Location, api_order, check_location
from runtime.cache.errors import CacheInputError

MAX_MARKS = 4
LIFETIMES = ("5m", "1h")
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
ROLES = ("read", "turn", "stable", "probe", "anchor", "caller")

Lifetime = Literal["5m", "1h"]
Role = Literal["read", "turn", "stable", "probe", "anchor", "caller"]


def check_lifetime(value: Any, *, what: str = "lifetime") -> Lifetime:
    if value not in LIFETIMES:
        raise CacheInputError(f"{what} {value!r} is not a cache lifetime; expected '5m' or '1h'")
    return value


def _mark_location(location: Any) -> Location:
    return check_location(location, what="mark location")


@attrs.frozen
class Mark:
    """One cache mark: the block it sits on, its lifetime, and the rule that placed it.

    ``role`` is ``read`` (marks an entry's own block to read it), ``turn``
    (end of a continuing request), ``stable`` (end of tools + system),
    ``probe`` (an entry whose evidence is unknown), ``anchor`` (a place a later
    request should still reach) or ``caller`` (a mark the caller placed).
    """

    location: Location = attrs.field(converter=_mark_location)
    ttl: Lifetime = attrs.field()
    role: Role = attrs.field()

    @ttl.validator
    def _check_ttl(self, _attribute: Any, value: Any) -> None:
        check_lifetime(value, what="mark ttl")

    @role.validator
    def _check_role(self, _attribute: Any, value: Any) -> None:
        if value not in ROLES:
            raise CacheInputError(f"mark role {value!r} is not one of {', '.join(ROLES)}")

    def to_dict(self) -> dict[str, Any]:
        return {"location": list(self.location), "ttl": self.ttl, "role": self.role}


def breaks_ttl_order(existing: Iterable[Mark], location: Location, ttl: Lifetime) -> bool:
    """Whether a mark of ``ttl`` at ``location`` would put a 5m mark before a 1h mark."""
    key = api_order(location)
    for mark in existing:
        other = api_order(mark.location)
        if other < key and mark.ttl == "5m" and ttl == "1h":
            return True
        if other > key and mark.ttl == "1h" and ttl == "5m":
            return True
    return False


def in_api_order(marks: Iterable[Mark]) -> tuple[Mark, ...]:
    return tuple(sorted(marks, key=lambda mark: api_order(mark.location)))


def check_marks(marks: Sequence[Mark], *, what: str = "marks") -> tuple[Mark, ...]:
    """Check a set of marks the API would accept: at most four, one per block, 1h before 5m.

    Returns them in API order.
    """
    for mark in marks:
        if not isinstance(mark, Mark):
            raise CacheInputError(f"{what}: {mark!r} is not a Mark")
    if len(marks) > MAX_MARKS:
        raise CacheInputError(f"{what}: {len(marks)} marks, at most {MAX_MARKS} are allowed")
    ordered = in_api_order(marks)
    for before, after in pairwise(ordered):
        if before.location == after.location:
            raise CacheInputError(f"{what}: two marks on {before.location!r}; expected at most one per block")
        if before.ttl == "5m" and after.ttl == "1h":
            raise CacheInputError(
                f"{what}: a 5m mark at {before.location!r} precedes a 1h mark at {after.location!r}; "
                "one-hour marks must come first"
            )
    return ordered
