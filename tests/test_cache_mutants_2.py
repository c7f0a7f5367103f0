"""More cache rules a mutation run found unpinned (scripts/mutation): each test names the rule it pins.

Like ``test_cache_mutants.py``: every test here was written against a mutant of
``runtime/cache`` that the module's other tests let through, named in the
comment above it.
"""

from __future__ import annotations

import pytest

from runtime.cache.certificates import certify_payload
from runtime.cache.errors import CacheInputError
from runtime.cache.ledger import CacheLedger
from runtime.cache.marks import Mark
from runtime.cache.placement import place_marks
from runtime.cache.record import G1, INTENTS, Skipped
from runtime.cache.rewrites import Rewrite, find_rewrite, stable_digests
from runtime.cache.rows import LedgerRow
from runtime.request.prepared import PreparedMessage, PreparedPayload, prepare_block


# ledger CacheLedger.__attrs_post_init__ mutmut_2: a bool is not a row count (True would pass as 1).
@pytest.mark.parametrize("flag", [True, False])
def test_a_ledger_refuses_a_bool_as_its_row_bound(flag):
    with pytest.raises(CacheInputError) as refused:
        CacheLedger(max_rows=flag)
    assert str(refused.value) == f"max_rows {flag!r} is not a positive integer"


# placement: the helpers of tests/test_cache_placement.py, over a longer tool loop.
def _placement_fixture():
    from tests.test_cache_placement import conversation, ledger_of, place, row_for

    return conversation, ledger_of, place, row_for


def test_probes_go_deepest_first_and_a_probe_the_order_refuses_does_not_stop_the_shallower_ones():
    # placement _place_probes mutmut_35..43: the refused probe is recorded as such, and the loop goes on.
    conversation, ledger_of, place, row_for = _placement_fixture()
    payload = conversation(8)
    deep, middle, shallow = ("messages", 14, 0), ("messages", 8, 0), ("messages", 2, 0)
    rows = [
        row_for(payload, deep, lifetime="1h", seen={"direct": "proc-0"}),
        row_for(payload, middle, lifetime="5m", seen={"direct": "proc-0"}),
        row_for(payload, shallow, lifetime="1h", seen={"direct": "proc-0"}),
    ]
    placed = place(payload, ledger_of(*rows), intent="final", lookback=2)
    assert [(m.location, m.ttl, m.role) for m in placed.marks] == [
        (("system", 0), "1h", "stable"),
        (shallow, "1h", "probe"),
        (deep, "1h", "probe"),
    ]
    assert placed.skipped == (Skipped("probe", "ttl_order", middle),)


def test_an_entry_a_mark_already_reaches_is_not_probed_and_the_walk_goes_on_to_shallower_ones():
    # placement _place_probes mutmut_15 (continue -> break), MarkSet.reach mutmut_7 (the lookback dropped).
    conversation, ledger_of, place, row_for = _placement_fixture()
    payload = conversation(8)
    near_end, early = ("messages", 15, 1), ("messages", 2, 0)
    rows = [row_for(payload, loc, seen={"direct": "proc-0"}) for loc in (near_end, early)]
    placed = place(payload, ledger_of(*rows), lookback=2)
    roles = {m.location: m.role for m in placed.marks}
    assert roles[early] == "probe"
    assert near_end not in roles  # the turn mark at the end reaches it
    assert placed.skipped == ()


def test_no_probe_for_an_unknown_entry_shallower_than_the_read_target():
    # placement _place_in_order mutmut_44, _place_probes mutmut_1, _2, _7: probes only go deeper than the target.
    conversation, ledger_of, place, row_for = _placement_fixture()
    payload = conversation(8)
    target, shallow = ("messages", 14, 0), ("messages", 2, 0)
    rows = [row_for(payload, target), row_for(payload, shallow, seen={"direct": "proc-0"})]
    placed = place(payload, ledger_of(*rows), intent="final", lookback=2)
    assert [(m.location, m.role) for m in placed.marks] == [(("system", 0), "stable"), (target, "read")]
    assert placed.g1 == G1("met")


def test_a_planned_turn_serves_the_read_only_within_the_lookback_given():
    # placement _place_read mutmut_10: the planned mark reaches the target under the request's lookback.
    conversation, ledger_of, place, row_for = _placement_fixture()
    payload = conversation(8)
    target = ("messages", 12, 0)
    placed = place(payload, ledger_of(row_for(payload, target)), lookback=2)
    assert {(m.location, m.role) for m in placed.marks} == {
        (("system", 0), "stable"),
        (target, "read"),
        (("messages", 16, 0), "turn"),
    }


