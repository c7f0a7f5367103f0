"""evaluate_read: the read verdict and the hit after a response."""

from __future__ import annotations

import pytest

from runtime.cache.certificates import certify
from runtime.cache.errors import CacheInputError
from runtime.cache.ledger import CacheLedger
from runtime.cache.placement import place_marks
from runtime.cache.record import G1
from runtime.cache.rows import LedgerRow
from runtime.cache.verdict import ReadVerdict, evaluate_read
from runtime.values.usage import Usage

ME = "proc-1"
OTHER = "proc-0"
NOW = 500.0


def conversation(rounds: int) -> dict:
    messages = [{"role": "user", "content": "the task"}]
    for r in range(rounds):
        messages.append(
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"c{r}", "name": "f", "input": {}}]}
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{r}", "content": f"{r}"}]}
        )
    return {"model": "m", "system": "be brief", "messages": messages}


def row(payload, location, *, length=1_000, seen=None, expires=NOW + 100, lifetime="5m") -> LedgerRow:
    ref = {r.location: r for r in certify(payload)}[location]
    return LedgerRow(
        ref.certificate, lifetime, ref.tier, length, NOW - 200, None, expires, {"direct": ME} if seen is None else seen
    )


def placed(payload, *rows, route="direct", **kwargs):
    ledger = CacheLedger(rows={r.certificate: r for r in rows})
    return place_marks(payload, ledger=ledger, now=NOW, route=route, process_id=ME, **kwargs)


def test_no_complete_usage_is_unevaluated():
    p = conversation(2)
    verdict = evaluate_read(placed(p, row(p, ("messages", 2, 0))), None)
    assert verdict == ReadVerdict(read="unevaluated", hit="unidentified", hit_certificate=None, read_tokens=None)


def test_a_read_at_the_targets_length_is_at_or_above_and_identified():
    p = conversation(2)
    target = row(p, ("messages", 2, 0), length=1_000)
    placement = placed(p, target)
    assert placement.g1 == G1("met")
    verdict = evaluate_read(placement, Usage(cache_read_input_tokens=1_000))
    assert verdict.read == "at_or_above"
    assert verdict.hit == "identified"
    assert verdict.hit_certificate == target.certificate
    assert verdict.read_tokens == 1_000
    assert evaluate_read(placement, Usage(cache_read_input_tokens=1_500)).read == "at_or_above"


def test_a_short_read_while_the_evidence_is_live_is_below_live():
    p = conversation(2)
    placement = placed(p, row(p, ("messages", 2, 0), expires=NOW + 100))
    verdict = evaluate_read(placement, Usage(cache_read_input_tokens=10), attempt_start=NOW + 99)
    assert verdict.read == "below_live"
    assert verdict.hit == "unidentified"


def test_a_short_read_after_the_evidence_expired_is_below_expired():
    p = conversation(2)
    placement = placed(p, row(p, ("messages", 2, 0), expires=NOW + 100))
    assert evaluate_read(placement, Usage(), attempt_start=NOW + 100).read == "below_expired"
    assert evaluate_read(placement, Usage(), attempt_start=NOW + 100).hit == "none"


def test_an_excluded_request_records_the_read_size_with_no_verdict():
    p = conversation(2)
    placement = placed(p, row(p, ("messages", 2, 0), length=None))
    assert placement.g1 == G1("excluded", "length_unknown")
    verdict = evaluate_read(placement, Usage(cache_read_input_tokens=777))
    assert verdict.read is None
    assert verdict.read_tokens == 777


def test_nothing_read_is_hit_none():
    p = conversation(2)
    assert evaluate_read(placed(p, row(p, ("messages", 2, 0))), Usage(input_tokens=9)).hit == "none"


def test_two_landing_entries_of_the_read_length_are_unidentified():
    p = conversation(2)
    a = row(p, ("messages", 2, 0), length=1_000)
    b = row(p, ("messages", 4, 0), length=1_000)
    verdict = evaluate_read(placed(p, a, b), Usage(cache_read_input_tokens=1_000))
    assert verdict.hit == "unidentified"


