"""The cache ledger after a request completes: writes, reads, routes, expiry, eviction, records."""

from __future__ import annotations

import attrs
import pytest

from runtime.cache.certificates import certify
from runtime.cache.errors import CacheInputError
from runtime.cache.ledger import MAX_ROWS, CacheLedger
from runtime.cache.placement import place_marks
from runtime.cache.record import G1
from runtime.cache.rows import LedgerRow
from runtime.values.usage import Usage

ME = "proc-1"
OTHER = "proc-0"
T0 = 10_000.0


def conversation(rounds: int) -> dict:
    messages = [{"role": "user", "content": [{"type": "text", "text": "the task"}]}]
    for r in range(rounds):
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"c{r}", "name": "read", "input": {"n": r}}]}
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{r}", "content": f"out {r}"}]}
        )
    return {
        "model": "claude-haiku-5-5",
        "max_tokens": 1000,
        "tools": [{"name": "read", "description": "read a file", "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": "You are careful."}],
        "messages": messages,
    }


def place(payload, ledger, *, now=T0, route="direct", **kwargs):
    return place_marks(payload, ledger=ledger, now=now, route=route, process_id=ME, **kwargs)


def cert(payload, location) -> str:
    return {ref.location: ref.certificate for ref in certify(payload)}[location]


def fake_row(i: int, *, lifetime="5m", length=100, expires=T0 + 200) -> LedgerRow:
    return LedgerRow(
        certificate=f"{i:064x}",
        lifetime=lifetime,
        tier="messages",
        stored_length=length,
        last_marked=T0 - 50,
        last_read=None,
        expires_at=expires,
        seen={"direct": ME},
    )


FIRST_USAGE = Usage(input_tokens=20, cache_write_1h_tokens=800, cache_write_5m_tokens=400, output_tokens=30)


def test_the_first_request_writes_one_row_per_mark():
    payload = conversation(1)
    placement = place(payload, CacheLedger.empty())
    ledger = CacheLedger.empty().after_response(placement, FIRST_USAGE, T0 + 1, "direct", ME)
    stable = ledger.get(cert(payload, ("system", 0)))
    turn = ledger.get(cert(payload, ("messages", 2, 0)))
    assert len(ledger) == 2
    assert stable == LedgerRow(
        certificate=cert(payload, ("system", 0)),
        lifetime="1h",
        tier="system",
        stored_length=800,  # read 0 + the 1h write: the deepest 1h mark
        last_marked=T0 + 1,
        last_read=None,
        expires_at=T0 + 1 + 3600,
        seen={"direct": ME},
    )
    assert turn.lifetime == "5m"
    assert turn.tier == "messages"
    assert turn.stored_length == 1_200  # read + all writes: the deepest mark
    assert turn.expires_at == T0 + 1 + 300
    assert turn.established(["direct"], ME)
    assert not turn.established(["direct"], OTHER)


def test_a_request_that_cached_nothing_writes_no_row():
    payload = conversation(1)
    placement = place(payload, CacheLedger.empty())
    ledger = CacheLedger.empty().after_response(placement, Usage(input_tokens=300, output_tokens=5), T0, "direct", ME)
    assert len(ledger) == 0


def test_with_a_server_tool_no_stored_length_is_recorded():
    payload = conversation(1)
    payload["tools"].append({"type": "web_fetch_20250910", "name": "web_fetch"})
    placement = place(payload, CacheLedger.empty())
    ledger = CacheLedger.empty().after_response(placement, FIRST_USAGE, T0, "direct", ME)
    assert len(ledger) == 2
    assert all(row.stored_length is None for row in ledger.rows.values())


def test_an_identified_read_moves_the_read_time_and_renews_the_lifetime():
    first_payload = conversation(1)
    first = place(first_payload, CacheLedger.empty())
    ledger = CacheLedger.empty().after_response(first, FIRST_USAGE, T0, "direct", ME)
    second = place(conversation(2), ledger, now=T0 + 100)
    usage = Usage(input_tokens=10, cache_read_input_tokens=1_200, cache_write_5m_tokens=90)
    after = ledger.after_response(second, usage, T0 + 120, "direct", ME)
    old_turn = after.get(cert(first_payload, ("messages", 2, 0)))
    assert old_turn.last_read == T0 + 120
    assert old_turn.expires_at == T0 + 120 + 300
    assert old_turn.last_marked == T0  # not marked by the second request
    new_turn = after.get(cert(conversation(2), ("messages", 4, 0)))
    assert new_turn.stored_length == 1_290