def test_a_callers_mark_on_the_turn_block_stands_for_the_turn_without_a_skip():
    # placement _MarkSet.obstacle mutmut_4 (same lifetime is no obstacle), _caller_marks mutmut_20 (role caller).
    conversation, _ledger_of, place, _row_for = _placement_fixture()
    payload = conversation(2)
    turn = ("messages", 4, 0)
    placed = place(payload, caller_marks=[Mark(turn, "5m", "turn")])
    assert Mark(turn, "5m", "caller") in placed.marks
    assert all(m.role != "turn" for m in placed.marks)
    assert placed.skipped == ()


def test_a_read_served_by_the_stable_mark_leaves_no_stable_skip():
    # placement _MarkSet.place_stable mutmut_6, _7: an existing 1h mark at the stable block is the stable mark.
    conversation, ledger_of, place, row_for = _placement_fixture()
    payload = conversation(1)
    row = row_for(payload, ("system", 0), lifetime="1h")
    placed = place(payload, ledger_of(row), intent="final")
    assert placed.marks == (Mark(("system", 0), "1h", "stable"),)
    assert placed.skipped == ()
    assert placed.g1 == G1("met")


def test_a_callers_5m_stable_mark_is_raised_to_1h_only_after_1h_marks():
    # placement _MarkSet.place_stable mutmut_23, _24 (raised) and mutmut_46 (the refusal names its block).
    conversation, _ledger_of, place, _row_for = _placement_fixture()
    payload = conversation(1)
    raised = place(
        payload, intent="final", caller_marks=[Mark(("tools", 1), "1h", "caller"), Mark(("system", 0), "5m", "caller")]
    )
    assert Mark(("system", 0), "1h", "caller") in raised.marks
    assert raised.skipped == ()
    kept = place(
        payload, intent="final", caller_marks=[Mark(("tools", 1), "5m", "caller"), Mark(("system", 0), "5m", "caller")]
    )
    assert Mark(("system", 0), "5m", "caller") in kept.marks
    assert kept.skipped == (Skipped("stable", "ttl_order", ("system", 0)),)


def test_a_planned_stable_mark_that_breaks_the_order_does_not_serve_the_read():
    # placement _place_read mutmut_12 (the planned mark's own lifetime is checked) and mutmut_38 (skip names it).
    conversation, ledger_of, place, row_for = _placement_fixture()
    payload = conversation(1)
    row = row_for(payload, ("system", 0), lifetime="1h")
    placed = place(payload, ledger_of(row), intent="final", caller_marks=[Mark(("tools", 1), "5m", "caller")])
    assert placed.g1 == G1("excluded", "ttl_order")
    assert Skipped("read", "ttl_order", ("system", 0)) in placed.skipped
    assert [m.location for m in placed.marks] == [("tools", 1)]


def test_an_anchor_on_a_callers_mark_of_another_lifetime_is_left_to_it():
    # placement _place_in_order mutmut_50: an anchor where a mark already sits takes no mark and no skip.
    conversation, _ledger_of, place, _row_for = _placement_fixture()
    payload = conversation(2)
    anchor = ("messages", 2, 0)
    placed = place(payload, anchors=[anchor], caller_marks=[Mark(anchor, "1h", "caller")])
    assert Mark(anchor, "1h", "caller") in placed.marks
    assert all(s.role != "anchor" for s in placed.skipped)


def test_a_placement_records_its_intent():
    # placement place_marks mutmut_139.
    conversation, _ledger_of, place, _row_for = _placement_fixture()
    assert place(conversation(1), intent="final").intent == "final"
    assert place(conversation(1), intent="side").intent == "side"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"intent": "later"}, f"intent 'later' is not one of {', '.join(INTENTS)}"),
        ({"ledger": {}}, "ledger is dict, expected a CacheLedger"),
        ({"tail_skip": "yes"}, "tail_skip is str, expected a TailSkip or None"),
        ({"lookback": True}, "lookback True is not a positive integer"),
        ({"route": []}, "route: no route given; expected a route name or the routes the request can take"),
    ],
)
def test_place_marks_refuses_bad_arguments_naming_them(changes, message):
    # placement _check_arguments mutmut_4, _7, _22, _24; _routes mutmut_7.
    conversation, _ledger_of, _place, _row_for = _placement_fixture()
    arguments = {"ledger": CacheLedger.empty(), "now": 1_000.0, "route": "direct", "process_id": "proc-1"}
    arguments.update(changes)
    with pytest.raises(CacheInputError) as refused:
        place_marks(conversation(1), **arguments)
    assert str(refused.value) == message


