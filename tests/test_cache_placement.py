"""place_marks: the order of placement, lifetimes, routes, probes, anchors, tail_skip and g1."""

from __future__ import annotations

import pytest

from runtime.cache.certificates import certify
from runtime.cache.errors import CacheInputError
from runtime.cache.ledger import CacheLedger
from runtime.cache.marks import Mark
from runtime.cache.placement import place_marks
from runtime.cache.record import G1
from runtime.cache.rows import LedgerRow
from runtime.cache.tail_skip import TailSkip
from runtime.values.usage import Usage

ME = "proc-1"
OTHER = "proc-0"
NOW = 1_000.0

TOOLS = [
    {"name": "read", "description": "read a file", "input_schema": {"type": "object"}},
    {"name": "grep", "description": "search files", "input_schema": {"type": "object"}},
]
SYSTEM = [{"type": "text", "text": "You are a careful engineer."}]


def conversation(rounds: int, *, tools=True, system=True) -> dict:
    """A tool loop: the task, then per round an assistant (text, tool_use) and a user tool_result."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "the task"}]}]
    for r in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"step {r}"},
                    {"type": "tool_use", "id": f"c{r}", "name": "read", "input": {"n": r}},
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{r}", "content": f"out {r}"}]}
        )
    payload: dict = {"model": "claude-haiku-5-5", "max_tokens": 1000, "messages": messages}
    if tools:
        payload["tools"] = [dict(t) for t in TOOLS]
    if system:
        payload["system"] = [dict(b) for b in SYSTEM]
    return payload


def ref_at(payload: dict, location: tuple):
    return {ref.location: ref for ref in certify(payload)}[location]


def row_for(payload, location, *, lifetime="5m", length=1_000, seen=None, expires=NOW + 200, tier=None):
    ref = ref_at(payload, location)
    return LedgerRow(
        certificate=ref.certificate,
        lifetime=lifetime,
        tier=tier or ref.tier,
        stored_length=length,
        last_marked=NOW - 100,
        last_read=None,
        expires_at=expires,
        seen={"direct": ME} if seen is None else seen,
    )


def ledger_of(*rows: LedgerRow, watermark=None) -> CacheLedger:
    return CacheLedger(rows={row.certificate: row for row in rows}, watermark=watermark)


def place(payload, ledger=None, **kwargs):
    kwargs.setdefault("now", NOW)
    kwargs.setdefault("route", "direct")
    kwargs.setdefault("process_id", ME)
    return place_marks(payload, ledger=ledger or CacheLedger.empty(), **kwargs)


def summary(placement) -> list[tuple]:
    return [(m.location, m.ttl, m.role) for m in placement.marks]


# --- the order of placement -------------------------------------------------


def test_first_continuing_request_gets_the_stable_and_turn_marks():
    payload = conversation(2)
    placement = place(payload)
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 4, 0), "5m", "turn")]
    assert placement.g1 == G1("excluded", "no_established_candidate")
    assert placement.read_target is None
    assert placement.landing == ()
    assert placement.tail_skip is None


def test_the_stable_mark_goes_on_the_last_tool_without_a_system():
    placement = place(conversation(1, system=False))
    assert summary(placement)[0] == (("tools", 1), "1h", "stable")


def test_no_tools_and_no_system_means_no_stable_mark():
    placement = place(conversation(1, tools=False, system=False))
    assert summary(placement) == [(("messages", 2, 0), "5m", "turn")]


def test_the_stable_mark_skips_a_blank_last_system_block():
    payload = conversation(1)
    payload["system"] = [{"type": "text", "text": "rules"}, {"type": "text", "text": "  "}]
    assert summary(place(payload))[0] == (("system", 0), "1h", "stable")


def test_the_turn_mark_is_on_the_last_markable_block_of_the_last_message():
    payload = conversation(1)
    payload["messages"].append(
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "answer"},
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "text", "text": " "},
            ],
        }
    )
    assert (("messages", 3, 0), "5m", "turn") in summary(place(payload))


def test_a_last_message_with_no_markable_block_records_the_turn_as_unmarkable():
    payload = conversation(1)
    payload["messages"].append(
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]}
    )
    placement = place(payload)
    assert [m.role for m in placement.marks] == ["stable"]
    assert [(s.role, s.reason) for s in placement.skipped] == [("turn", "unmarkable")]


def test_a_continuing_request_reads_the_previous_turn_through_its_own_turn_mark():
    previous = conversation(1)
    payload = conversation(2)
    entry = row_for(previous, ("messages", 2, 0))
    placement = place(payload, ledger_of(entry))
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 4, 0), "5m", "turn")]
    assert placement.read_target.certificate == entry.certificate
    assert placement.g1 == G1("met")
    assert [e.certificate for e in placement.landing] == [entry.certificate]


def test_a_read_out_of_the_turn_marks_reach_marks_the_entry_itself():
    previous = conversation(1)
    payload = conversation(12)  # the last block is 33 positions past the previous turn's
    entry = row_for(previous, ("messages", 2, 0))
    placement = place(payload, ledger_of(entry))
    assert summary(placement) == [
        (("system", 0), "1h", "stable"),
        (("messages", 2, 0), "5m", "read"),
        (("messages", 24, 0), "5m", "turn"),
    ]
    assert placement.g1 == G1("met")


def test_the_read_keeps_the_entrys_lifetime():
    payload = conversation(12)
    entry = row_for(payload, ("messages", 2, 0), lifetime="1h")
    placement = place(payload, ledger_of(entry))
    assert (("messages", 2, 0), "1h", "read") in summary(placement)
    assert placement.g1 == G1("met")


def test_the_deepest_established_entry_is_the_read_target():
    payload = conversation(3)
    shallow = row_for(payload, ("messages", 2, 0))
    deep = row_for(payload, ("messages", 4, 0))
    placement = place(payload, ledger_of(shallow, deep))
    assert placement.read_target.certificate == deep.certificate
    assert {e.certificate for e in placement.landing} == {shallow.certificate, deep.certificate}


def test_expired_rows_are_not_candidates():
    payload = conversation(2)
    expired = row_for(payload, ("messages", 2, 0), expires=NOW)
    placement = place(payload, ledger_of(expired))
    assert placement.read_target is None
    assert placement.g1 == G1("excluded", "no_established_candidate")
    assert placement.landing == ()


def test_a_final_request_places_no_turn_mark_and_no_anchors():
    payload = conversation(12)
    entry = row_for(payload, ("messages", 2, 0))
    placement = place(payload, ledger_of(entry), intent="final", anchors=[("messages", 0, 0)])
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 2, 0), "5m", "read")]
    assert placement.g1 == G1("met")


def test_a_final_request_reads_through_the_entrys_own_block_even_when_close():
    payload = conversation(2)
    entry = row_for(payload, ("messages", 2, 0))
    placement = place(payload, ledger_of(entry), intent="final")
    assert (("messages", 2, 0), "5m", "read") in summary(placement)
    assert all(m.role != "turn" for m in placement.marks)


def test_a_side_request_places_only_the_stable_mark_and_reads_no_conversation_rows():
    payload = conversation(3)
    conversation_row = row_for(payload, ("messages", 4, 0))
    unknown = row_for(payload, ("messages", 6, 0), seen={})
    placement = place(payload, ledger_of(conversation_row, unknown), intent="side", anchors=[("messages", 0, 0)])
    assert summary(placement) == [(("system", 0), "1h", "stable")]
    assert placement.read_target is None
    assert placement.g1 == G1("excluded", "no_established_candidate")


def test_a_side_request_reads_the_stable_entry_through_the_stable_mark():
    payload = conversation(3)
    stable = row_for(payload, ("system", 0), lifetime="1h", length=700)
    placement = place(payload, ledger_of(stable), intent="side")
    assert summary(placement) == [(("system", 0), "1h", "stable")]
    assert placement.read_target.certificate == stable.certificate
    assert placement.g1 == G1("met")


def test_a_side_request_marks_a_stable_entry_its_stable_mark_does_not_reach():
    tools = [{"name": f"t{i}", "description": "d", "input_schema": {}} for i in range(25)]
    payload = {"model": "m", "tools": tools, "system": SYSTEM, "messages": [{"role": "user", "content": "summarise"}]}
    old_end = row_for(payload, ("tools", 2), lifetime="1h", length=300)
    placement = place(payload, ledger_of(old_end), intent="side")
    assert summary(placement) == [(("tools", 2), "1h", "read"), (("system", 0), "1h", "stable")]
    assert placement.g1 == G1("met")


def test_a_clone_with_an_empty_ledger_places_like_a_first_request():
    payload = conversation(3)
    assert summary(place(payload, CacheLedger.empty())) == summary(place(conversation(3)))


def test_a_ledger_without_evidence_turns_rows_into_probes():
    payload = conversation(12)
    rows = ledger_of(row_for(payload, ("messages", 2, 0)), row_for(payload, ("system", 0), lifetime="1h"))
    placement = place(payload, rows.without_evidence())
    assert placement.read_target is None
    assert placement.g1 == G1("excluded", "no_established_candidate")
    assert (("messages", 2, 0), "5m", "probe") in summary(placement)


def test_a_row_seen_by_another_process_is_not_established():
    payload = conversation(12)
    placement = place(payload, ledger_of(row_for(payload, ("messages", 2, 0), seen={"direct": OTHER})))
    assert placement.read_target is None
    assert (("messages", 2, 0), "5m", "probe") in summary(placement)


def test_after_a_history_rewrite_the_old_rows_no_longer_match():
    before = conversation(3)
    turn_row = row_for(before, ("messages", 6, 0), length=5_000)
    stable_row = row_for(before, ("system", 0), lifetime="1h", length=800)
    rewritten = conversation(3)
    rewritten["messages"][1]["content"][0]["text"] = "a note standing in for step 0"
    placement = place(rewritten, ledger_of(turn_row, stable_row))
    assert placement.read_target.certificate == stable_row.certificate
    assert [e.certificate for e in placement.landing] == [stable_row.certificate]
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 6, 0), "5m", "turn")]
    assert placement.g1 == G1("met")


# --- anchors and tail_skip --------------------------------------------------


def test_anchors_take_five_minute_marks_of_their_own_on_a_continuing_request():
    payload = conversation(3)
    placement = place(payload, anchors=[("messages", 0, 0), ("messages", 2, 0)])
    assert summary(placement) == [
        (("system", 0), "1h", "stable"),
        (("messages", 0, 0), "5m", "anchor"),
        (("messages", 2, 0), "5m", "anchor"),
        (("messages", 6, 0), "5m", "turn"),
    ]


def test_an_anchor_on_the_turn_block_is_one_mark():
    payload = conversation(1)
    placement = place(payload, anchors=[("messages", 2, 0)])
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 2, 0), "5m", "turn")]


def test_anchors_beyond_the_slots_are_recorded():
    payload = conversation(4)
    placement = place(payload, anchors=[("messages", 0, 0), ("messages", 2, 0), ("messages", 4, 0)])
    assert len(placement.marks) == 4
    assert [(s.role, s.reason, s.location) for s in placement.skipped] == [("anchor", "slots", ("messages", 4, 0))]


def tail_skip_selected() -> TailSkip:
    skip = TailSkip.decide(estimate=88_000, ceiling=100_000, context_fold_at=0.9)
    assert skip.selected
    return skip


def test_tail_skip_drops_the_turn_mark_and_reads_through_an_anchor():
    previous = conversation(2)
    payload = conversation(3)
    entry = row_for(previous, ("messages", 4, 0))
    placement = place(payload, ledger_of(entry), anchors=[("messages", 5, 1)], tail_skip=tail_skip_selected())
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 5, 1), "5m", "anchor")]
    assert placement.g1 == G1("met")
    assert placement.tail_skip.to_dict() == {"estimate": 88_000.0, "fold_line": 90_000.0, "margin": 0.045}


def test_tail_skip_reads_through_the_entrys_own_block_without_an_anchor_in_reach():
    previous = conversation(2)
    payload = conversation(3)
    entry = row_for(previous, ("messages", 4, 0))
    placement = place(payload, ledger_of(entry), tail_skip=tail_skip_selected())
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 4, 0), "5m", "read")]
    assert placement.g1 == G1("met")


def test_tail_skip_keeps_the_stable_mark_and_the_probes():
    payload = conversation(14)
    unknown = row_for(payload, ("messages", 2, 0), seen={})
    placement = place(payload, ledger_of(unknown), tail_skip=tail_skip_selected())
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 2, 0), "5m", "probe")]


def test_an_unselected_tail_skip_keeps_the_turn_mark_and_records_nothing():
    skip = TailSkip.decide(estimate=50_000, ceiling=100_000, context_fold_at=0.9)
    placement = place(conversation(2), tail_skip=skip)
    assert ("turn") in [m.role for m in placement.marks]
    assert placement.tail_skip is None


@pytest.mark.parametrize("intent", ["final", "side"])
def test_final_and_side_requests_ignore_tail_skip(intent):
    placement = place(conversation(2), intent=intent, tail_skip=tail_skip_selected())
    assert placement.tail_skip is None
    assert summary(placement) == summary(place(conversation(2), intent=intent))


# --- probes -----------------------------------------------------------------


def far_rows(payload, locations, **kwargs):
    return [row_for(payload, loc, **kwargs) for loc in locations]


def test_probes_go_deepest_first_and_record_when_slots_run_out():
    payload = conversation(60)
    # Tool-result blocks 30 rounds apart: no mark on one reaches another.
    locations = [("messages", 2 + 2 * 11 * k, 0) for k in range(5)]
    rows = far_rows(payload, locations, seen={})
    placement = place(payload, ledger_of(*rows))
    assert summary(placement) == [
        (("system", 0), "1h", "stable"),
        (locations[3], "5m", "probe"),
        (locations[4], "5m", "probe"),
        (("messages", 120, 0), "5m", "turn"),
    ]
    assert [(s.role, s.reason, s.location) for s in placement.skipped] == [("probe", "probe_slots", locations[2])]


def test_a_probe_is_skipped_when_a_mark_already_reaches_it():
    payload = conversation(3)
    unknown = row_for(payload, ("messages", 4, 0), seen={})
    placement = place(payload, ledger_of(unknown))
    assert [m.role for m in placement.marks] == ["stable", "turn"]
    assert [e.certificate for e in placement.landing] == [unknown.certificate]


def test_only_entries_deeper_than_the_read_target_are_probed():
    payload = conversation(40)
    shallow_unknown = row_for(payload, ("messages", 2, 0), seen={})
    target = row_for(payload, ("messages", 40, 0))
    deep_unknown = row_for(payload, ("messages", 60, 0), seen={}, lifetime="5m")
    placement = place(payload, ledger_of(shallow_unknown, target, deep_unknown))
    assert summary(placement) == [
        (("system", 0), "1h", "stable"),
        (("messages", 40, 0), "5m", "read"),
        (("messages", 60, 0), "5m", "probe"),
        (("messages", 80, 0), "5m", "turn"),
    ]


def test_a_probe_keeps_its_entrys_lifetime():
    payload = conversation(20)
    unknown = row_for(payload, ("messages", 2, 0), seen={}, lifetime="1h")
    placement = place(payload, ledger_of(unknown))
    assert (("messages", 2, 0), "1h", "probe") in summary(placement)


# --- lifetimes ordered in both directions ---------------------------------


def test_a_one_hour_mark_after_a_five_minute_mark_is_not_placed():
    payload = conversation(2)
    caller = [Mark(("tools", 0), "5m", "caller")]
    placement = place(payload, caller_marks=caller)
    assert summary(placement) == [(("tools", 0), "5m", "caller"), (("messages", 4, 0), "5m", "turn")]
    assert [(s.role, s.reason) for s in placement.skipped] == [("stable", "ttl_order")]


def test_a_five_minute_mark_before_a_one_hour_mark_is_not_placed():
    payload = conversation(2)
    caller = [Mark(("messages", 4, 0), "1h", "caller")]
    placement = place(payload, caller_marks=caller, anchors=[("messages", 2, 0)])
    assert summary(placement) == [(("system", 0), "1h", "stable"), (("messages", 4, 0), "1h", "caller")]
    assert [(s.role, s.reason) for s in placement.skipped] == [("turn", "ttl_order"), ("anchor", "ttl_order")]


def test_a_read_whose_lifetime_would_break_the_order_is_not_placed_nor_changed():
    payload = conversation(14)
    entry = row_for(payload, ("messages", 2, 0), lifetime="5m")
    caller = [Mark(("messages", 20, 0), "1h", "caller")]
    placement = place(payload, ledger_of(entry), caller_marks=caller)
    assert all(m.location != ("messages", 2, 0) for m in placement.marks)
    assert ("read", "ttl_order") in [(s.role, s.reason) for s in placement.skipped]
    assert placement.g1 == G1("excluded", "ttl_order")


def test_a_one_hour_read_after_a_five_minute_caller_mark_is_not_placed():
    payload = conversation(14)
    entry = row_for(payload, ("messages", 22, 0), lifetime="1h")
    caller = [Mark(("messages", 0, 0), "5m", "caller")]
    placement = place(payload, ledger_of(entry), caller_marks=caller, intent="final")
    assert placement.g1 == G1("excluded", "ttl_order")


def test_a_callers_mark_at_the_stable_end_is_raised_to_one_hour():
    payload = conversation(2)
    placement = place(payload, caller_marks=[Mark(("system", 0), "5m", "caller")])
    assert (("system", 0), "1h", "caller") in summary(placement)
    assert all(m.role != "stable" for m in placement.marks)


def test_a_callers_stable_mark_is_not_raised_after_a_five_minute_mark():
    payload = conversation(2)
    caller = [Mark(("tools", 0), "5m", "caller"), Mark(("system", 0), "5m", "caller")]
    placement = place(payload, caller_marks=caller)
    assert (("system", 0), "5m", "caller") in summary(placement)
    assert ("stable", "ttl_order") in [(s.role, s.reason) for s in placement.skipped]


# --- routes -----------------------------------------------------------------


def test_one_route_established():
    payload = conversation(2)
    entry = row_for(payload, ("messages", 2, 0), seen={"direct": ME})
    assert place(payload, ledger_of(entry), route="direct").g1 == G1("met")


def test_two_routes_need_evidence_on_both():
    payload = conversation(2)
    entry = row_for(payload, ("messages", 2, 0), seen={"direct": ME, "acct-a": ME})
    placement = place(payload, ledger_of(entry), route=["direct", "acct-a"])
    assert placement.g1 == G1("met")
    assert placement.read_target.established_routes == ("direct", "acct-a")
    assert placement.routes == ("direct", "acct-a")


def test_evidence_on_one_of_two_routes_is_route_unselected_and_probed():
    payload = conversation(14)
    entry = row_for(payload, ("messages", 2, 0), seen={"direct": ME})
    placement = place(payload, ledger_of(entry), route=["direct", "acct-a"])
    assert placement.read_target is None
    assert placement.g1 == G1("excluded", "route_unselected")
    assert (("messages", 2, 0), "5m", "probe") in summary(placement)


def test_evidence_from_another_process_on_the_other_route_does_not_count():
    payload = conversation(2)
    entry = row_for(payload, ("messages", 2, 0), seen={"direct": ME, "acct-a": OTHER})
    placement = place(payload, ledger_of(entry), route=["direct", "acct-a"])
    assert placement.g1 == G1("excluded", "route_unselected")


# --- each g1 exclusion ------------------------------------------------------


def test_g1_ledger_evicted_while_the_watermark_is_ahead():
    payload = conversation(2)
    entry = row_for(payload, ("messages", 2, 0))
    assert place(payload, ledger_of(entry, watermark=NOW + 1)).g1 == G1("excluded", "ledger_evicted")
    assert place(payload, ledger_of(entry, watermark=NOW)).g1 == G1("met")


def test_g1_caller_marks_when_the_callers_marks_leave_no_slot_for_the_read():
    payload = conversation(40)
    entry = row_for(payload, ("messages", 40, 0))
    caller = [Mark(("messages", m, 0), "5m", "caller") for m in (2, 4, 6, 8)]
    placement = place(payload, ledger_of(entry), caller_marks=caller)
    assert summary(placement) == [(loc, "5m", "caller") for loc in [("messages", m, 0) for m in (2, 4, 6, 8)]]
    assert placement.g1 == G1("excluded", "caller_marks")
    assert ("read", "slots") in [(s.role, s.reason) for s in placement.skipped]


def test_caller_marks_that_reach_the_target_meet_g1():
    payload = conversation(3)
    entry = row_for(payload, ("messages", 4, 0))
    placement = place(payload, ledger_of(entry), caller_marks=[Mark(("messages", 6, 0), "5m", "caller")])
    assert placement.g1 == G1("met")


def test_g1_length_unknown():
    payload = conversation(2)
    entry = row_for(payload, ("messages", 2, 0), length=None)
    placement = place(payload, ledger_of(entry))
    assert placement.g1 == G1("excluded", "length_unknown")
    assert placement.read_target.certificate == entry.certificate


def test_g1_values_are_checked():
    with pytest.raises(CacheInputError, match="exclusion reason"):
        G1("excluded", "bored")
    with pytest.raises(CacheInputError, match="takes no reason"):
        G1("met", "ttl_order")
    with pytest.raises(CacheInputError, match="status"):
        G1("maybe")  # type: ignore[arg-type]
    assert G1("defect").label() == "defect"
    assert G1("excluded", "ttl_order").label() == "excluded:ttl_order"


# --- the record and the refs ------------------------------------------------


def test_the_placement_record_is_json_ready():
    previous = conversation(1)
    payload = conversation(2)
    entry = row_for(previous, ("messages", 2, 0))
    record = place(payload, ledger_of(entry), tail_skip=tail_skip_selected()).to_record()
    assert record["g1"] == "met"
    assert record["read_target"] == entry.certificate
    assert record["marks"] == [
        {"location": ["system", 0], "ttl": "1h", "role": "stable"},
        {"location": ["messages", 2, 0], "ttl": "5m", "role": "read"},
    ]
    assert record["landing"][0]["certificate"] == entry.certificate
    assert record["tail_skip"] == {"estimate": 88_000.0, "fold_line": 90_000.0, "margin": 0.045}


def test_mark_refs_carry_the_marked_blocks_certificates():
    payload = conversation(2)
    placement = place(payload)
    assert [ref.location for ref in placement.mark_refs] == [m.location for m in placement.marks]
    assert placement.ref_at(("messages", 4, 0)) == ref_at(payload, ("messages", 4, 0))
    with pytest.raises(CacheInputError, match="carries no mark"):
        placement.ref_at(("messages", 0, 0))


def test_the_certification_is_reused_for_the_next_request():
    first = place(conversation(2))
    second = place(conversation(3), previous=first.certified)
    assert second.certified.refs == certify(conversation(3))
    assert second.certified.reused_messages(first.certified) == 5


def test_a_server_tool_is_noticed():
    payload = conversation(1)
    payload["tools"].append({"type": "web_search_20250305", "name": "web_search"})
    assert place(payload).server_tool
    assert not place(conversation(1)).server_tool


# --- bad input --------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"intent": "maybe"}, "intent 'maybe'"),
        ({"now": float("nan")}, "now nan"),
        ({"now": True}, "now True"),
        ({"route": []}, "no route given"),
        ({"route": ["direct", "direct"]}, "names a route twice"),
        ({"route": [""]}, "route ''"),
        ({"process_id": ""}, "process_id ''"),
        ({"anchors": [("messages", 9, 0)]}, "not a block of the payload"),
        ({"anchors": [("system", 0)]}, "not a message block"),
        ({"anchors": [("messages", 0)]}, "not a block location"),
        ({"caller_marks": [Mark(("messages", 9, 0), "5m", "caller")]}, "not a block of the payload"),
        ({"caller_marks": [Mark(("messages", m, 0), "5m", "caller") for m in range(5)]}, "at most 4"),
        (
            {"caller_marks": [Mark(("messages", 0, 0), "5m", "caller"), Mark(("messages", 2, 0), "1h", "caller")]},
            "must come first",
        ),
        ({"tail_skip": 0.5}, "expected a TailSkip"),
        ({"lookback": 0}, "lookback 0"),
    ],
)
def test_bad_arguments_are_refused(kwargs, fragment):
    with pytest.raises(CacheInputError, match=fragment.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        place(conversation(2), **kwargs)


def test_a_ledger_must_be_a_cache_ledger():
    with pytest.raises(CacheInputError, match="expected a CacheLedger"):
        place_marks(conversation(1), ledger={}, now=NOW, route="direct", process_id=ME)  # type: ignore[arg-type]


def test_a_mark_on_a_thinking_block_is_refused():
    payload = conversation(1)
    payload["messages"].append(
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "t", "signature": "s"}, {"type": "text", "text": "x"}],
        }
    )
    with pytest.raises(CacheInputError, match="thinking block that takes no mark"):
        place(payload, anchors=[("messages", 3, 0)])
    with pytest.raises(CacheInputError, match="thinking block that takes no mark"):
        place(payload, caller_marks=[Mark(("messages", 3, 0), "5m", "caller")])


def test_mark_values_are_checked():
    with pytest.raises(CacheInputError, match="mark ttl '10m'"):
        Mark(("messages", 0, 0), "10m", "turn")  # type: ignore[arg-type]
    with pytest.raises(CacheInputError, match="mark role 'boss'"):
        Mark(("messages", 0, 0), "5m", "boss")  # type: ignore[arg-type]
    assert Mark(["messages", 0, 0], "5m", "turn").location == ("messages", 0, 0)  # type: ignore[arg-type]


def test_the_placement_record_names_every_field_of_its_entries_and_skips():
    previous = conversation(1)
    payload = conversation(4)
    entry = row_for(previous, ("messages", 2, 0), lifetime="1h", length=1_234)
    placement = place(payload, ledger_of(entry), anchors=[("messages", 0, 0), ("messages", 2, 0), ("messages", 4, 0)])
    record = placement.to_record()
    assert set(record) == {"intent", "marks", "landing", "g1", "read_target", "skipped"}
    assert record["intent"] == placement.intent
    assert record["landing"][0] == {
        "certificate": entry.certificate,
        "location": ["messages", 2, 0],
        "lifetime": "1h",
        "stored_length": 1_234,
        "expires_at": entry.expires_at,
        "established_routes": ["direct"],
    }
    skips = [{"role": s.role, "reason": s.reason, "location": list(s.location)} for s in placement.skipped]
    assert record["skipped"] == skips
    assert record["skipped"] and all(skip["location"] is not None for skip in record["skipped"])


def test_a_skip_with_no_place_records_none():
    from runtime.cache.record import Skipped

    assert Skipped("turn", "unmarkable").to_dict() == {"role": "turn", "reason": "unmarkable", "location": None}
    assert Skipped("probe", "probe_slots", ("messages", 3, 1)).to_dict()["location"] == ["messages", 3, 1]


def test_a_placement_with_no_mark_has_no_deepest_mark():
    payload = conversation(0, tools=False, system=False)
    payload["messages"].append(
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]}
    )
    placement = place(payload)
    assert placement.marks == () and placement.deepest_mark() is None
    assert len(CacheLedger.empty().after_response(placement, Usage(input_tokens=9), NOW, "direct", ME)) == 0
