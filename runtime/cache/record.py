"""What a placement decided, kept for the request's record and for after the response.

:class:`Placement` is the value :func:`runtime.cache.placement.place_marks`
returns. It holds the marks as they will be sent, the live ledger entries
those marks reach (the landing set), the g1 outcome, the read target, the
tail_skip record, the marks that could not be placed and why, and the block
refs the ledger needs after the response.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from runtime.cache.blocks import Location, api_order
from runtime.cache.certificates import BlockRef, CertifiedPayload
from runtime.cache.errors import CacheInputError
from runtime.cache.marks import Mark
from runtime.cache.rows import LedgerRow
from runtime.cache.tail_skip import TailSkipRecord

Intent = Literal["continuing", "final", "side"]
INTENTS = ("continuing", "final", "side")

G1_EXCLUSIONS = (
    "no_established_candidate",
    "route_unselected",
    "ledger_evicted",
    "caller_marks",
    "ttl_order",
    "length_unknown",
)


@attrs.frozen
class Entry:
    """A live ledger entry present in this request: its block and its row as placement saw it.

    ``established_routes`` are the request's routes on which this process saw
    the entry.
    """

    ref: BlockRef
    row: LedgerRow
    established_routes: tuple[str, ...]

    @property
    def certificate(self) -> str:
        return self.ref.certificate

    @property
    def location(self) -> Location:
        return self.ref.location

    @property
    def stored_length(self) -> int | None:
        return self.row.stored_length

    def to_dict(self) -> dict[str, Any]:
        return {
            "certificate": self.certificate,
            "location": list(self.location),
            "lifetime": self.row.lifetime,
            "stored_length": self.row.stored_length,
            "expires_at": self.row.expires_at,
            "established_routes": list(self.established_routes),
        }


@attrs.frozen
class G1:
    """The read guarantee's outcome: ``met``, ``defect`` (the only defect), or ``excluded`` with a reason."""

    status: Literal["met", "defect", "excluded"]
    reason: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.status == "excluded":
            if self.reason not in G1_EXCLUSIONS:
                raise CacheInputError(f"g1 exclusion reason {self.reason!r} is not one of {', '.join(G1_EXCLUSIONS)}")
        elif self.status in ("met", "defect"):
            if self.reason is not None:
                raise CacheInputError(f"g1 {self.status} takes no reason, got {self.reason!r}")
        else:
            raise CacheInputError(f"g1 status {self.status!r} is not met, defect or excluded")

    def label(self) -> str:
        return self.status if self.reason is None else f"excluded:{self.reason}"


@attrs.frozen
class Skipped:
    """A mark the rules called for but did not place: its role, why, and where it would have gone.

    Reasons: ``ttl_order`` (its lifetime would break the 1h-before-5m order),
    ``probe_slots`` (probes ran out of slots), ``slots`` (another role ran
    out of slots), ``unmarkable`` (the last message has no block that takes a
    mark).
    """

    role: str
    reason: str
    location: Location | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "reason": self.reason,
            "location": None if self.location is None else list(self.location),
        }


@attrs.frozen
class Placement:
    """The marks for one request and everything recorded about them.

    ``marks`` are in API order and are exactly what will be sent (the
    caller's own included, with role ``caller``). ``landing`` lists, in API
    order, every live entry some mark reaches. ``certified`` is this payload's
    certification, to pass as ``previous`` when placing the next request.
    """

    intent: Intent
    routes: tuple[str, ...]
    process_id: str
    now: float
    marks: tuple[Mark, ...]
    landing: tuple[Entry, ...]
    g1: G1
    read_target: Entry | None
    tail_skip: TailSkipRecord | None
    skipped: tuple[Skipped, ...]
    server_tool: bool
    mark_refs: tuple[BlockRef, ...]
    certified: CertifiedPayload = attrs.field(eq=False, repr=False)

    def ref_at(self, location: Location) -> BlockRef:
        """The block ref of a marked location."""
        for ref in self.mark_refs:
            if ref.location == location:
                return ref
        raise CacheInputError(f"location {location!r} carries no mark in this placement")

    def deepest_mark(self) -> Mark | None:
        return max(self.marks, key=lambda mark: api_order(mark.location), default=None)

    def to_record(self) -> dict[str, Any]:
        """The JSON-ready record a request keeps under ``prompt_cache`` (before its response)."""
        record: dict[str, Any] = {
            "intent": self.intent,
            "marks": [mark.to_dict() for mark in self.marks],
            "landing": [entry.to_dict() for entry in self.landing],
            "g1": self.g1.label(),
            "read_target": None if self.read_target is None else self.read_target.certificate,
            "skipped": [skip.to_dict() for skip in self.skipped],
        }
        if self.tail_skip is not None:
            record["tail_skip"] = self.tail_skip.to_dict()
        return record