def test_bad_anchors_and_caller_marks_are_refused_under_their_own_names():
    # placement _anchors mutmut_4..8, _caller_marks mutmut_4..8.
    conversation, _ledger_of, place, _row_for = _placement_fixture()
    with pytest.raises(CacheInputError, match=r"^anchor \('bogus',\) is not a block location"):
        place(conversation(1), anchors=[("bogus",)])
    marks = [Mark(("messages", 0, 0), "5m", "caller"), Mark(("messages", 0, 0), "5m", "caller")]
    with pytest.raises(CacheInputError, match=r"^caller_marks: two marks on"):
        place(conversation(1), caller_marks=marks)


def _row(**changes: object) -> LedgerRow:
    fields: dict[str, object] = {
        "certificate": "0123456789abcdef",
        "lifetime": "5m",
        "tier": "messages",
        "stored_length": 1_000,
        "last_marked": 900.0,
        "last_read": None,
        "expires_at": 1_200.0,
    }
    fields.update(changes)
    return LedgerRow(**fields)  # type: ignore[arg-type]


# rows LedgerRow.__attrs_post_init__ mutmut_4, _5, _9: the refusals name the row (first 12 characters) and the tiers.
def test_a_ledger_row_refuses_a_bad_lifetime_or_tier_naming_the_row():
    with pytest.raises(CacheInputError) as lifetime:
        _row(lifetime="2h")
    assert str(lifetime.value) == "ledger row 0123456789ab lifetime '2h' is not a cache lifetime; expected '5m' or '1h'"
    with pytest.raises(CacheInputError) as tier:
        _row(tier="history")
    assert str(tier.value) == "ledger row tier 'history' is not one of tools, system, messages"


# placement place_marks mutmut_23: the request's collapse_runs reaches the certificates.
@pytest.mark.parametrize("collapse", [True, False])
def test_place_marks_certifies_with_the_collapse_rule_given(collapse):
    conversation, _ledger_of, place, _row_for = _placement_fixture()
    payload = conversation(2)
    placed = place(payload, collapse_runs=collapse)
    assert placed.certified.collapse_runs is collapse
    assert placed.certified.refs == certify_payload(payload, collapse_runs=collapse).refs


# placement place_marks mutmut_171: a prepared payload says itself whether it carries a server tool.
@pytest.mark.parametrize("server_tool", [True, False])
def test_a_prepared_payloads_server_tool_flag_reaches_the_placement(server_tool):
    text = prepare_block('{"text":"rules","type":"text"}', "text")
    messages = {"u1": PreparedMessage(b'{"role":"user"}', (prepare_block('{"text":"hi","type":"text"}', "text"),))}
    payload = PreparedPayload("m", (), (text,), ("u1",), messages.__getitem__, server_tool=server_tool)
    placed = place_marks(payload, ledger=CacheLedger.empty(), now=1_000.0, route="direct", process_id="proc-1")
    assert placed.server_tool is server_tool


# placement _check_arguments mutmut_26, _27: a lookback of one block is allowed (and 0 is not).
def test_a_lookback_of_one_block_is_allowed():
    conversation, _ledger_of, place, _row_for = _placement_fixture()
    assert place(conversation(1), lookback=1).g1 == G1("excluded", "no_established_candidate")
    with pytest.raises(CacheInputError, match=r"^lookback 0 is not a positive integer$"):
        place(conversation(1), lookback=0)


# rewrites stable_digests mutmut_9, find_rewrite mutmut_20: a model change rewrites the prefix, and the cause names
# every stable part that changed.
def test_a_stable_change_names_every_part_that_changed():
    before = stable_digests(['{"name":"read"}'], "rules", "m1", None)
    model = stable_digests(['{"name":"read"}'], "rules", "m2", None)
    both = stable_digests(['{"name":"grep"}'], "other rules", "m1", None)
    assert find_rewrite(before, ["a"], model, ["a"], None) == Rewrite(0, "stable segment changed: model")
    assert find_rewrite(before, ["a"], both, ["a"], None) == Rewrite(0, "stable segment changed: tools, system text")
    assert find_rewrite(before, ["a"], before, ["a", "b"], None) is None


# certificates CertifiedPayload.ref_at mutmut_11, _16, _17, _21, _22, _26, _38, _39, _47, _48: every block is found
# at its location, and a location one past any tier's end (or malformed) finds none.
def test_ref_at_finds_every_block_and_nothing_past_the_ends():
    conversation, _ledger_of, _place, _row_for = _placement_fixture()
    payload = conversation(2)  # two tools, one system block, five messages
    certified = certify_payload(payload)
    for ref in certified.refs:
        assert certified.ref_at(ref.location) is ref
    for missing in [
        ("tools", 2),
        ("tools", -1),
        ("system", 1),
        ("system", -1),
        ("messages", 5, 0),
        ("messages", 1, 2),
        ("messages", 1, -1),
        ("messages", 1),
        ("tools", 0, 0),
    ]:
        assert certified.ref_at(missing) is None, missing
