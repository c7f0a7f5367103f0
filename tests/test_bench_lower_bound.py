"""The lower bound: each token written once at the 5m price, read at the read price on every later request."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.bench.lower_bound import LowerBound
from runtime.sim.errors import SimAPIError
from runtime.sim.layout import build_layout
from runtime.sim.tokens import SimTokenCounter
from runtime.sim.validation import validate_request


def request(*texts: str, system: str = "You are terse.") -> dict[str, Any]:
    roles = ("user", "assistant")
    messages = [{"role": roles[i % 2], "content": [{"type": "text", "text": t}]} for i, t in enumerate(texts)]
    return {"model": "claude-haiku-5-5", "max_tokens": 16, "system": system, "messages": messages}


def total(payload: dict[str, Any]) -> int:
    return build_layout(validate_request(payload), SimTokenCounter(), lookback_collapse=True).total_tokens


def test_an_append_only_pair_writes_each_token_once_and_reads_the_prefix() -> None:
    bound = LowerBound(SimTokenCounter())
    first, second = request("read the notes"), request("read the notes", "done", "now the plan")
    assert bound.add(first) == (total(first), 0)
    assert bound.add(second) == (total(second) - total(first), total(first))
    figures = bound.figures(output_tokens=10, output_ratio=None)
    assert (figures.requests, figures.write_tokens, figures.read_tokens) == (2, total(second), total(first))
    assert figures.bit == pytest.approx(1.25 * total(second) + 0.1 * total(first))
    assert not figures.output_priced
    priced = bound.figures(output_tokens=10, output_ratio=5.0)
    assert priced.bit == pytest.approx(figures.bit + 50) and priced.output_priced


def test_a_changed_message_is_written_again_from_the_change_on() -> None:
    bound = LowerBound(SimTokenCounter())
    bound.add(request("one", "two", "three"))
    changed = request("ONE", "two", "three")
    layout = build_layout(validate_request(changed), SimTokenCounter(), lookback_collapse=True)
    system_tokens = layout.blocks[0].prefix_tokens  # only the system block is still the same prefix
    assert layout.blocks[0].location == ("system", 0)
    assert bound.add(changed) == (total(changed) - system_tokens, system_tokens)


def test_a_clone_reads_the_prefix_its_emitter_wrote() -> None:
    bound = LowerBound(SimTokenCounter())
    lead = request("read", "ok", "read more")
    bound.add(lead)
    child = request("read", "ok", "read more", "spawned", "check it")
    assert bound.add(child) == (total(child) - total(lead), total(lead))
    sibling = request("read", "ok", "read more", "spawned", "review it")
    written, read = bound.add(sibling)
    assert read > total(lead) and written == total(sibling) - read


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(alphabet="abcdefgh ", min_size=1, max_size=40).filter(str.strip), min_size=1, max_size=8))
def test_an_append_only_chain_writes_its_last_request_once_and_reads_every_earlier_one(texts: list[str]) -> None:
    bound = LowerBound(SimTokenCounter())
    totals = []
    for n in range(1, len(texts) + 1, 2):
        payload = request(*texts[:n])
        totals.append(total(payload))
        bound.add(payload)
    figures = bound.figures(output_tokens=0, output_ratio=None)
    assert figures.write_tokens == totals[-1]
    assert figures.read_tokens == sum(totals[:-1])


def test_a_payload_the_server_would_refuse_is_refused_here_too() -> None:
    with pytest.raises(SimAPIError, match="the first message must use the 'user' role"):
        LowerBound(SimTokenCounter()).add(request("a", "b") | {"messages": [{"role": "assistant", "content": "x"}]})
    with pytest.raises(ValueError, match="output_tokens: -1 is not a non-negative integer"):
        LowerBound(SimTokenCounter()).figures(output_tokens=-1, output_ratio=None)