def test_a_marked_row_keeps_a_shorter_live_lifetime():
    payload = conversation(1)
    turn_cert = cert(payload, ("messages", 2, 0))
    five_minute = LedgerRow(turn_cert, "5m", "messages", 1_200, T0 - 10, None, T0 + 290, {"direct": ME})
    ledger = CacheLedger(rows={turn_cert: five_minute})
    from runtime.cache.marks import Mark

    placement = place(payload, ledger, caller_marks=[Mark(("messages", 2, 0), "1h", "caller")])
    after = ledger.after_response(placement, Usage(cache_read_input_tokens=1_200), T0, "direct", ME)
    assert after.get(turn_cert).lifetime == "5m"
    assert after.get(turn_cert).expires_at == T0 + 300


def test_a_retry_on_a_second_route_adds_that_routes_evidence():
    payload = conversation(1)
    routes = ["direct", "acct-b"]
    placement = place(payload, CacheLedger.empty(), route=routes)
    # The first attempt (direct) returned no usage, so no rows; the retry on acct-b completed.
    ledger = CacheLedger.empty().after_response(placement, FIRST_USAGE, T0 + 5, "acct-b", ME)
    turn = ledger.get(cert(payload, ("messages", 2, 0)))
    assert turn.seen == (("acct-b", ME),)
    assert place(conversation(2), ledger, now=T0 + 30, route="acct-b").g1 == G1("met")
    nxt = place(conversation(2), ledger, now=T0 + 30, route=routes, intent="final")
    assert nxt.g1 == G1("excluded", "route_unselected")
    assert ("messages", 2, 0) in [m.location for m in nxt.marks if m.role == "probe"]
    ledger = ledger.after_response(nxt, Usage(input_tokens=50, cache_read_input_tokens=1_200), T0 + 31, "direct", ME)
    # The probe marked the entry, so it is now recorded as seen on direct too.
    assert ledger.get(cert(payload, ("messages", 2, 0))).seen == (("acct-b", ME), ("direct", ME))
    third = place(conversation(3), ledger, now=T0 + 60, route=routes)
    assert third.read_target.certificate == cert(payload, ("messages", 2, 0))
    assert third.g1 == G1("met")


def test_an_attempt_on_a_route_the_request_could_not_take_is_refused():
    placement = place(conversation(1), CacheLedger.empty())
    with pytest.raises(CacheInputError, match="route 'acct-z' is not one the request could take"):
        CacheLedger.empty().after_response(placement, FIRST_USAGE, T0, "acct-z", ME)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"usage": None}, "expected runtime.values.usage.Usage"),
        ({"attempt_start": float("inf")}, "attempt_start inf"),
        ({"process_id": ""}, "process_id ''"),
        ({"route": 3}, "route 3"),
        ({"placement": "p"}, "expected a Placement"),
    ],
)
def test_bad_after_response_arguments_are_refused(args, fragment):
    placement = place(conversation(1), CacheLedger.empty())
    call = {"placement": placement, "usage": FIRST_USAGE, "attempt_start": T0, "route": "direct", "process_id": ME}
    call.update(args)
    with pytest.raises(CacheInputError, match=fragment):
        CacheLedger.empty().after_response(**call)


# --- expiry -----------------------------------------------------------------


def test_rows_leave_at_expiry():
    ledger = CacheLedger(rows={r.certificate: r for r in [fake_row(1, expires=T0 + 10), fake_row(2, expires=T0 + 20)]})
    assert len(ledger.pruned(T0 + 9.9)) == 2
    assert ledger.pruned(T0 + 9.9) is ledger
    assert [r.certificate for r in ledger.pruned(T0 + 10).rows.values()] == [fake_row(2).certificate]
    assert len(ledger.pruned(T0 + 20)) == 0
    assert [r.certificate for r in ledger.live_rows(T0 + 15)] == [fake_row(2).certificate]


def test_after_response_drops_rows_expired_at_the_attempt_start():
    stale = fake_row(7, expires=T0 - 1)
    ledger = CacheLedger(rows={stale.certificate: stale})
    placement = place(conversation(1), ledger)
    after = ledger.after_response(placement, FIRST_USAGE, T0, "direct", ME)
    assert after.get(stale.certificate) is None
    assert len(after) == 2


