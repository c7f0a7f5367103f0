"""Conversation requests end to end through certify, place, apply, the ledger and the verdict.

The usage each request reports is computed by a small reference model of the
provider's cache written here from the documented rules, independently of the
placement code: an entry is written at each mark; a read at a mark walks back
at most 20 positions (a run of tool_use or tool_result blocks in one message
is one position) and takes the deepest entry it finds; the request reads the
deepest hit A, writes 1h tokens up to the deepest 1h mark B after A and 5m
tokens up to the last mark C, and bills the rest as input.
"""

from __future__ import annotations

import attrs

from runtime.cache.apply import apply_marks
from runtime.cache.certificates import certify
from runtime.cache.ledger import CacheLedger
from runtime.cache.placement import place_marks
from runtime.cache.record import G1
from runtime.cache.tail_skip import TailSkip
from runtime.cache.verdict import evaluate_read
from runtime.values.canonical import canonical_json
from runtime.values.usage import Usage

ME = "proc-1"
TTL = {"5m": 300.0, "1h": 3600.0}


def tokens(block: dict) -> int:
    """A deterministic token proxy: about four characters of canonical JSON per token."""
    return len(canonical_json({k: v for k, v in block.items() if k != "cache_control"})) // 4 + 1


@attrs.define(eq=False)
class ReferenceCache:
    """The provider's cache for one route, as the documentation describes it."""

    entries: dict = attrs.field(factory=dict)  # certificate -> (tokens, expires_at)

    def send(self, sent: dict, start: float) -> Usage:
        blocks = _blocks(sent)
        prefix, running = [], 0
        for block in blocks:
            running += tokens(block)
            prefix.append(running)
        refs = certify(sent)
        marked = [i for i, block in enumerate(blocks) if "cache_control" in block]
        ttl = {i: blocks[i]["cache_control"].get("ttl", "5m") for i in marked}
        hit = 0
        hit_index = -1
        for i in marked:
            j = i
            while j >= 0 and refs[i].position - refs[j].position < 20:
                entry = self.entries.get(refs[j].certificate)
                if entry is not None and entry[1] > start:
                    if j > hit_index:
                        hit, hit_index = entry[0], j
                    self.entries[refs[j].certificate] = (entry[0], start + TTL[ttl[i]])
                    break
                j -= 1
        last = marked[-1] if marked else -1
        deepest_1h = max((i for i in marked if ttl[i] == "1h" and i > hit_index), default=hit_index)
        write_1h = prefix[deepest_1h] - hit if deepest_1h > hit_index else 0
        write_5m = (prefix[last] - hit - write_1h) if last > hit_index else 0
        for i in marked:
            if i > hit_index:
                self.entries[refs[i].certificate] = (prefix[i], start + TTL[ttl[i]])
        total = prefix[-1] if prefix else 0
        return Usage(
            input_tokens=total - hit - write_1h - write_5m,
            cache_read_input_tokens=hit,
            cache_write_5m_tokens=write_5m,
            cache_write_1h_tokens=write_1h,
            output_tokens=5,
        )


def _blocks(payload: dict) -> list[dict]:
    out = list(payload.get("tools", []))
    system = payload.get("system", [])
    out += [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
    for message in payload["messages"]:
        content = message["content"]
        out += [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    return out


def task() -> dict:
    return {
        "model": "claude-haiku-5-5",
        "max_tokens": 1000,
        "tools": [
            {"name": "read", "description": "Read a file and return its text. " * 5, "input_schema": {"type": "object"}}
        ],
        "system": [{"type": "text", "text": "You are a careful engineer working in a repository. " * 10}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Find where the cache is invalidated."}]}],
    }


def add_round(payload: dict, r: int, *, results: int = 1) -> dict:
    messages = list(payload["messages"])
    messages.append(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"Looking at part {r}."}]
            + [
                {"type": "tool_use", "id": f"c{r}_{k}", "name": "read", "input": {"path": f"src/{r}_{k}.py"}}
                for k in range(results)
            ],
        }
    )
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"c{r}_{k}", "content": f"contents of {r}_{k} " * 30}
                for k in range(results)
            ],
        }
    )
    return {**payload, "messages": messages}


