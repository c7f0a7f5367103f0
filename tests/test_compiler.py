"""The request compiler: deterministic bytes, pairing, the append-only prefix."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.canonical import canonical_json
from runtime.compiler import (
    CompileError,
    Request,
    RequestSettings,
    ToolSpec,
    check_pairing,
    compile_request,
)
from runtime.messages import AssistantResponse, Instruction, Message, Note, TextPart, ToolCall, ToolResult

SETTINGS = RequestSettings(model="claude-haiku-5-5")
TOOLS = (ToolSpec.create("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),)


def compile_view(view: list[Message], **kw: object) -> Request:
    return compile_request(system="You are terse.", tools=TOOLS, view=view, settings=SETTINGS, **kw)  # type: ignore[arg-type]


def round_messages(n: int, calls: int, text: str = "reading") -> list[Message]:
    tool_calls = [ToolCall.create(f"toolu_{n}_{i}", "read_file", {"path": f"f{n}_{i}"}) for i in range(calls)]
    out: list[Message] = [AssistantResponse((TextPart(text), *tool_calls))]
    out += [ToolResult.for_call(c, f"content of {c.call_id} " * 20) for c in tool_calls]
    return out


def messages_text(request: Request) -> str:
    return canonical_json(request.payload()["messages"])


def test_same_inputs_give_the_same_bytes() -> None:
    view = [Instruction("task"), *round_messages(0, 2)]
    a, b = compile_view(view), compile_view(list(view))
    assert a.payload_bytes() == b.payload_bytes()
    assert a.digest == b.digest


def test_payload_text_is_the_canonical_json_of_the_payload() -> None:
    view = [Instruction("täsk ✓ 漢字"), *round_messages(0, 3), Note("folded 2 calls", ("x",), 3, "tool_io")]
    request = compile_view(view)
    assert request.payload_text() == canonical_json(request.payload())
    assert "".join(t for _, t in request.pieces()) == request.payload_text()


def test_stable_layout_tools_once_system_own_block_and_never_in_user_messages() -> None:
    request = compile_view([Instruction("task"), *round_messages(0, 1), *round_messages(1, 1)])
    payload = request.payload()
    assert [t["name"] for t in payload["tools"]] == ["read_file"]
    assert payload["system"] == [{"type": "text", "text": "You are terse."}]
    user_text = json.dumps([m for m in payload["messages"] if m["role"] == "user"])
    assert "You are terse." not in user_text and "Read a file." not in user_text


def test_an_instruction_renders_the_same_bytes_current_or_history() -> None:
    task = Instruction("Find the bug.")
    current = compile_view([task]).payload()["messages"][0]
    later = compile_view([task, *round_messages(0, 1), Instruction("next")]).payload()["messages"][0]
    assert canonical_json(current) == canonical_json(later)


def test_results_open_the_user_message_after_their_calls_in_call_order() -> None:
    msgs = round_messages(0, 3)
    shuffled = [Instruction("t"), msgs[0], msgs[3], msgs[1], msgs[2]]
    payload = compile_view(shuffled).payload()
    ids = [b["tool_use_id"] for b in payload["messages"][2]["content"]]
    assert ids == ["toolu_0_0", "toolu_0_1", "toolu_0_2"]


def test_orphans_are_refused() -> None:
    msgs = round_messages(0, 2)
    with pytest.raises(CompileError, match="orphaned tool call"):
        compile_view([Instruction("t"), msgs[0], msgs[1]])
    with pytest.raises(CompileError, match="orphaned tool result"):
        compile_view([Instruction("t"), msgs[1]])
    with pytest.raises(CompileError, match="two results"):
        compile_view([Instruction("t"), msgs[0], msgs[1], msgs[1], msgs[2]])


def test_marks_change_only_cache_control_fields() -> None:
    class Mark:
        def __init__(self, location: tuple, ttl: str) -> None:
            self.location, self.ttl = location, ttl

    request = compile_view([Instruction("t"), *round_messages(0, 1)])
    marked = request.with_marks([Mark(("tools", 0), "1h"), Mark(("system", 0), "1h"), Mark(("messages", 2, 0), "5m")])
    payload = marked.payload()
    assert payload["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert payload["messages"][2]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert marked.payload_text() == canonical_json(payload)

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    assert strip(payload) == request.payload()


# -- properties ----------------------------------------------------------------------------

conversations = st.lists(
    st.tuples(st.integers(min_value=0, max_value=4), st.booleans(), st.text(max_size=30)), min_size=1, max_size=8
)


@settings(max_examples=60, deadline=None)
@given(conversations)
def test_tool_loop_requests_are_byte_prefixes_and_never_orphaned(rounds: list[tuple[int, bool, str]]) -> None:
    view: list[Message] = [Instruction("the task")]
    previous: Request | None = None
    for n, (calls, new_instruction, text) in enumerate(rounds):
        request = compile_view(view)
        check_pairing(request.payload())
        if previous is not None:
            before = messages_text(previous)[:-1]  # without the closing bracket
            assert messages_text(request).startswith(before)
            assert request.message_digests()[: len(previous.messages)] == previous.message_digests()
        previous = request
        view += round_messages(n, calls, text or "…")
        if new_instruction or calls == 0:
            view.append(Instruction(f"turn {n}"))


def orphans(view: list[Message]) -> set[str]:
    """The call ids of the view's orphans, found without the compiler: a call with no result
    anywhere in the view, or a result whose call is not in the view before it."""
    found: set[str] = set()
    called: set[str] = set()
    results = {m.call_id for m in view if isinstance(m, ToolResult)}
    for message in view:
        if isinstance(message, AssistantResponse):
            for call in message.tool_calls:
                called.add(call.call_id)
                if call.call_id not in results:
                    found.add(call.call_id)
        elif isinstance(message, ToolResult) and message.call_id not in called:
            found.add(message.call_id)
    return found


# Drops that keep pairing (a whole round: its call message and every result) and drops that
# break it (one message of a round that calls tools), so both outcomes are reached often.
drops = st.lists(st.tuples(st.sampled_from([True, False, False]), st.integers(min_value=0, max_value=60)), max_size=3)


def test_any_subset_view_either_compiles_paired_or_is_refused() -> None:
    outcomes: Counter[str] = Counter()

    @settings(max_examples=150, deadline=None, database=None)
    @given(st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=5), drops)
    def check(calls: list[int], dropped: list[tuple[bool, int]]) -> None:
        rounds = [round_messages(n, k) for n, k in enumerate(calls)]
        full: list[Message] = [Instruction("t"), *(m for r in rounds for m in r)]
        gone: set[str] = set()
        for whole_round, index in dropped:
            if whole_round:
                gone |= {m.id for m in rounds[index % len(rounds)]}
            else:
                gone.add(full[1 + index % (len(full) - 1)].id)
        view = [m for m in full if m.id not in gone]
        expected_orphans = orphans(view)
        try:
            request = compile_view(view)
        except CompileError as refused:
            assert expected_orphans, f"refused a view without an orphan: {refused}"
            named = str(refused).split("'")[1]
            assert "orphaned tool" in str(refused) and named in expected_orphans, (str(refused), expected_orphans)
            outcomes["refused"] += 1
            return
        assert not expected_orphans, f"compiled a view with orphans {sorted(expected_orphans)}"
        payload = request.payload()
        check_pairing(payload)
        kept_calls = [c.call_id for m in view if isinstance(m, AssistantResponse) for c in m.tool_calls]
        uses = [b["id"] for msg in payload["messages"] for b in msg["content"] if b["type"] == "tool_use"]
        answers = [b["tool_use_id"] for msg in payload["messages"] for b in msg["content"] if b["type"] == "tool_result"]
        assert uses == answers == kept_calls
        outcomes["paired with results" if kept_calls else "paired without results"] += 1

    check()
    assert outcomes["refused"] >= 25 and outcomes["paired with results"] >= 25, dict(outcomes)