def test_an_expired_row_is_not_read_and_the_next_request_writes_afresh():
    payload = conversation(1)
    first = place(payload, CacheLedger.empty())
    ledger = CacheLedger.empty().after_response(first, FIRST_USAGE, T0, "direct", ME)
    later = place(conversation(2), ledger, now=T0 + 301)
    # The 5m turn entry expired; the 1h stable entry is still live and becomes the target.
    assert later.read_target.certificate == cert(payload, ("system", 0))
    assert later.g1 == G1("met")


# --- eviction ---------------------------------------------------------------


def test_eviction_order_five_minute_then_shortest_then_soonest():
    rows = [
        fake_row(1, lifetime="1h", length=10, expires=T0 + 100),
        fake_row(2, lifetime="5m", length=500, expires=T0 + 100),
        fake_row(3, lifetime="5m", length=50, expires=T0 + 250),
        fake_row(4, lifetime="5m", length=50, expires=T0 + 200),
        fake_row(5, lifetime="5m", length=None, expires=T0 + 260),
    ]
    ledger = CacheLedger(rows={}, max_rows=2)._evicted_to_fit({r.certificate: r for r in rows})
    assert set(ledger.rows) == {fake_row(1).certificate, fake_row(2).certificate}
    assert ledger.watermark == T0 + 260


def test_eviction_at_512_rows_keeps_a_watermark():
    assert MAX_ROWS == 512
    old = [fake_row(i, lifetime="1h", length=1_000 + i, expires=T0 + 3_000) for i in range(500)]
    old += [fake_row(1_000 + i, lifetime="5m", length=10 + i, expires=T0 + 250 + i) for i in range(12)]
    ledger = CacheLedger(rows={r.certificate: r for r in old})
    assert len(ledger) == 512
    placement = place(conversation(1), ledger)
    after = ledger.after_response(placement, FIRST_USAGE, T0, "direct", ME)
    assert len(after) == 512
    # Two rows came in (the stable and turn entries); the two shortest 5m rows left.
    assert after.get(fake_row(1_000).certificate) is None
    assert after.get(fake_row(1_001).certificate) is None
    assert after.get(fake_row(1_002).certificate) is not None
    assert after.watermark == T0 + 251
    # Until the watermark passes, the read guarantee does not apply.
    nxt = place(conversation(2), after, now=T0 + 100)
    assert nxt.g1 == G1("excluded", "ledger_evicted")
    assert place(conversation(2), after, now=T0 + 251).g1 == G1("met")


def test_the_watermark_never_moves_back():
    ledger = CacheLedger(rows={}, watermark=T0 + 999, max_rows=1)
    after = ledger._evicted_to_fit({r.certificate: r for r in [fake_row(1, expires=T0 + 5), fake_row(2, length=999)]})
    assert after.watermark == T0 + 999


# --- evidence and records ---------------------------------------------------


def test_empty_and_without_evidence():
    assert len(CacheLedger.empty()) == 0
    assert CacheLedger.empty().watermark is None
    row = fake_row(3)
    stripped = CacheLedger(rows={row.certificate: row}).without_evidence()
    assert stripped.get(row.certificate).seen == ()
    assert stripped.get(row.certificate).stored_length == row.stored_length
    assert not stripped.get(row.certificate).established(["direct"], ME)


def test_records_round_trip_without_evidence_and_drop_malformed_rows():
    payload = conversation(1)
    ledger = CacheLedger.empty().after_response(place(payload, CacheLedger.empty()), FIRST_USAGE, T0, "direct", ME)
    ledger = CacheLedger(rows=ledger.rows, watermark=T0 + 7)
    records = ledger.to_records()
    records["rows"].append({"certificate": "short", "lifetime": "5m"})
    records["rows"].append({**records["rows"][0], "certificate": "f" * 64, "lifetime": "10m"})
    records["rows"].append({**records["rows"][0], "certificate": "e" * 64, "stored_length": "12"})
    records["rows"].append("not a row")
    restored = CacheLedger.from_records(records)
    assert set(restored.rows) == set(ledger.rows)
    assert restored.watermark == T0 + 7
    for key, row in restored.rows.items():
        assert row.seen == ()
        assert row.stored_length == ledger.rows[key].stored_length
        assert row.expires_at == ledger.rows[key].expires_at


def test_from_records_refuses_a_non_mapping():
    with pytest.raises(CacheInputError, match="expected a mapping"):
        CacheLedger.from_records([])  # type: ignore[arg-type]


