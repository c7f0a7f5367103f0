"""The cache step of the send path: place marks before, record evidence after.

Thin glue between the engine and the pure placement core in
:mod:`runtime.cache`: it turns a compiled request into a placement (only when
both gates are on: the provider caches by prefix and the profile sets
``prompt_caching``) and, once the response is complete, writes what it proved
into the branch's ledger.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from actors.env import RunEnv
from runtime.cache import (
    CacheLedger,
    Placement,
    ReadVerdict,
    TailSkip,
    evaluate_read,
    place_marks,
)
from runtime.cache.blocks import Location
from runtime.request.compiler import Request
from runtime.values.usage import Usage


@attrs.frozen
class CachePlan:
    placement: Placement
    ledger: CacheLedger


def plan_cache(
    request: Request,
    ledger: CacheLedger | None,
    *,
    now: float,
    env: RunEnv,
    anchors: Sequence[Location] = (),
    tail_skip: TailSkip | None = None,
    previous: Placement | None = None,
) -> CachePlan:
    """Choose the marks for ``request`` from the branch's ledger (None: no evidence yet)."""
    ledger = ledger if ledger is not None else CacheLedger.empty()
    placement = place_marks(
        request.prepared(),
        ledger=ledger,
        intent=request.settings.intent,
        anchors=anchors,
        now=now,
        route=env.route,
        process_id=env.process_id,
        tail_skip=tail_skip,
        previous=previous.certified if previous is not None else None,
    )
    return CachePlan(placement, ledger)


def anchor_locations(request: Request, message_ids: Iterable[str | None]) -> tuple[Location, ...]:
    """The location of the last block each message renders to in ``request`` (its cache anchor).

    Messages not in the request (or None) are skipped. The fold names two:
    the end of the protected first round and the newest note.
    """
    last: dict[str, Location] = {}
    for m, message in enumerate(request.messages):
        for b, block in enumerate(message.blocks):
            if block.source_id is not None:
                last[block.source_id] = ("messages", m, b)
    out: list[Location] = []
    for message_id in message_ids:
        if message_id is not None and message_id in last and last[message_id] not in out:
            out.append(last[message_id])
    return tuple(out)


def record_cache_outcome(plan: CachePlan, usage: Usage, *, attempt_start: float, env: RunEnv) -> CacheLedger:
    """The branch's ledger after the planned request completed with ``usage``."""
    return plan.ledger.after_response(plan.placement, usage, attempt_start, env.route, env.process_id)


def read_verdict(
    plan: CachePlan, usage: Usage, *, attempt_start: float | None = None, route: str | None = None
) -> ReadVerdict:
    """How the completed attempt's read compares with what the placement aimed at."""
    return evaluate_read(plan.placement, usage, attempt_start=attempt_start, route=route)


def mark_json(mark: object) -> dict[str, object]:
    """A placed mark as the JSON a RequestSent event carries."""
    return {"location": list(mark.location), "ttl": mark.ttl, "role": getattr(mark, "role", None)}  # type: ignore[attr-defined]


def cache_summary(plan: CachePlan, verdict: ReadVerdict) -> dict[str, object]:
    """The compact cache record a ResponseReceived event carries."""
    record = plan.placement.to_record()
    summary: dict[str, object] = {
        "marks": record["marks"],
        "g1": record["g1"],
        "read": verdict.read,
        "read_tokens": verdict.read_tokens,
        "hit": verdict.hit,
    }
    if "tail_skip" in record:
        summary["tail_skip"] = record["tail_skip"]
    return summary