def test_a_deeper_landing_entry_of_unknown_length_makes_the_hit_unidentified():
    p = conversation(2)
    known = row(p, ("messages", 2, 0), length=1_000)
    unknown = row(p, ("messages", 4, 0), length=None, seen={})
    placement = placed(p, known, unknown)
    assert {e.certificate for e in placement.landing} == {known.certificate, unknown.certificate}
    assert evaluate_read(placement, Usage(cache_read_input_tokens=1_000)).hit == "unidentified"


def test_a_shallower_landing_entry_of_unknown_length_does_not_matter():
    p = conversation(2)
    shallow = row(p, ("system", 0), length=None, lifetime="1h")
    known = row(p, ("messages", 4, 0), length=1_000)
    verdict = evaluate_read(placed(p, shallow, known), Usage(cache_read_input_tokens=1_000))
    assert verdict.hit == "identified"
    assert verdict.hit_certificate == known.certificate


def test_an_entry_not_established_on_the_attempts_route_is_not_identified():
    p = conversation(2)
    entry = row(p, ("messages", 2, 0), seen={"direct": ME, "acct": OTHER})
    placement = placed(p, entry, route=["direct", "acct"])
    assert evaluate_read(placement, Usage(cache_read_input_tokens=1_000), route="acct").hit == "unidentified"
    assert evaluate_read(placement, Usage(cache_read_input_tokens=1_000), route="direct").hit == "identified"


def test_a_server_tool_makes_every_read_unidentified():
    p = conversation(2)
    p["tools"] = [{"type": "code_execution_20250522", "name": "code_execution"}]
    entry = row(p, ("messages", 2, 0))
    assert evaluate_read(placed(p, entry), Usage(cache_read_input_tokens=1_000)).hit == "unidentified"


def test_the_route_must_be_named_when_there_are_several():
    p = conversation(1)
    placement = placed(p, route=["direct", "acct"])
    with pytest.raises(CacheInputError, match="name the one the attempt took"):
        evaluate_read(placement, Usage())
    with pytest.raises(CacheInputError, match="route 'other'"):
        evaluate_read(placement, Usage(), route="other")


def test_bad_usage_and_start_are_refused():
    placement = placed(conversation(1))
    with pytest.raises(CacheInputError, match="expected runtime.values.usage.Usage"):
        evaluate_read(placement, {"cache_read_input_tokens": 3})  # type: ignore[arg-type]
    with pytest.raises(CacheInputError, match="attempt_start"):
        evaluate_read(placement, Usage(), attempt_start=float("nan"))


def test_the_verdict_dict():
    p = conversation(2)
    verdict = evaluate_read(placed(p, row(p, ("messages", 2, 0))), Usage(cache_read_input_tokens=1_000))
    assert verdict.to_dict() == {
        "read": "at_or_above",
        "read_tokens": 1_000,
        "hit": "identified",
        "hit_certificate": verdict.hit_certificate,
    }


# --- boundaries the mutation run found unchecked ---------------------------------------


def test_bad_attempt_starts_and_usages_are_refused_by_name():
    p = conversation(2)
    placement = placed(p, row(p, ("messages", 2, 0)))
    for bad in ("soon", float("nan"), True):
        with pytest.raises(CacheInputError, match=rf"^attempt_start {bad!r} is not a finite time$"):
            evaluate_read(placement, Usage(), attempt_start=bad)  # type: ignore[arg-type]
    with pytest.raises(CacheInputError, match=r"^usage is dict, expected runtime.values.usage.Usage or None$"):
        evaluate_read(placement, {"cache_read_input_tokens": 1})  # type: ignore[arg-type]


def test_a_read_of_one_token_matching_an_entry_is_identified():
    p = conversation(2)
    entry = row(p, ("messages", 2, 0), length=1)
    verdict = evaluate_read(placed(p, entry), Usage(cache_read_input_tokens=1))
    assert (verdict.hit, verdict.hit_certificate) == ("identified", entry.certificate)


def test_without_the_read_guarantee_a_read_gets_no_read_label():
    p = conversation(2)
    target = row(p, ("messages", 2, 0), length=1_000)
    ledger = CacheLedger(rows={target.certificate: target}, watermark=NOW + 1_000)  # an eviction not yet expired
    placement = place_marks(p, ledger=ledger, now=NOW, route="direct", process_id=ME)
    assert placement.g1.status != "met"
    verdict = evaluate_read(placement, Usage(cache_read_input_tokens=10))
    assert verdict.read is None
