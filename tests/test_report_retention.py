"""The run report keeps no entry per request once the request is answered, and counts as it did.

A 10,000-node run sends 40,000 requests; the report held each one's model and
intent for the whole run. Pure (events fed by hand): no event loop.
"""

from __future__ import annotations

from typing import Any

from runtime.models.pricing import PricingTable
from runtime.report import ReportBuilder
from runtime.values.usage import Usage
from signals.envelope import SCHEMA_VERSION, Event

MAIN = Usage(input_tokens=1_000, output_tokens=100)
SIDE = Usage(input_tokens=500, output_tokens=50)


def _event(seq: int, kind: str, request_id: str | None, data: dict[str, Any]) -> Event:
    return Event(SCHEMA_VERSION, kind, f"e{seq}", float(seq), seq, "r", "b", "n", request_id, data)


def test_each_request_is_priced_by_its_own_model_and_intent_and_then_let_go() -> None:
    pricing = PricingTable.load_default()
    events = [
        _event(1, "RequestSent", "q1", {"model": "claude-opus-4-8", "intent": "main", "attempt": 1}),
        _event(2, "RequestSent", "q1", {"model": "claude-opus-4-8", "intent": "main", "attempt": 2}),
        _event(3, "RequestSent", "q2", {"model": "claude-haiku-5-5", "intent": "side", "attempt": 1}),
        _event(4, "ResponseReceived", "q2", {"usage": SIDE.to_dict()}),
        _event(5, "ResponseReceived", "q1", {"usage": MAIN.to_dict()}),
        _event(6, "RequestSent", "q3", {"model": "claude-haiku-5-5", "intent": "main", "attempt": 1}),
    ]
    report = ReportBuilder(pricing, "claude-haiku-5-5").feed_all(events)
    side = pricing.cost(SIDE, "claude-haiku-5-5").bit
    main = pricing.cost(MAIN, "claude-opus-4-8").bit
    assert report.requests == 2 and report.attempts == 4
    assert report.summary_requests == 1 and abs(report.summary_cost_bit - side) < 1e-9
    assert abs(report.cost_bit - (main + side)) < 1e-9
    # Answered requests are let go; the one still out (q3) is kept until its response.
    assert report._request_models == {"q3": "claude-haiku-5-5"} and report._request_intents == {"q3": "main"}
    assert report._node_first == {"n": MAIN}  # the node's first main request is q1 (q2 was a side request)
