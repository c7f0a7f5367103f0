"""The rule for giving thinking back, on the real compiler and the simulator's verifier (issue 14)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.contract.provider import ProviderReply
from runtime.request.compiler import RequestSettings, compile_request
from runtime.scripted.policies import Reply
from runtime.sim.errors import SimAPIError
from runtime.sim.thinking import ThinkingSigner
from runtime.store.codec import message_from_content
from runtime.values.messages import (
    AssistantResponse,
    Instruction,
    Message,
    Note,
    RedactedThinkingPart,
    TextPart,
    ToolCall,
    ToolResult,
)
from runtime.values.usage import Usage

SETTINGS = RequestSettings(
    model="claude-haiku-5-5", max_tokens=4096, thinking_json='{"budget_tokens":1024,"type":"enabled"}'
)


def payload_of(view: list[Message]) -> tuple[dict[str, Any], str]:
    request = compile_request(system="s", tools=(), view=view, settings=SETTINGS)
    return request.payload(), request.context_digest()


def loop(signer: ThinkingSigner, view: list[Message], rounds: int, start: int = 0) -> None:
    """Run ``rounds`` signed tool rounds on ``view``: the simulator signs, the runtime records."""
    for i in range(start, start + rounds):
        payload, context = payload_of(view)
        signer.verify(payload)
        call = {"type": "tool_use", "id": f"toolu_{i}", "name": "synthetic_read", "input": {"path": f"doc{i}"}}
        reply = signer.sign_reply(
            Reply(content=({"type": "text", "text": f"reading {i}"}, call), stop_reason="tool_use"), payload
        )
        message = ProviderReply(reply.content, "tool_use", Usage(), "m").message(context)
        view.append(message)
        view.append(ToolResult.for_call(message.tool_calls[0], f"contents of doc{i} " * 40))


def thinking_counts(payload: dict[str, Any]) -> list[int]:
    return [sum(b["type"] == "thinking" for b in m["content"]) for m in payload["messages"] if m["role"] == "assistant"]


def test_a_fold_drops_exactly_the_blocks_of_replies_made_before_it_and_the_simulator_accepts() -> None:
    signer = ThinkingSigner()
    view: list[Message] = [Instruction("read the docs")]
    loop(signer, view, 4)
    payload, _ = payload_of(view)
    assert thinking_counts(payload) == [1, 1, 1, 1]
    # Fold the first two rounds' results into a note (the calls stay, as the fold keeps pairs).
    folded: list[Message] = []
    for m in view:
        if isinstance(m, ToolResult) and m.call_id in ("toolu_0", "toolu_1"):
            folded.append(ToolResult(m.call_id, m.name, m.arguments_json, "[folded: see note]"))
        else:
            folded.append(m)
    view = folded
    payload, _ = payload_of(view)
    # round 0's reply came before the rewrite: its prefix is unchanged, it keeps its block;
    # every later reply was made with the old result 0 before it: all go back without blocks
    assert thinking_counts(payload) == [1, 0, 0, 0]
    signer.verify(payload)  # accepted
    loop(signer, view, 3, start=4)
    payload, _ = payload_of(view)
    assert thinking_counts(payload) == [1, 0, 0, 0, 1, 1, 1]
    before = signer.verified
    signer.verify(payload)
    assert signer.verified - before == 4


def test_a_layout_continued_from_an_earlier_view_gives_back_the_blocks_a_fresh_one_does() -> None:
    from runtime.request.layout import forget_layouts

    def text_of(view: list[Message]) -> str:
        return compile_request(system="s", tools=(), view=view, settings=SETTINGS).payload_text()

    signer = ThinkingSigner()
    view: list[Message] = [Instruction("read the layout docs")]
    loop(signer, view, 3)  # each compilation continues the layout of the one before
    continued = text_of(view)
    forget_layouts()
    assert continued == text_of(view)
    assert thinking_counts(payload_of(view)[0]) == [1, 1, 1]
    # a changed prefix is never continued: the replies after it go back without blocks, as from nothing
    old = view[2]
    assert isinstance(old, ToolResult)
    rewritten = [*view[:2], ToolResult(old.call_id, old.name, old.arguments_json, "[folded: see note]"), *view[3:]]
    changed = text_of(rewritten)
    forget_layouts()
    assert changed == text_of(rewritten)
    assert thinking_counts(payload_of(rewritten)[0]) == [1, 0, 0]


def test_the_prepared_request_certifies_like_its_payload_thinking_setting_included() -> None:
    from runtime.cache.certificates import certify

    view: list[Message] = [Instruction("read the certified docs")]
    loop(ThinkingSigner(), view, 2)
    request = compile_request(system="s", tools=(), view=view, settings=SETTINGS)
    assert certify(request.prepared()) == certify(request.payload())
    off = compile_request(
        system="s", tools=(), view=view, settings=RequestSettings(model="claude-haiku-5-5", max_tokens=4096)
    )
    assert certify(off.prepared()) == certify(off.payload()) != certify(request.prepared())


def test_a_note_replacing_earlier_messages_drops_the_blocks_after_it() -> None:
    signer = ThinkingSigner()
    view: list[Message] = [Instruction("task")]
    loop(signer, view, 3)
    note = Note("rounds 0-1 folded", tuple(m.id for m in view[1:5]), 1, "fold")
    view = [view[0], note, *view[5:]]
    payload, _ = payload_of(view)
    assert thinking_counts(payload) == [0]
    signer.verify(payload)
    loop(signer, view, 2, start=3)
    payload, _ = payload_of(view)
    assert thinking_counts(payload) == [0, 1, 1]
    signer.verify(payload)


def test_a_modified_block_or_a_changed_prefix_gets_the_apis_400() -> None:
    signer = ThinkingSigner()
    view: list[Message] = [Instruction("task")]
    loop(signer, view, 2)
    payload, _ = payload_of(view)
    payload["messages"][1]["content"][0]["thinking"] += "!"
    with pytest.raises(SimAPIError) as refused:
        signer.verify(payload)
    assert refused.value.status == 400 and "messages.1.content.0: Invalid `signature` in `thinking` block" in str(
        refused.value
    )
    payload, _ = payload_of(view)
    payload["messages"][0]["content"][0]["text"] = "another task"  # the block's preceding content changed
    with pytest.raises(SimAPIError):
        signer.verify(payload)
    other = ThinkingSigner()  # another server's key
    with pytest.raises(SimAPIError):
        other.verify(payload_of(view)[0])


def test_blocks_stay_in_place_exactly_as_given_and_survive_the_store() -> None:
    content = (
        {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
        {"type": "text", "text": "I will read"},
        {"type": "redacted_thinking", "data": "ZW5j"},
        {"type": "tool_use", "id": "t1", "name": "synthetic_read", "input": {"path": "a"}},
    )
    message = ProviderReply(content, "tool_use", Usage(), "m").message("ctx")
    assert [type(p).__name__ for p in message.parts] == ["ThinkingPart", "TextPart", "RedactedThinkingPart", "ToolCall"]
    assert message.context == "ctx"
    again = message_from_content("assistant", message.content(), message.id)
    assert again == message and again.sha256 == message.sha256
    plain = AssistantResponse((TextPart("x"), ToolCall.create("t", "f")), "tool_use")
    assert "context" not in plain.content()  # replies without thinking keep their digests
    assert RedactedThinkingPart("ZW5j").content() == {"type": "redacted_thinking", "data": "ZW5j"}


def test_thinking_blocks_are_counted_and_never_marked() -> None:
    from runtime.cache.blocks import is_markable

    signer = ThinkingSigner()
    view: list[Message] = [Instruction("task")]
    loop(signer, view, 1)
    with_blocks = compile_request(system="s", tools=(), view=view, settings=SETTINGS)
    plain = compile_request(
        system="s",
        tools=(),
        view=[view[0], AssistantResponse(view[1].parts[1:], "tool_use", id=view[1].id), view[2]],
        settings=SETTINGS,
    )
    assert len(with_blocks.payload_text()) > len(plain.payload_text())  # the measured pieces carry the block
    assert any(label == view[1].id and '"signature"' in piece for label, piece in with_blocks.pieces())
    assert not is_markable({"type": "thinking", "thinking": "x", "signature": "y"})


@pytest.mark.anyio
async def test_a_clone_carries_the_blocks_its_view_carries() -> None:
    from actors.branch import Branch

    signer = ThinkingSigner()
    view: list[Message] = [Instruction("task")]
    loop(signer, view, 3)
    emitter = Branch.create(system="s")
    async with emitter.turn() as turn:
        for message in view:
            turn.append(message)
    clone = emitter.clone()
    payload, _ = payload_of(list(clone.view()))
    assert thinking_counts(payload) == [1, 1, 1] and payload == payload_of(list(emitter.view()))[0]
    signer.verify(payload)
    cut = emitter.clone(upto=3)  # the first round only: its reply keeps its block
    assert thinking_counts(payload_of(list(cut.view()))[0]) == [1]
