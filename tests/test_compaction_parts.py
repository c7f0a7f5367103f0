"""A server-side compaction's block in foldline's values, store and requests, and the simulator's pure rules.

- a reply's ``compaction`` block becomes a :class:`CompactionPart` holding the block exactly (any field, any
  order in, canonical JSON out), is stored and read back equal (digest included), and renders into a request
  as that same JSON, a part of the assistant message in its place (a compaction-only reply needs no
  placeholder text);
- :func:`runtime.sim.compaction.dropped_before_compaction` keeps exactly the latest summarized block and what
  follows it (a failed block, content null, drops nothing); the simulator's summary is a function of the
  messages (Hypothesis).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.contract.provider import ProviderReply
from runtime.request.rendering import render_blocks
from runtime.sim.compaction import dropped_before_compaction, summary_of
from runtime.store.codec import decode_message, message_content_json
from runtime.values.canonical import canonical_json
from runtime.values.messages import CompactionPart, TextPart
from runtime.values.usage import Usage

BLOCK = {"type": "compaction", "content": "<summary>s</summary>", "encrypted_content": "opaque", "signature": "sig"}


def test_a_reply_keeps_its_compaction_block_and_the_store_and_request_give_it_back_unchanged() -> None:
    reply = ProviderReply((dict(BLOCK), {"type": "text", "text": "go on"}), "end_turn", Usage(), "m")
    message = reply.message()
    part, text = message.parts
    assert isinstance(part, CompactionPart) and text == TextPart("go on")
    assert json.loads(part.block_json) == BLOCK and part.summary == "<summary>s</summary>"
    stored = message_content_json(message)
    assert decode_message(message.id, message.kind, stored, message.sha256) == message
    blocks = render_blocks(message)
    assert [b.json for b in blocks] == [canonical_json(BLOCK), canonical_json({"text": "go on", "type": "text"})]
    paused = ProviderReply((dict(BLOCK),), "compaction", Usage(), "m").message()
    assert [b.json for b in render_blocks(paused)] == [canonical_json(BLOCK)]  # no placeholder text after it


@pytest.mark.parametrize("bad", ['{"type": "text", "text": "x"}', "not json", "[]"])
def test_a_compaction_part_holds_only_a_compaction_block(bad: str) -> None:
    with pytest.raises(ValueError, match="CompactionPart.block_json"):
        CompactionPart(bad)


texts = st.text(alphabet="abc xyz", min_size=1, max_size=12)
plain_block = st.builds(lambda t: {"type": "text", "text": t}, texts)
summary_block = st.builds(lambda t: {"type": "compaction", "content": t}, st.one_of(st.none(), texts))
message = st.builds(
    lambda role, blocks: {"role": role, "content": blocks},
    st.sampled_from(["user", "assistant"]),
    st.lists(st.one_of(plain_block, summary_block), min_size=1, max_size=4),
)


@given(st.lists(message, min_size=1, max_size=6))
def test_a_request_is_read_from_its_latest_summarized_block_on(messages: list[dict[str, Any]]) -> None:
    payload = {"model": "m", "messages": messages}
    found = [
        (m, b)
        for m, msg in enumerate(messages)
        for b, block in enumerate(msg["content"])
        if block["type"] == "compaction" and block["content"] is not None
    ]
    kept = dropped_before_compaction(payload)
    if not found:
        assert kept is None
        return
    m, b = found[-1]
    assert kept is not None
    assert kept["messages"][0] == {**messages[m], "content": messages[m]["content"][b:]}
    assert kept["messages"][1:] == messages[m + 1 :]
    assert summary_of(payload, None) == summary_of(json.loads(json.dumps(payload)), None)
