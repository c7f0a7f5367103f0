"""Choosing a request's cache marks from the entries its conversation has written.

:func:`place_marks` implements seed 001 Amendment 3 (with Amendment 4's
tail_skip). At most four marks, the caller's own counted, chosen in this
order, each only while a slot is free and the order of lifetimes (every 1h
mark before every 5m mark) stays legal:

1. **read**: the deepest live entry established on every route the request
   can take. A mark this request places anyway (the turn mark, an anchor, or
   the stable mark) serves as the read when it reaches the entry; otherwise
   the entry's own block is marked with the entry's lifetime.
2. **turn**: 5m on the last markable block of the last message, when the
   request is ``continuing`` and tail_skip does not select it.
3. **stable**: 1h on the end of tools + system (the last system block, or
   the last tool when there is no system). A caller's 5m mark there is raised
   to 1h when every earlier mark is 1h.
4. **probe**: each live entry deeper than the read target whose evidence is
   unknown, deepest first, with its own lifetime, skipped when a mark already
   reaches it; ``probe_slots`` is recorded when the slots run out.
5. **anchor**: 5m on each anchor, when the request is ``continuing``; each
   anchor takes a mark of its own (a later mark reaching it reads it but
   never writes or refreshes it).

A mark whose lifetime would break the order is not placed and ``ttl_order``
is recorded with its role; a read's lifetime is never changed to make it
legal. ``final`` places no turn mark and no anchors. ``side`` reads no
conversation rows, probes nothing, and places only stable-segment marks: the
1h mark, and a read of a stable entry that mark does not reach.

g1 is decided last: ``ledger_evicted`` while the ledger's eviction watermark
is ahead of ``now``; ``route_unselected`` when no entry is established on
every route but some is on some; ``no_established_candidate`` when none is
on any; ``caller_marks`` when the caller's marks left no slot for the read;
``ttl_order`` when the read's lifetime would break the order; then
``length_unknown`` when the target's stored length is unknown; else ``met``
when some mark as sent reaches the target and ``defect`` when none does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from runtime.cache.blocks import (
    Location,
    api_order,
    check_location,
    has_server_tool,
)
from runtime.cache.certificates import BlockRef, CertifiedPayload, certify_payload
from runtime.cache.errors import CacheInputError
from runtime.cache.ledger import CacheLedger
from runtime.cache.marks import (
    MAX_MARKS,
    Lifetime,
    Mark,
    Role,
    breaks_ttl_order,
    check_marks,
    in_api_order,
)
from runtime.cache.reach import LOOKBACK, reaches
from runtime.cache.record import G1, INTENTS, Entry, Intent, Placement, Skipped
from runtime.cache.rows import LedgerRow
from runtime.cache.tail_skip import TailSkip
from runtime.request.prepared import PreparedPayload


def _live_rows(certified: CertifiedPayload, ledger: CacheLedger, now: float) -> list[tuple[BlockRef, LedgerRow]]:
    """Each block with a live ledger row, in API order (walking whichever of the two is smaller)."""
    if len(ledger) < len(certified.refs):
        found: list[tuple[int, LedgerRow]] = []
        for certificate, live_row in ledger.rows.items():
            index = certified.index_of(certificate)
            if index is not None and live_row.live(now):
                found.append((index, live_row))
        found.sort(key=lambda item: item[0])
        return [(certified.refs[index], live_row) for index, live_row in found]
    return [(ref, row) for ref in certified.refs if (row := ledger.get(ref.certificate)) is not None and row.live(now)]


def place_marks(
    payload: Mapping[str, Any] | PreparedPayload,
    *,
    ledger: CacheLedger,
    intent: Intent = "continuing",
    anchors: Sequence[Location] = (),
    now: float,
    route: str | Sequence[str],
    process_id: str,
    tail_skip: TailSkip | None = None,
    caller_marks: Sequence[Mark] = (),
    previous: CertifiedPayload | None = None,
    collapse_runs: bool = True,
    lookback: int = LOOKBACK,
) -> Placement:
    """Choose the cache marks for ``payload`` (which carries no ``cache_control``).

    ``payload`` is the Messages payload, or the same request as a
    :class:`~runtime.request.prepared.PreparedPayload` (what the compiler gives:
    the same marks, without re-serialising the history).

    ``route`` is the route the request takes, or every route it can take
    (configured accounts, or ``"direct"``). ``previous`` is an earlier
    placement's ``certified``, reused for the prefix the two payloads share.
    Apply the result with :func:`runtime.cache.apply.apply_marks`.
    """
    _check_arguments(intent, ledger, now, process_id, tail_skip, lookback)
    routes = _routes(route)

    certified = certify_payload(payload, collapse_runs=collapse_runs, previous=previous)
    by_location = certified.by_location()
    callers = _caller_marks(caller_marks, by_location)
    anchor_locations = _anchors(anchors, by_location)

    entries = tuple(
        Entry(ref, row, tuple(r for r in routes if row.seen_by(r) == process_id))
        for ref, row in _live_rows(certified, ledger, now)
    )
    readable = tuple(e for e in entries if e.ref.tier != "messages") if intent == "side" else entries
    established = [e for e in readable if len(e.established_routes) == len(routes)]
    target = established[-1] if established else None

    skip_turn = intent == "continuing" and tail_skip is not None and tail_skip.selected
    marks = _MarkSet(by_location, list(callers), lookback)
    turn_location: Location | None = None
    if intent == "continuing" and not skip_turn:
        turn_location = _turn_location(certified.refs, certified.message_count, marks)
    if intent != "continuing":
        anchor_locations = ()
    stable_location = _stable_location(certified.stable_refs)

    read_failure = _place_in_order(
        marks, intent, target, entries, len(routes), turn_location, anchor_locations, stable_location
    )

    final_marks = in_api_order(marks.marks)
    landing = tuple(e for e in entries if marks.reach(e.ref))
    g1 = _g1(ledger, now, target, readable, read_failure, marks)
    return Placement(
        intent=intent,
        routes=routes,
        process_id=process_id,
        now=float(now),
        marks=final_marks,
        landing=landing,
        g1=g1,
        read_target=target,
        tail_skip=tail_skip.record if skip_turn and tail_skip is not None else None,
        skipped=tuple(marks.skipped),
        server_tool=payload.server_tool if isinstance(payload, PreparedPayload) else has_server_tool(payload),
        mark_refs=tuple(by_location[mark.location] for mark in final_marks),
        certified=certified,
    )


@attrs.define(eq=False)
class _MarkSet:
    """The marks chosen so far for one request (a working value inside :func:`place_marks`)."""

    by_location: Mapping[Location, BlockRef]
    marks: list[Mark]
    lookback: int
    skipped: list[Skipped] = attrs.field(factory=list)

    def at(self, location: Location) -> Mark | None:
        for mark in self.marks:
            if mark.location == location:
                return mark
        return None

    def reach(self, entry: BlockRef) -> bool:
        return any(reaches(self.by_location[m.location], entry, lookback=self.lookback) for m in self.marks)

    def obstacle(self, location: Location, ttl: Lifetime) -> str | None:
        """Why a mark of ``ttl`` cannot go at ``location`` now: ``slots``, ``ttl_order``, or None."""
        existing = self.at(location)
        if existing is not None:
            return None if existing.ttl == ttl else "ttl_order"
        if len(self.marks) >= MAX_MARKS:
            return "slots"
        if breaks_ttl_order(self.marks, location, ttl):
            return "ttl_order"
        return None

    def place(self, location: Location, ttl: Lifetime, role: Role) -> None:
        if self.at(location) is None:
            self.marks.append(Mark(location, ttl, role))

    def skip(self, role: str, reason: str, location: Location | None) -> None:
        self.skipped.append(Skipped(role, reason, location))

    def place_or_skip(self, location: Location, ttl: Lifetime, role: Role) -> None:
        obstacle = self.obstacle(location, ttl)
        if obstacle is None:
            self.place(location, ttl, role)
        else:
            self.skip(role, obstacle, location)

    def place_stable(self, location: Location) -> None:
        existing = self.at(location)
        if existing is None or existing.ttl == "1h":
            self.place_or_skip(location, "1h", "stable")
            return
        key = api_order(location)
        earlier_all_1h = all(m.ttl == "1h" for m in self.marks if api_order(m.location) < key)
        if existing.role == "caller" and earlier_all_1h:
            self.marks[self.marks.index(existing)] = Mark(location, "1h", "caller")
        else:
            self.skip("stable", "ttl_order", location)


def _check_arguments(intent: Any, ledger: Any, now: Any, process_id: Any, tail_skip: Any, lookback: Any) -> None:
    if intent not in INTENTS:
        raise CacheInputError(f"intent {intent!r} is not one of {', '.join(INTENTS)}")
    if not isinstance(ledger, CacheLedger):
        raise CacheInputError(f"ledger is {type(ledger).__name__}, expected a CacheLedger")
    if isinstance(now, bool) or not isinstance(now, (int, float)) or not math.isfinite(now):
        raise CacheInputError(f"now {now!r} is not a finite time in seconds")
    if not isinstance(process_id, str) or not process_id:
        raise CacheInputError(f"process_id {process_id!r} is not a non-empty string")
    if tail_skip is not None and not isinstance(tail_skip, TailSkip):
        raise CacheInputError(f"tail_skip is {type(tail_skip).__name__}, expected a TailSkip or None")
    if isinstance(lookback, bool) or not isinstance(lookback, int) or lookback < 1:
        raise CacheInputError(f"lookback {lookback!r} is not a positive integer")


def _place_in_order(
    marks: _MarkSet,
    intent: Intent,
    target: Entry | None,
    entries: Sequence[Entry],
    route_count: int,
    turn_location: Location | None,
    anchor_locations: Sequence[Location],
    stable_location: Location | None,
) -> str | None:
    """Place the marks in priority order; returns why the read could not be placed (None when it was)."""
    # 1. The read.
    read_failure: str | None = None
    if target is not None:
        planned: list[tuple[Location | None, Lifetime, Role]] = [(turn_location, "5m", "turn")]
        planned += [(loc, "5m", "anchor") for loc in anchor_locations]
        planned.append((stable_location, "1h", "stable"))
        read_failure = _place_read(marks, target, planned)

    # 2. The turn.
    if turn_location is not None:
        marks.place_or_skip(turn_location, "5m", "turn")

    # 3. The stable segment.
    if stable_location is not None:
        marks.place_stable(stable_location)

    # 4. Probes of deeper entries with unknown evidence.
    if intent != "side":
        _place_probes(marks, entries, target, route_count)

    # 5. Anchors.
    for location in anchor_locations:
        if marks.at(location) is None:
            marks.place_or_skip(location, "5m", "anchor")
    return read_failure


def _place_read(
    marks: _MarkSet,
    target: Entry,
    planned: Sequence[tuple[Location | None, Lifetime, Role]],
) -> str | None:
    """Mark so that the read target is reached; the g1 exclusion when that cannot be done.

    A mark already chosen (a caller's) or a mark the request places anyway
    (``planned``: turn, anchors, stable, in that preference) serves when it
    reaches the target; otherwise the target's own block is marked with the
    target's lifetime.
    """
    if marks.reach(target.ref):
        return None
    for location, ttl, role in planned:
        if (
            location is not None
            and reaches(marks.by_location[location], target.ref, lookback=marks.lookback)
            and marks.obstacle(location, ttl) is None
        ):
            marks.place(location, ttl, role)
            return None
    obstacle = marks.obstacle(target.location, target.row.lifetime)
    if obstacle is None:
        marks.place(target.location, target.row.lifetime, "read")
        return None
    marks.skip("read", obstacle, target.location)
    return "caller_marks" if obstacle == "slots" else "ttl_order"


def _place_probes(marks: _MarkSet, entries: Sequence[Entry], target: Entry | None, route_count: int) -> None:
    """Probe each live entry deeper than the target whose evidence is unknown, deepest first."""
    depth = api_order(target.location) if target is not None else None
    unknown = [
        e
        for e in entries
        if len(e.established_routes) < route_count and (depth is None or api_order(e.location) > depth)
    ]
    for entry in reversed(unknown):
        if marks.reach(entry.ref):
            continue
        obstacle = marks.obstacle(entry.location, entry.row.lifetime)
        if obstacle == "slots":
            marks.skip("probe", "probe_slots", entry.location)
            return
        if obstacle is not None:
            marks.skip("probe", obstacle, entry.location)
            continue
        marks.place(entry.location, entry.row.lifetime, "probe")


def _g1(
    ledger: CacheLedger,
    now: float,
    target: Entry | None,
    readable: Sequence[Entry],
    read_failure: str | None,
    marks: _MarkSet,
) -> G1:
    if ledger.guarantee_suspended(now):
        return G1("excluded", "ledger_evicted")
    if target is None:
        if any(e.established_routes for e in readable):
            return G1("excluded", "route_unselected")
        return G1("excluded", "no_established_candidate")
    if read_failure is not None:
        return G1("excluded", read_failure)
    if target.stored_length is None:
        return G1("excluded", "length_unknown")
    return G1("met") if marks.reach(target.ref) else G1("defect")


def _routes(route: str | Sequence[str]) -> tuple[str, ...]:
    routes = (route,) if isinstance(route, str) else tuple(route)
    if not routes:
        raise CacheInputError("route: no route given; expected a route name or the routes the request can take")
    for r in routes:
        if not isinstance(r, str) or not r:
            raise CacheInputError(f"route {r!r} is not a non-empty string")
    if len(set(routes)) != len(routes):
        raise CacheInputError(f"route: {list(routes)!r} names a route twice")
    return routes


def _caller_marks(caller_marks: Sequence[Mark], by_location: Mapping[Location, BlockRef]) -> tuple[Mark, ...]:
    marks = tuple(caller_marks)
    check_marks(marks, what="caller_marks")
    out = []
    for mark in marks:
        ref = by_location.get(mark.location)
        if ref is None:
            raise CacheInputError(f"caller_marks: {mark.location!r} is not a block of the payload")
        if not ref.markable:
            raise CacheInputError(f"caller_marks: {mark.location!r} is a {ref.kind} block that takes no mark")
        out.append(attrs.evolve(mark, role="caller"))
    return tuple(out)


def _anchors(anchors: Sequence[Location], by_location: Mapping[Location, BlockRef]) -> tuple[Location, ...]:
    out: list[Location] = []
    for raw in anchors:
        location = check_location(raw, what="anchor")
        if location[0] != "messages":
            raise CacheInputError(f"anchor {location!r} is not a message block; expected ('messages', m, b)")
        ref = by_location.get(location)
        if ref is None:
            raise CacheInputError(f"anchor {location!r} is not a block of the payload")
        if not ref.markable:
            raise CacheInputError(f"anchor {location!r} is a {ref.kind} block that takes no mark")
        if location not in out:
            out.append(location)
    return tuple(out)


def _turn_location(refs: Sequence[BlockRef], message_count: int, marks: _MarkSet) -> Location | None:
    """The last markable block of the last message (None, recorded, when it has none)."""
    if message_count == 0:
        return None
    last = message_count - 1
    for ref in reversed(refs):
        if ref.tier != "messages" or ref.location[1] != last:
            break
        if ref.markable:
            return ref.location
    marks.skip("turn", "unmarkable", None)
    return None


def _stable_location(refs: Sequence[BlockRef]) -> Location | None:
    system = [ref for ref in refs if ref.tier == "system" and ref.markable]
    if system:
        return system[-1].location
    tools = [ref for ref in refs if ref.tier == "tools"]
    return tools[-1].location if tools else None
