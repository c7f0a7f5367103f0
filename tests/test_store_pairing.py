"""Commit order: a response's usage event and its batch always land in one unit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from runtime.store.pairing import ResponsePairing


def _pairing(**kwargs):
    units: list[list] = []
    pairing = ResponsePairing(lambda unit: units.append([sql for sql, _ in unit]), capture_events=True, **kwargs)
    return pairing, units


def s(name: str) -> list:
    return [(name, ())]


def test_a_batch_waits_for_its_event_and_everything_after_waits_behind_it() -> None:
    pairing, units = _pairing()
    pairing.batch("b1", s("response-1"), awaits="r1")
    pairing.batch("b2", s("other-branch"), awaits=None)
    pairing.event("NodeStarted", "b3", None, s("node-started"))
    assert units == [] and pairing.held == 3
    pairing.event("ResponseReceived", "b1", "r1", s("event-r1"))
    assert units == [["response-1", "event-r1"], ["other-branch"], ["node-started"]]
    assert pairing.held == 0


def test_an_event_before_its_batch_joins_the_branch_next_batch() -> None:
    pairing, units = _pairing()
    pairing.event("ResponseReceived", "b1", "r1", s("event-r1"))
    pairing.event("RequestSent", "b2", "r9", s("sent-r9"))
    assert units == [["sent-r9"]]
    pairing.batch("b1", s("response-1"), awaits="r1")
    assert units == [["sent-r9"], ["response-1", "event-r1"]]


def test_an_event_joining_a_batch_without_its_record_releases_the_record_later() -> None:
    pairing, units = _pairing()
    pairing.event("ResponseReceived", "b1", "side-1", s("event-side"))
    pairing.batch("b1", s("fold-commit"), awaits=None)
    pairing.batch("b1", s("record-side"), awaits="side-1")
    assert units == [["fold-commit", "event-side"], ["record-side"]]


def test_nothing_waits_without_an_event_stream() -> None:
    pairing, units = _pairing()
    pairing.capture_events = False
    pairing.batch("b1", s("response-1"), awaits="r1")
    assert units == [["response-1"]]


def test_release_all_lets_everything_go_in_order_and_a_late_event_goes_alone() -> None:
    pairing, units = _pairing()
    pairing.batch("b1", s("response-1"), awaits="r1")
    pairing.batch("b2", s("after"), awaits=None)
    pairing.event("ResponseReceived", "b3", "r3", s("early-r3"))
    pairing.release_all()
    assert units == [["response-1"], ["after"], ["early-r3"]]
    pairing.event("ResponseReceived", "b1", "r1", s("late-r1"))
    assert units[-1] == ["late-r1"]


def test_a_batch_never_waits_past_the_bound() -> None:
    pairing, units = _pairing(max_held=2)
    pairing.batch("b1", s("response-1"), awaits="r1")
    pairing.batch("b2", s("x"), awaits=None)
    assert units == []
    pairing.batch("b2", s("y"), awaits=None)
    assert units == [["response-1"], ["x"], ["y"]]


@given(st.permutations(range(6)))
def test_each_response_commits_with_its_event_in_any_arrival_order(order) -> None:
    """Batches arrive in order; each event arrives somewhere around its batch; every pair shares a unit."""
    pairing, units = _pairing()
    events = [("event", i) for i in range(3)]
    # Interleave the events into the batch sequence at positions the permutation picks.
    positions = sorted(order[:3])
    merged = [("batch", i) for i in range(3)]
    for offset, (position, event) in enumerate(zip(positions, events, strict=True)):
        merged.insert(min(position + offset, len(merged)), event)
    for kind, i in merged:
        if kind == "batch":
            pairing.batch(f"b{i}", s(f"batch-{i}"), awaits=f"r{i}")
        else:
            pairing.event("ResponseReceived", f"b{i}", f"r{i}", s(f"event-{i}"))
    pairing.release_all()
    flat_units = [set(unit) for unit in units]
    for i in range(3):
        assert any({f"batch-{i}", f"event-{i}"} <= unit for unit in flat_units)
    batches = [name for unit in units for name in unit if name.startswith("batch")]
    assert batches == ["batch-0", "batch-1", "batch-2"]


def test_a_stopped_run_drops_what_waits_as_if_the_process_had_stopped_there() -> None:
    pairing, units = _pairing()
    pairing.batch("b0", s("before"), awaits=None)
    pairing.batch("b1", s("response-1"), awaits="r1")
    pairing.batch("b2", s("after"), awaits=None)
    pairing.event("ResponseReceived", "b3", "r3", s("early-r3"))
    assert pairing.drop_held() == 3
    pairing.release_all()
    assert units == [["before"]]