def test_ledger_values_are_checked():
    row = fake_row(1)
    with pytest.raises(CacheInputError, match="keyed by its certificate"):
        CacheLedger(rows={"x": row})
    with pytest.raises(CacheInputError, match="max_rows 0"):
        CacheLedger(max_rows=0)
    with pytest.raises(CacheInputError, match="lifetime '2h'"):
        LedgerRow("a" * 64, "2h", "messages", None, 0.0, None, 1.0)  # type: ignore[arg-type]
    with pytest.raises(CacheInputError, match="tier 'body'"):
        LedgerRow("a" * 64, "5m", "body", None, 0.0, None, 1.0)
    with pytest.raises(CacheInputError, match="stored_length -1"):
        LedgerRow("a" * 64, "5m", "messages", -1, 0.0, None, 1.0)


def test_the_ledger_is_immutable():
    ledger = CacheLedger(rows={fake_row(1).certificate: fake_row(1)})
    with pytest.raises(TypeError):
        ledger.rows["x"] = fake_row(2)  # type: ignore[index]
    with pytest.raises(AttributeError):
        ledger.watermark = 3.0  # type: ignore[misc]


# --- records and inputs: boundaries the mutation run found unchecked ---------------------


def stored_ledger() -> CacheLedger:
    read_row = attrs.evolve(fake_row(1, lifetime="1h", length=2048, expires=T0 + 3000), last_read=T0 - 10)
    rows = {row.certificate: row for row in (read_row, fake_row(2, length=None))}
    return CacheLedger(rows=rows, watermark=T0 + 5, max_rows=7)


def test_records_round_trip_every_field_without_evidence() -> None:
    ledger = stored_ledger()
    records = ledger.to_records()
    assert set(records) == {"rows", "watermark", "max_rows"}
    assert (records["watermark"], records["max_rows"]) == (T0 + 5, 7)
    assert [row["seen"] for row in records["rows"]] == [{"direct": ME}, {"direct": ME}]
    assert CacheLedger.from_records(records) == ledger.without_evidence()
    unmarked = CacheLedger.from_records({**records, "watermark": None})
    assert unmarked.watermark is None and len(unmarked) == 2
    assert CacheLedger.from_records({"rows": records["rows"]}).max_rows == MAX_ROWS


@pytest.mark.parametrize("rows", [None, "rows", {"a": 1}, 3])
def test_records_whose_rows_are_not_a_list_give_an_empty_ledger(rows: object) -> None:
    assert len(CacheLedger.from_records({"rows": rows})) == 0


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"certificate": 123}, "not a string"),
        ({"certificate": "ab"}, "not 64 characters"),
        ({"last_marked": "yesterday"}, "not a time"),
        ({"last_read": float("nan")}, "not a finite time"),
        ({"expires_at": None}, "not a time"),
        ({"tier": "nowhere"}, "not a tier"),
    ],
)
def test_a_stored_row_of_the_wrong_shape_is_dropped_and_the_rest_kept(change: dict, why: str) -> None:
    records = stored_ledger().to_records()
    records["rows"][0] = {**records["rows"][0], **change}
    restored = CacheLedger.from_records(records)
    assert len(restored) == 1, why
    assert restored.get(f"{2:064x}") == attrs.evolve(fake_row(2, length=None), seen=())
    missing = {k: v for k, v in stored_ledger().to_records()["rows"][0].items() if k != "last_read"}
    assert len(CacheLedger.from_records({"rows": [missing]})) == 0


def test_bad_records_and_times_are_refused_by_name() -> None:
    with pytest.raises(CacheInputError, match=r"^ledger records are list, expected a mapping$"):
        CacheLedger.from_records([])  # type: ignore[arg-type]
    with pytest.raises(CacheInputError, match=r"^ledger watermark 'soon' is not a finite time in seconds$"):
        CacheLedger.from_records({"watermark": "soon"})
    for bad in ("later", float("inf"), True):
        with pytest.raises(CacheInputError, match=rf"^now {bad!r} is not a finite time in seconds$"):
            stored_ledger().pruned(bad)  # type: ignore[arg-type]


def test_an_empty_ledger_keeps_its_bound() -> None:
    assert CacheLedger.empty(max_rows=3) == CacheLedger(rows={}, watermark=None, max_rows=3)


