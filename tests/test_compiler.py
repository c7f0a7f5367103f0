"""The request compiler: deterministic bytes, pairing, the append-only prefix."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.canonical import canonical_json
from runtime.compiler import (
    CompileError,
    Request,
    RequestSettings,
    ToolSpec,
    compile_request,
)
from runtime.messages import AssistantResponse, Instruction, Message, Note, TextPart, ToolCall, ToolResult
from tests.pairing import check_pairing

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


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=6), st.data())
def test_any_subset_view_either_compiles_paired_or_is_refused(calls: list[int], data: st.DataObject) -> None:
    full: list[Message] = [Instruction("t")]
    for n, k in enumerate(calls):
        full += round_messages(n, k)
    keep = data.draw(st.lists(st.booleans(), min_size=len(full), max_size=len(full)))
    view = [m for m, k in zip(full, keep) if k]
    try:
        request = compile_view(view)
    except CompileError:
        return
    check_pairing(request.payload())
