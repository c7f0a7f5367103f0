"""Invariants of placement over random payloads and ledgers (Hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.cache.apply import apply_marks
from runtime.cache.blocks import api_order
from runtime.cache.certificates import certify, certify_payload
from runtime.cache.ledger import CacheLedger
from runtime.cache.marks import Mark, check_marks
from runtime.cache.placement import place_marks
from runtime.cache.reach import reaches
from runtime.cache.rows import LedgerRow
from runtime.cache.tail_skip import TailSkip

ME = "proc-1"
NOW = 1_000.0

words = st.text(alphabet="abc xyz", min_size=0, max_size=6)
text_block = st.builds(lambda t: {"type": "text", "text": t}, words)
thinking_block = st.just({"type": "thinking", "thinking": "hm", "signature": "s"})
tool_use_block = st.builds(
    lambda i: {"type": "tool_use", "id": f"u{i}", "name": "f", "input": {"i": i}}, st.integers(0, 9)
)
tool_result_block = st.builds(
    lambda i: {"type": "tool_result", "tool_use_id": f"u{i}", "content": "r"}, st.integers(0, 9)
)
block = st.one_of(text_block, thinking_block, tool_use_block, tool_result_block)
content = st.one_of(st.text(alphabet="ab ", min_size=1, max_size=5), st.lists(block, max_size=8))
message = st.builds(lambda role, c: {"role": role, "content": c}, st.sampled_from(["user", "assistant"]), content)
tool = st.builds(lambda i: {"name": f"t{i}", "description": "d", "input_schema": {}}, st.integers(0, 99))
system = st.one_of(st.none(), st.text(alphabet="s ", min_size=1, max_size=4), st.lists(text_block, max_size=3))


@st.composite
def payloads(draw) -> dict:
    payload = {
        "model": draw(st.sampled_from(["m1", "m2"])),
        "max_tokens": 10,
        "messages": draw(st.lists(message, max_size=12)),
    }
    tools = draw(st.lists(tool, max_size=3))
    if tools:
        payload["tools"] = tools
    sys_value = draw(system)
    if sys_value is not None:
        payload["system"] = sys_value
    if draw(st.booleans()):
        payload["tool_choice"] = {"type": "auto"}
    return payload


@st.composite
def scenarios(draw):
    payload = draw(payloads())
    refs = certify(payload)
    markable = [ref for ref in refs if ref.markable]
    rows = []
    for ref in draw(st.lists(st.sampled_from(markable), unique=True, max_size=8)) if markable else []:
        seen = draw(st.dictionaries(st.sampled_from(["direct", "acct"]), st.sampled_from([ME, "proc-0"]), max_size=2))
        rows.append(
            LedgerRow(
                certificate=ref.certificate,
                lifetime=draw(st.sampled_from(["5m", "1h"])),
                tier=ref.tier,
                stored_length=draw(st.one_of(st.none(), st.integers(0, 5_000))),
                last_marked=NOW - 10,
                last_read=None,
                expires_at=NOW + draw(st.sampled_from([-5.0, 0.0, 50.0, 3_000.0])),
                seen=seen,
            )
        )
    watermark = draw(st.one_of(st.none(), st.sampled_from([NOW - 1, NOW + 1])))
    ledger = CacheLedger(rows={r.certificate: r for r in rows}, watermark=watermark)
    message_refs = [ref for ref in markable if ref.tier == "messages"]
    anchors = (
        [ref.location for ref in draw(st.lists(st.sampled_from(message_refs), max_size=3))] if message_refs else []
    )
    caller_refs = draw(st.lists(st.sampled_from(markable), unique=True, max_size=4)) if markable else []
    caller_refs.sort(key=lambda ref: api_order(ref.location))
    n_hour = draw(st.integers(0, len(caller_refs)))
    caller = [Mark(ref.location, "1h" if i < n_hour else "5m", "caller") for i, ref in enumerate(caller_refs)]
    if draw(st.integers(0, 3)) != 0:
        caller = []
    skip = TailSkip.decide(
        estimate=draw(st.sampled_from([50_000, 88_000, 95_000])), ceiling=100_000, context_fold_at=0.9
    )
    return {
        "payload": payload,
        "ledger": ledger,
        "intent": draw(st.sampled_from(["continuing", "final", "side"])),
        "anchors": anchors,
        "caller_marks": caller,
        "tail_skip": skip,
        "route": draw(st.sampled_from([("direct",), ("direct", "acct")])),
    }


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_placement_invariants(s):
    placement = place_marks(
        s["payload"],
        ledger=s["ledger"],
        intent=s["intent"],
        anchors=s["anchors"],
        now=NOW,
        route=s["route"],
        process_id=ME,
        tail_skip=s["tail_skip"],
        caller_marks=s["caller_marks"],
    )
    marks = placement.marks
    by_location = {ref.location: ref for ref in certify(s["payload"])}

    # At most four marks, one per block, every 1h mark before every 5m mark, in API order.
    assert len(marks) <= 4
    assert check_marks(marks) == marks
    assert all(by_location[m.location].markable for m in marks)

    # The caller's marks are all sent (a 5m one at the stable end may be raised to 1h).
    sent = {m.location: m for m in marks}
    for mark in s["caller_marks"]:
        assert sent[mark.location].role == "caller"

    roles = {m.role for m in marks}
    if s["intent"] == "final":
        assert not roles & {"turn", "anchor"}
    if s["intent"] == "side":
        assert roles <= {"stable", "read", "caller"}
        assert all(m.location[0] != "messages" for m in marks if m.role != "caller")
        assert placement.tail_skip is None
    if s["intent"] == "continuing" and s["tail_skip"].selected:
        assert "turn" not in roles
        assert placement.tail_skip == s["tail_skip"].record
    if s["intent"] == "continuing" and not s["caller_marks"] and not s["tail_skip"].selected:
        # Without caller marks the turn mark always gets its slot and a legal lifetime.
        last_message = len(s["payload"]["messages"]) - 1
        has_markable = any(
            ref.markable and ref.location[:2] == ("messages", last_message) for ref in by_location.values()
        )
        assert ("turn" in roles) == has_markable

    # g1 is never a defect: where it applies, a mark reaches the read target.
    assert placement.g1.status != "defect"
    if placement.g1.status == "met":
        target = placement.read_target.ref
        assert any(reaches(by_location[m.location], target) for m in marks)

    # The landing set is exactly the live rows present in the request that a mark reaches.
    expected_landing = [
        ref.certificate
        for ref in by_location.values()
        if (row := s["ledger"].get(ref.certificate)) is not None
        and row.live(NOW)
        and any(reaches(by_location[m.location], ref) for m in marks)
    ]
    assert [e.certificate for e in placement.landing] == expected_landing

    # Applying the marks puts exactly one cache_control per mark and changes no certificate.
    applied = apply_marks(s["payload"], marks)
    assert certify(applied) == certify(s["payload"])
    count = sum("cache_control" in t for t in applied.get("tools", []))
    system_value = applied.get("system", [])
    count += 0 if isinstance(system_value, str) else sum("cache_control" in b for b in system_value)
    for msg in applied["messages"]:
        if not isinstance(msg["content"], str):
            count += sum("cache_control" in b for b in msg["content"])
    assert count == len(marks)


@settings(max_examples=200, deadline=None)
@given(payloads(), payloads(), st.integers(0, 12))
def test_reuse_equals_a_fresh_certification(first, other, keep):
    second = {**first, "messages": first["messages"][:keep] + other["messages"]}
    previous = certify_payload(first)
    assert certify_payload(second, previous=previous).refs == certify(second)
    assert certify_payload(second, previous=previous, collapse_runs=False).refs == certify(second, collapse_runs=False)


@settings(max_examples=200, deadline=None)
@given(payloads(), st.lists(message, min_size=1, max_size=4))
def test_appending_messages_never_changes_earlier_certificates(payload, more):
    longer = {**payload, "messages": payload["messages"] + more}
    before = certify(payload)
    assert certify(longer)[: len(before)] == before