def test_one_row_over_the_bound_is_evicted_and_an_unknown_length_counts_shortest() -> None:
    known = fake_row(1, length=1, expires=T0 + 50)
    unknown = fake_row(2, length=None, expires=T0 + 100)
    records = CacheLedger(rows={r.certificate: r for r in (known, unknown)}).to_records()
    assert len(CacheLedger.from_records(records)) == 2
    bounded = CacheLedger.from_records({**records, "max_rows": 1})
    assert [row.certificate for row in bounded.rows.values()] == [known.certificate]
    assert bounded.watermark == T0 + 100


def test_a_read_of_a_marked_entry_keeps_this_responses_marking_and_later_marks_keep_its_read_time() -> None:
    first_payload = conversation(1)
    system = cert(first_payload, ("system", 0))
    first = place(first_payload, CacheLedger.empty())
    ledger = CacheLedger.empty().after_response(first, FIRST_USAGE, T0, "direct", ME)
    assert ledger.get(system).stored_length == 800
    # The second request reads exactly the stable prefix: the system entry, which it marks again.
    second = place(conversation(2), ledger, now=T0 + 100)
    usage = Usage(cache_read_input_tokens=800, cache_write_5m_tokens=500)
    after = ledger.after_response(second, usage, T0 + 120, "direct", ME)
    read = after.get(system)
    assert (read.last_marked, read.last_read, read.expires_at) == (T0 + 120, T0 + 120, T0 + 120 + 3600)
    assert read.seen == (("direct", ME),)
    assert read.stored_length == 800  # no one-hour write: the one-hour mark's length stays
    # A third request marks the system entry again but reads the newer turn: the read time stays.
    third = place(conversation(3), after, now=T0 + 200)
    turn = cert(conversation(2), ("messages", 4, 0))
    usage = Usage(cache_read_input_tokens=after.get(turn).stored_length, cache_write_5m_tokens=60)
    later = after.after_response(third, usage, T0 + 210, "direct", ME)
    assert (later.get(system).last_marked, later.get(system).last_read) == (T0 + 210, T0 + 120)
    assert later.get(system).stored_length == 800
    assert later.get(turn).last_read == T0 + 210


def test_one_token_is_enough_to_record() -> None:
    payload = conversation(1)
    placement = place(payload, CacheLedger.empty())
    ledger = CacheLedger.empty().after_response(placement, Usage(cache_write_5m_tokens=1), T0, "direct", ME)
    assert len(ledger) == 2
    one_hour = CacheLedger.empty().after_response(
        placement, Usage(cache_write_1h_tokens=1, cache_write_5m_tokens=5), T0, "direct", ME
    )
    assert one_hour.get(cert(payload, ("system", 0))).stored_length == 1  # read 0 + the one-hour write


def test_after_response_names_the_wrong_types() -> None:
    placement = place(conversation(1), CacheLedger.empty())
    with pytest.raises(CacheInputError, match=r"^placement is dict, expected a Placement$"):
        CacheLedger.empty().after_response({}, FIRST_USAGE, T0, "direct", ME)  # type: ignore[arg-type]
    with pytest.raises(CacheInputError, match=r"^usage is dict, expected runtime.values.usage.Usage$"):
        CacheLedger.empty().after_response(placement, {}, T0, "direct", ME)  # type: ignore[arg-type]


def test_a_hit_on_an_entry_expired_at_the_attempt_start_is_still_recorded_as_read() -> None:
    payload = conversation(3)
    seen = {"direct": ME}
    shallow = LedgerRow(cert(payload, ("messages", 2, 0)), "5m", "messages", 900, T0 - 200, None, T0 + 100, seen)
    deep = LedgerRow(cert(payload, ("messages", 4, 0)), "5m", "messages", 1_400, T0 - 100, None, T0 + 250, seen)
    ledger = CacheLedger(rows={shallow.certificate: shallow, deep.certificate: deep})
    placement = place(payload, ledger)
    assert shallow.certificate in [entry.certificate for entry in placement.landing]
    assert ("messages", 2, 0) not in [mark.location for mark in placement.marks]
    # The provider served the shallow entry although it expired before the attempt started.
    usage = Usage(cache_read_input_tokens=900, cache_write_5m_tokens=700)
    after = ledger.after_response(placement, usage, T0 + 150, "direct", ME)
    served = after.get(shallow.certificate)
    assert served is not None and served.certificate == shallow.certificate
    assert (served.last_read, served.expires_at, served.stored_length) == (T0 + 150, T0 + 450, 900)