def test_two_conversation_requests_end_to_end():
    provider = ReferenceCache()
    ledger = CacheLedger.empty()

    first_payload = task()
    first = place_marks(first_payload, ledger=ledger, now=0.0, route="direct", process_id=ME)
    assert first.g1 == G1("excluded", "no_established_candidate")
    turn_mark = next(m for m in first.marks if m.role == "turn")
    first_usage = provider.send(apply_marks(first_payload, first.marks), start=0.0)
    assert first_usage.cache_read_input_tokens == 0
    assert first_usage.cache_write_1h_tokens > 0 and first_usage.cache_write_5m_tokens > 0
    ledger = ledger.after_response(first, first_usage, 0.0, "direct", ME)

    second_payload = add_round(first_payload, 0)
    second = place_marks(
        second_payload, ledger=ledger, now=20.0, route="direct", process_id=ME, previous=first.certified
    )
    assert second.read_target is not None
    assert second.read_target.certificate == first.ref_at(turn_mark.location).certificate
    assert second.g1 == G1("met")
    second_usage = provider.send(apply_marks(second_payload, second.marks), start=20.0)
    verdict = evaluate_read(second, second_usage, attempt_start=20.0)
    assert verdict.read == "at_or_above"
    assert verdict.hit == "identified"
    assert verdict.hit_certificate == second.read_target.certificate
    ledger = ledger.after_response(second, second_usage, 20.0, "direct", ME)
    assert ledger.get(second.read_target.certificate).last_read == 20.0


def test_a_tool_loop_reads_every_previous_round_including_a_wide_one():
    provider = ReferenceCache()
    ledger = CacheLedger.empty()
    payload = task()
    previous = None
    now = 0.0
    widths = [1, 2, 1, 25, 1, 3]  # round 3 adds 25 calls and results: many blocks, few positions
    for r, width in enumerate([0, *widths]):
        if r:
            payload = add_round(payload, r, results=width)
        placement = place_marks(payload, ledger=ledger, now=now, route="direct", process_id=ME, previous=previous)
        usage = provider.send(apply_marks(payload, placement.marks), start=now)
        if r:
            assert placement.g1 == G1("met"), f"round {r}"
            assert evaluate_read(placement, usage, attempt_start=now).read == "at_or_above", f"round {r}"
        ledger = ledger.after_response(placement, usage, now, "direct", ME)
        previous = placement.certified
        now += 30.0


def test_a_round_longer_than_the_lookback_is_read_through_the_entrys_own_block():
    provider = ReferenceCache()
    first_payload = task()
    first = place_marks(first_payload, ledger=CacheLedger.empty(), now=0.0, route="direct", process_id=ME)
    ledger = CacheLedger.empty().after_response(
        first, provider.send(apply_marks(first_payload, first.marks), 0.0), 0.0, "direct", ME
    )
    long_turn = {
        **first_payload,
        "messages": first_payload["messages"]
        + [
            {"role": "assistant", "content": [{"type": "text", "text": f"paragraph {i}"} for i in range(30)]},
            {"role": "user", "content": "go on"},
        ],
    }
    second = place_marks(long_turn, ledger=ledger, now=10.0, route="direct", process_id=ME)
    assert [m.role for m in second.marks] == ["stable", "read", "turn"]
    usage = provider.send(apply_marks(long_turn, second.marks), 10.0)
    assert evaluate_read(second, usage, attempt_start=10.0).read == "at_or_above"


def test_a_tail_skipped_request_writes_no_turn_entry_and_the_next_still_reads():
    provider = ReferenceCache()
    payload = task()
    first = place_marks(payload, ledger=CacheLedger.empty(), now=0.0, route="direct", process_id=ME)
    ledger = CacheLedger.empty().after_response(
        first, provider.send(apply_marks(payload, first.marks), 0.0), 0.0, "direct", ME
    )
    payload = add_round(payload, 1)
    skip = TailSkip.decide(estimate=86_000, ceiling=100_000, context_fold_at=0.9)
    second = place_marks(payload, ledger=ledger, now=10.0, route="direct", process_id=ME, tail_skip=skip)
    assert "turn" not in [m.role for m in second.marks]
    assert second.g1 == G1("met")
    usage = provider.send(apply_marks(payload, second.marks), 10.0)
    assert usage.cache_write_5m_tokens == 0
    assert evaluate_read(second, usage, attempt_start=10.0).read == "at_or_above"


def test_a_side_request_shares_only_the_stable_entry():
    provider = ReferenceCache()
    payload = add_round(task(), 1)
    main = place_marks(payload, ledger=CacheLedger.empty(), now=0.0, route="direct", process_id=ME)
    ledger = CacheLedger.empty().after_response(
        main, provider.send(apply_marks(payload, main.marks), 0.0), 0.0, "direct", ME
    )
    summary_request = {**task(), "messages": [{"role": "user", "content": "Summarise the work so far."}]}
    side = place_marks(summary_request, ledger=ledger, now=5.0, route="direct", process_id=ME, intent="side")
    assert [m.role for m in side.marks] == ["stable"]
    assert side.g1 == G1("met")
    usage = provider.send(apply_marks(summary_request, side.marks), 5.0)
    assert evaluate_read(side, usage, attempt_start=5.0).read == "at_or_above"
