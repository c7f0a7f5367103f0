"""The typed events: exact type strings and data fields, validation, reading back."""

from __future__ import annotations

import json
import re
from types import MappingProxyType
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.usage import Usage
from signals.envelope import SCHEMA_VERSION, Event, InvalidEventError
from signals.events import (
    CEILING_SOURCES,
    DECISION_ACTIONS,
    EVENT_TYPES,
    CacheRewrite,
    ChildSpawned,
    ContextDecision,
    FoldCommitted,
    NodeFailed,
    NodeFinished,
    NodeSkipped,
    NodeStarted,
    ReplyDelta,
    RequestSent,
    ResponseReceived,
    RunFinished,
    RunStarted,
    ToolCallFinished,
    payload_of,
)

DIGEST = sha256_hex("request")

# One valid instance of every type, with the exact data it must produce.
EXAMPLES: list[tuple[Any, str, dict[str, Any]]] = [
    (
        RunStarted(scenario="two-nodes", provider="scripted", nodes=["a", "b"]),
        "RunStarted",
        {"scenario": "two-nodes", "provider": "scripted", "nodes": ["a", "b"]},
    ),
    (
        RunFinished(status="failed", nodes={"a": "ok", "b": "failed", "c": "skipped"}, bytes_unrecoverable=12),
        "RunFinished",
        {"status": "failed", "nodes": {"a": "ok", "b": "failed", "c": "skipped"}, "bytes_unrecoverable": 12},
    ),
    (NodeStarted(operation="bounded", parent="a"), "NodeStarted", {"operation": "bounded", "parent": "a"}),
    (NodeFinished(rounds=3, answer_chars=120), "NodeFinished", {"rounds": 3, "answer_chars": 120}),
    (
        NodeFailed(error_type="CeilingRefused", message="estimate 120000 > ceiling 100000"),
        "NodeFailed",
        {"error_type": "CeilingRefused", "message": "estimate 120000 > ceiling 100000"},
    ),
    (NodeSkipped(reason="dependency a failed"), "NodeSkipped", {"reason": "dependency a failed"}),
    (
        ChildSpawned(child="a.1", inherit="view", view_length=14),
        "ChildSpawned",
        {"child": "a.1", "inherit": "view", "view_length": 14},
    ),
    (
        RequestSent(
            digest=DIGEST,
            bytes=2048,
            attempt=1,
            intent="turn",
            marks=[{"location": ["system", 0], "ttl": "1h", "role": "stable"}],
            model="claude-haiku-5-5",
        ),
        "RequestSent",
        {
            "digest": DIGEST,
            "bytes": 2048,
            "attempt": 1,
            "intent": "turn",
            "marks": [{"location": ["system", 0], "ttl": "1h", "role": "stable"}],
            "model": "claude-haiku-5-5",
        },
    ),
    (
        ResponseReceived(
            usage=Usage(10, 2000, 300, 40, 55),
            stop_reason="tool_use",
            duration_s=1.25,
            cache={"g1": "met", "read": "at_or_above", "hit": "identified"},
            context_management={"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2}]},
        ),
        "ResponseReceived",
        {
            "usage": {
                "input_tokens": 10,
                "cache_read_input_tokens": 2000,
                "cache_write_5m_tokens": 300,
                "cache_write_1h_tokens": 40,
                "output_tokens": 55,
            },
            "stop_reason": "tool_use",
            "duration_s": 1.25,
            "cache": {"g1": "met", "read": "at_or_above", "hit": "identified"},
            "context_management": {
                "applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 2}],
            },
        },
    ),
    (
        ContextDecision(
            ceiling=100_000,
            ceiling_source="auto",
            tier=0,
            method="reported+bytes",
            estimate_before=104_000,
            estimate_after=58_000,
            action="fold",
            stages=["tool_results"],
            folded_ids=["call_1", "call_2"],
            sent=True,
            reason="estimate 104000 >= ceiling 100000",
        ),
        "ContextDecision",
        {
            "ceiling": 100_000,
            "ceiling_source": "auto",
            "tier": 0,
            "method": "reported+bytes",
            "estimate_before": 104_000,
            "estimate_after": 58_000,
            "action": "fold",
            "stages": ["tool_results"],
            "folded_ids": ["call_1", "call_2"],
            "sent": True,
            "reason": "estimate 104000 >= ceiling 100000",
            "provider_count": None,
            "count_calls": 0,
            "fold_line": None,
            "fold_target": None,
        },
    ),
    (
        FoldCommitted(
            stages=["tool_results", "summary"],
            agent_marks=2,
            host_stages=1,
            tokens_freed=40_000,
            target_reached=True,
            estimate_before=98_000,
            estimate_after=58_000,
            policy="cost",
            target_tokens=60_000,
            growth_tokens=4_500.0,
            predicted_bit=96_250.5,
            predicted_requests=6.5,
            realised_bit=101_000.25,
            realised_requests=7,
        ),
        "FoldCommitted",
        {
            "stages": ["tool_results", "summary"],
            "agent_marks": 2,
            "host_stages": 1,
            "tokens_freed": 40_000,
            "target_reached": True,
            "estimate_before": 98_000,
            "estimate_after": 58_000,
            "policy": "cost",
            "target_tokens": 60_000,
            "growth_tokens": 4_500.0,
            "predicted_bit": 96_250.5,
            "predicted_requests": 6.5,
            "realised_bit": 101_000.25,
            "realised_requests": 7,
            "fold_line_tokens": None,
            "stopped": None,
        },
    ),
    (
        CacheRewrite(cause=None, first_changed_message=4, request_digest=DIGEST),
        "CacheRewrite",
        {"cause": None, "first_changed_message": 4, "request_digest": DIGEST},
    ),
    (
        ToolCallFinished(call_id="toolu_1", name="read_file", is_error=True, output_bytes=61),
        "ToolCallFinished",
        {"call_id": "toolu_1", "name": "read_file", "is_error": True, "output_bytes": 61},
    ),
    (
        ReplyDelta(kind="thinking", text="Let me see", attempt=1, index=0),
        "ReplyDelta",
        {"kind": "thinking", "text": "Let me see", "attempt": 1, "index": 0},
    ),
]


def test_every_type_is_registered_under_its_exact_type_string() -> None:
    assert sorted(EVENT_TYPES) == sorted(type_string for _, type_string, _ in EXAMPLES)
    for example, type_string, _ in EXAMPLES:
        assert type(example).TYPE == type_string
        assert EVENT_TYPES[type_string] is type(example)


@pytest.mark.parametrize(("example", "type_string", "data"), EXAMPLES, ids=[t for _, t, _ in EXAMPLES])
def test_to_data_gives_exactly_the_contract_fields(example: Any, type_string: str, data: dict[str, Any]) -> None:
    produced = example.to_data()
    assert produced == data
    assert json.loads(canonical_json(produced)) == data  # JSON-compatible as is


@pytest.mark.parametrize(("example", "type_string", "data"), EXAMPLES, ids=[t for _, t, _ in EXAMPLES])
def test_from_data_reads_back_and_ignores_unknown_keys(example: Any, type_string: str, data: dict[str, Any]) -> None:
    cls = type(example)
    assert cls.from_data(data) == example
    assert cls.from_data({**data, "added_in_a_later_version": [1, 2]}) == example


@pytest.mark.parametrize(("example", "type_string", "data"), EXAMPLES, ids=[t for _, t, _ in EXAMPLES])
def test_payload_of_rebuilds_the_typed_event_from_an_event_read_from_json(
    example: Any, type_string: str, data: dict[str, Any]
) -> None:
    event = Event(SCHEMA_VERSION, type_string, "r:1", 0.0, 1, "r", None, None, None, example.to_data())
    back = Event.from_json(json.loads(canonical_json(event.to_json())))
    assert payload_of(back) == example


def test_payload_of_refuses_an_unknown_type() -> None:
    event = Event(SCHEMA_VERSION, "FromTheFuture", "r:1", 0.0, 1, "r", None, None, None, {})
    with pytest.raises(InvalidEventError, match="type 'FromTheFuture' is not one of CacheRewrite"):
        payload_of(event)


def test_from_data_names_missing_fields() -> None:
    with pytest.raises(InvalidEventError, match="NodeFinished: data is missing answer_chars"):
        NodeFinished.from_data({"rounds": 1})


def test_a_field_added_later_has_a_default_so_older_data_still_reads() -> None:
    older = {"status": "ok", "nodes": {"a": "ok"}}
    finished = RunFinished.from_data(older)
    assert finished.bytes_unrecoverable == 0
    assert finished.to_data() == {**older, "bytes_unrecoverable": 0}
    with pytest.raises(InvalidEventError, match="RunFinished: data is missing nodes"):
        RunFinished.from_data({"status": "ok", "bytes_unrecoverable": 0})


def test_typed_events_cannot_change_after_construction() -> None:
    request = RequestSent(digest=DIGEST, bytes=1, attempt=1, intent="turn", marks=[{"ttl": "5m"}])
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        request.bytes = 2  # type: ignore[misc]
    assert isinstance(request.marks, tuple)
    with pytest.raises(TypeError):
        request.marks[0]["ttl"] = "1h"  # type: ignore[index]
    finished = RunFinished(status="ok", nodes={"a": "ok"})
    assert isinstance(finished.nodes, MappingProxyType)
    data = finished.to_data()
    data["nodes"]["a"] = "failed"
    assert finished.nodes["a"] == "ok"


def test_list_fields_are_copied_from_the_caller() -> None:
    nodes = ["a"]
    started = RunStarted(scenario=None, provider="scripted", nodes=nodes)
    nodes.append("b")
    assert started.nodes == ("a",)


def test_usage_accepts_a_mapping_of_the_five_counts() -> None:
    response = ResponseReceived(
        usage={
            "input_tokens": 1,
            "cache_read_input_tokens": 2,
            "cache_write_5m_tokens": 3,
            "cache_write_1h_tokens": 4,
            "output_tokens": 5,
        },
        stop_reason=None,
        duration_s=2,
    )
    assert response.usage == Usage(1, 2, 3, 4, 5)
    assert response.duration_s == 2.0 and type(response.duration_s) is float


def _decision(**changes: Any) -> ContextDecision:
    fields: dict[str, Any] = {
        "ceiling": 100_000,
        "ceiling_source": "profile",
        "tier": None,
        "method": "tokenizer",
        "estimate_before": 90_000,
        "estimate_after": 90_000,
        "action": "notice",
        "stages": [],
        "folded_ids": [],
        "sent": True,
        "reason": "at 90% of the ceiling",
    }
    fields.update(changes)
    return ContextDecision(**fields)


BAD_VALUES: list[tuple[Any, str]] = [
    (
        lambda: _decision(action="compact"),
        "ContextDecision.action: 'compact' is not one of 'pass', 'notice', 'fold', 'refuse'",
    ),
    (lambda: _decision(ceiling_source="default"), "ContextDecision.ceiling_source: 'default' is not one of"),
    (lambda: _decision(ceiling=0), "ContextDecision.ceiling: 0 is not a positive integer"),
    (lambda: _decision(ceiling=True), "ContextDecision.ceiling: True is not a positive integer"),
    (lambda: _decision(tier=-1), "ContextDecision.tier: -1 is not a non-negative integer"),
    (lambda: _decision(estimate_before=1.5), "ContextDecision.estimate_before: 1.5 is not a non-negative integer"),
    (lambda: _decision(stages="tool_results"), "ContextDecision.stages: 'tool_results' is not a list of strings"),
    (lambda: _decision(folded_ids=["a", 2]), r"ContextDecision.folded_ids\[1\]: 2 is not a string"),
    (lambda: _decision(sent=1), "ContextDecision.sent: 1 is not a boolean"),
    (lambda: _decision(method=""), "ContextDecision.method: '' is not a non-empty string"),
    (lambda: _decision(action="refuse", sent=True), "action 'refuse' with sent=True"),
    (lambda: _decision(ceiling=None, ceiling_source="none", action="fold"), "action 'fold' with no ceiling"),
    (
        lambda: RunStarted(scenario="", provider="scripted", nodes=[]),
        "RunStarted.scenario: '' is not a non-empty string or None",
    ),
    (
        lambda: RunStarted(scenario=None, provider="scripted", nodes=("a", None)),
        r"RunStarted.nodes\[1\]: None is not a string",
    ),
    (lambda: RunFinished(status="partial", nodes={}), "RunFinished.status: 'partial' is not one of 'ok', 'failed'"),
    (
        lambda: RunFinished(status="ok", nodes={}, bytes_unrecoverable=-1),
        "RunFinished.bytes_unrecoverable: -1 is not a non-negative integer",
    ),
    (
        lambda: RunFinished(status="ok", nodes={"a": "done"}),
        r"RunFinished.nodes\['a'\]: 'done' is not one of 'ok', 'failed', 'skipped'",
    ),
    (
        lambda: RunFinished(status="ok", nodes=["a"]),
        "RunFinished.nodes: \\['a'\\] is not a mapping of node id to status",
    ),
    (lambda: NodeStarted(operation="loop"), "NodeStarted.operation: 'loop' is not one of 'bounded', 'iterative'"),
    (lambda: NodeFinished(rounds=-1, answer_chars=0), "NodeFinished.rounds: -1 is not a non-negative integer"),
    (lambda: NodeFailed(error_type="", message="x"), "NodeFailed.error_type: '' is not a non-empty string"),
    (lambda: NodeSkipped(reason=None), "NodeSkipped.reason: None is not a non-empty string"),
    (
        lambda: ChildSpawned(child="c", inherit="all", view_length=0),
        "ChildSpawned.inherit: 'all' is not one of 'view', 'none'",
    ),
    (
        lambda: RequestSent(digest="abc", bytes=1, attempt=1, intent="turn", marks=[]),
        "RequestSent.digest: 'abc' is not a SHA-256 digest",
    ),
    (
        lambda: RequestSent(digest=DIGEST.upper(), bytes=1, attempt=1, intent="turn", marks=[]),
        "RequestSent.digest: .* is not a SHA-256 digest",
    ),
    (
        lambda: RequestSent(digest=DIGEST, bytes=1, attempt=0, intent="turn", marks=[]),
        "RequestSent.attempt: 0 is not a positive integer",
    ),
    (
        lambda: RequestSent(digest=DIGEST, bytes=1, attempt=1, intent="turn", marks=["system"]),
        r"RequestSent.marks\[0\]: 'system' is not a JSON object",
    ),
    (
        lambda: RequestSent(digest=DIGEST, bytes=1, attempt=1, intent="turn", marks=[{"ttl": float("nan")}]),
        r"RequestSent.marks\[0\].ttl: nan is not a finite number",
    ),
    (
        lambda: ResponseReceived(usage={"input_tokens": 1}, stop_reason=None, duration_s=0.0),
        "ResponseReceived.usage: .* is missing cache_read_input_tokens",
    ),
    (
        lambda: ResponseReceived(usage=Usage(-1), stop_reason=None, duration_s=0.0),
        "ResponseReceived.usage.input_tokens: -1 is not a non-negative integer",
    ),
    (
        lambda: ResponseReceived(usage=(1, 2), stop_reason=None, duration_s=0.0),
        r"ResponseReceived.usage: \(1, 2\) is not a Usage",
    ),
    (
        lambda: ResponseReceived(usage=Usage(), stop_reason=None, duration_s=-0.5),
        "ResponseReceived.duration_s: -0.5 is not a finite, non-negative number",
    ),
    (
        lambda: ResponseReceived(usage=Usage(), stop_reason=None, duration_s=True),
        "ResponseReceived.duration_s: True is not a finite",
    ),
    (
        lambda: FoldCommitted(
            stages=[],
            agent_marks=0,
            host_stages=0,
            tokens_freed=0,
            target_reached="yes",
            estimate_before=0,
            estimate_after=0,
        ),
        "FoldCommitted.target_reached: 'yes' is not a boolean",
    ),
    (
        lambda: CacheRewrite(cause="", first_changed_message=0, request_digest=DIGEST),
        "CacheRewrite.cause: '' is not a non-empty string or None",
    ),
    (
        lambda: CacheRewrite(cause="fold", first_changed_message=-2, request_digest=DIGEST),
        "CacheRewrite.first_changed_message: -2 is not a non-negative integer",
    ),
]


@pytest.mark.parametrize(("build", "message"), BAD_VALUES, ids=[m[:40] for _, m in BAD_VALUES])
def test_obviously_wrong_values_are_refused_with_a_clear_error(build: Any, message: str) -> None:
    with pytest.raises(InvalidEventError, match=message):
        build()


def test_a_refusal_without_a_send_and_a_pass_without_a_ceiling_are_valid() -> None:
    refused = _decision(action="refuse", sent=False, estimate_before=130_000, estimate_after=130_000)
    assert refused.to_data()["sent"] is False
    unpriced = _decision(ceiling=None, ceiling_source="unpriced", action="pass")
    assert unpriced.to_data()["ceiling"] is None


DECISIONS = st.builds(
    ContextDecision,
    ceiling=st.integers(1, 2_000_000),
    ceiling_source=st.sampled_from(CEILING_SOURCES),
    tier=st.none() | st.integers(0, 5),
    method=st.text(min_size=1, max_size=20),
    estimate_before=st.integers(0, 3_000_000),
    estimate_after=st.integers(0, 3_000_000),
    action=st.sampled_from([a for a in DECISION_ACTIONS if a != "refuse"]),
    stages=st.lists(st.text(max_size=10), max_size=4),
    folded_ids=st.lists(st.text(max_size=10), max_size=6),
    sent=st.booleans(),
    reason=st.text(max_size=40),
)


@given(decision=DECISIONS)
def test_context_decisions_survive_the_json_round_trip(decision: ContextDecision) -> None:
    event = Event(SCHEMA_VERSION, decision.TYPE, "r:9", 1.0, 9, "r", "b", "n", "q", decision.to_data())
    back = Event.from_json(json.loads(canonical_json(event.to_json())))
    assert payload_of(back) == decision


@pytest.mark.parametrize(("example", "type_string", "data"), EXAMPLES, ids=[t for _, t, _ in EXAMPLES])
def test_frozen_data_is_the_data_deep_frozen(example: Any, type_string: str, data: dict[str, Any]) -> None:
    from types import MappingProxyType

    from signals.envelope import thaw_json

    frozen = example.frozen_data()
    assert thaw_json(frozen) == data

    def assert_deep_frozen(value: Any) -> None:
        if isinstance(value, (dict, list)):
            raise AssertionError(f"mutable {type(value).__name__} inside frozen data: {value!r}")
        if isinstance(value, MappingProxyType):
            for item in value.values():
                assert_deep_frozen(item)
        elif isinstance(value, tuple):
            for item in value:
                assert_deep_frozen(item)

    assert_deep_frozen(frozen)


FOLD_BEFORE_COST_FIELDS = {
    "stages": ["tool_io"],
    "agent_marks": 0,
    "host_stages": 1,
    "tokens_freed": 900,
    "target_reached": True,
    "estimate_before": 17_000,
    "estimate_after": 16_100,
}
"""A FoldCommitted's data as written before the cost fields existed."""


def test_fold_committed_written_before_the_cost_fields_still_reads() -> None:
    """The cost fields are additive: data without them reads, each as None."""
    event = FoldCommitted.from_data(FOLD_BEFORE_COST_FIELDS)
    assert event.policy is None and event.target_tokens is None
    assert event.predicted_bit is None and event.realised_bit is None and event.realised_requests is None


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("policy", "cheapest", "FoldCommitted.policy: 'cheapest' is not one of 'cost', 'fixed'"),
        ("predicted_bit", -1.0, "FoldCommitted.predicted_bit: -1.0 is not a finite, non-negative number or None"),
        ("realised_bit", float("nan"), "FoldCommitted.realised_bit: nan is not a finite"),
        ("growth_tokens", True, "FoldCommitted.growth_tokens: True is not a finite"),
        ("realised_requests", 1.5, "FoldCommitted.realised_requests: 1.5 is not a non-negative integer"),
    ],
)
def test_fold_committed_refuses_a_bad_cost_field(field: str, value: Any, expected: str) -> None:
    base = FOLD_BEFORE_COST_FIELDS
    with pytest.raises(InvalidEventError, match=re.escape(expected)):
        FoldCommitted(**{**base, field: value})
