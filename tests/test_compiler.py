"""The request compiler: deterministic bytes, pairing, the append-only prefix."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.request.compiler import (
    CompileError,
    Request,
    RequestSettings,
    ToolSpec,
    compile_request,
    render_blocks,
)
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import (
    AssistantResponse,
    Instruction,
    Message,
    Note,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
)
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
        blocks = [b for msg in payload["messages"] for b in msg["content"]]
        answers = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert uses == answers == kept_calls
        outcomes["paired with results" if kept_calls else "paired without results"] += 1

    check()
    assert outcomes["refused"] >= 25 and outcomes["paired with results"] >= 25, dict(outcomes)


# -- the exact payload (the wire format the API and every stored digest depend on) --------


class _Mark:
    def __init__(self, location: tuple, ttl: str) -> None:
        self.location, self.ttl = location, ttl


def test_every_block_kind_renders_exactly_the_api_format_with_its_labels_and_digests() -> None:
    tool = ToolSpec.create("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})
    task, note = Instruction("Find the bug."), Note("folded two calls", ("x",), 3, "tool_io")
    call = ToolCall.create("toolu_a", "read_file", {"path": "a.py"})
    failing = ToolCall.create("toolu_b", "read_file", {})
    asked = AssistantResponse((TextPart("Reading."), call, failing))
    ok, error = ToolResult.for_call(call, "print('a')"), ToolResult.for_call(failing, "no path", is_error=True)
    blank = AssistantResponse((TextPart("  "),))
    settings = RequestSettings(model="claude-haiku-5-5", max_tokens=77, tool_choice_json='{"type":"auto"}')
    view = [task, asked, ok, error, note, blank]
    request = compile_request(system="Be terse.", tools=(tool,), view=view, settings=settings)
    expected = {
        "max_tokens": 77,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": task.rendered_text()}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading."},
                    {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.py"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "print('a')"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no path", "is_error": True},
                    {"type": "text", "text": "folded two calls"},
                ],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "(empty response)"}]},
        ],
        "model": "claude-haiku-5-5",
        "system": [{"type": "text", "text": "Be terse."}],
        "tool_choice": {"type": "auto"},
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
        ],
    }
    assert request.payload() == expected and request.payload_text() == canonical_json(expected)
    assert request.payload_bytes() == canonical_json(expected).encode("utf-8")
    labels = [label for label, _ in request.pieces()]
    message_labels = [label for label in labels if label not in ("envelope", "system", "tools")]
    assert message_labels == [task.id, asked.id, asked.id, asked.id, ok.id, error.id, note.id, blank.id]
    assert labels.count("system") == 1 and labels.count("tools") == 1
    assert set(labels) == {"envelope", "system", "tools", task.id, asked.id, ok.id, error.id, note.id, blank.id}
    kinds = [block.kind for message in request.messages for block in message.blocks]
    assert kinds == ["text", "text", "tool_use", "tool_use", "tool_result", "tool_result", "text", "text"]
    assert labels[0] == labels[-1] == "envelope"
    sources = [m.source_ids for m in request.messages]
    assert sources == [(task.id,), (asked.id,), (ok.id, error.id, note.id), (blank.id,)]
    assert request.message_digests() == tuple(
        sha256_hex(m["role"] + "\x00" + "\x1e".join(canonical_json(b) for b in m["content"]))
        for m in expected["messages"]
    )


def test_marks_put_cache_control_on_exactly_the_marked_system_tool_and_message_blocks() -> None:
    tools = tuple(ToolSpec.create(f"tool_{i}", "A tool.", {"type": "object"}) for i in range(2))
    view = [Instruction("t"), *round_messages(0, 2)]
    request = compile_request(system="Be terse.", tools=tools, view=view, settings=SETTINGS)
    control = {"5m": {"type": "ephemeral"}, "1h": {"type": "ephemeral", "ttl": "1h"}}
    for first, second in (("1h", "5m"), ("5m", "1h")):
        marks = [_Mark(("system", 0), first), _Mark(("tools", 1), second), _Mark(("messages", 2, 1), first)]
        marked = request.with_marks(marks)
        payload = marked.payload()
        assert payload["system"][0]["cache_control"] == control[first]
        assert "cache_control" not in payload["tools"][0] and payload["tools"][1]["cache_control"] == control[second]
        blocks = payload["messages"][2]["content"]
        assert "cache_control" not in blocks[0] and blocks[1]["cache_control"] == control[first]
        labels = [label for label, _ in marked.pieces()]
        assert labels == [label for label, _ in request.pieces()] and labels.count("tools") == 2
        assert set(labels) == {"envelope", "system", "tools"} | {m.id for m in view}
        assert marked.payload_text() == "".join(text for _, text in marked.pieces()) == canonical_json(payload)


def test_a_system_message_object_renders_its_text() -> None:
    request = compile_request(system=SystemMessage("Be terse."), tools=(), view=[Instruction("t")], settings=SETTINGS)
    assert request.payload()["system"] == [{"type": "text", "text": "Be terse."}]


def test_a_message_renders_once_and_a_projection_key_renders_it_again() -> None:
    (call_message, result) = round_messages(0, 1)
    assert render_blocks(result) is render_blocks(result)

    class Short:
        def __init__(self, limit: int) -> None:
            self.limit = limit

        def memo_key(self, message: ToolResult) -> object:
            return (message.call_id, self.limit)

        def output_of(self, message: ToolResult) -> str:
            return message.output[: self.limit]

    (short,) = render_blocks(result, Short(5))
    assert json.loads(short.json)["content"] == result.output[:5]
    assert render_blocks(result, Short(5)) == (short,)
    assert json.loads(render_blocks(result, Short(7))[0].json)["content"] == result.output[:7]
    assert json.loads(render_blocks(result)[0].json)["content"] == result.output
    with pytest.raises(CompileError, match="a SystemMessage cannot be rendered as a conversation message"):
        render_blocks(SystemMessage("s"))
    with pytest.raises(CompileError, match="^a system message belongs in the stable segment, not in the view$"):
        compile_view([Instruction("t"), SystemMessage("s")])
    # Through the compiler: results carry the projection's output, other messages render as ever.
    request = compile_request(
        system=None, tools=(), view=[Instruction("t"), call_message, result], settings=SETTINGS, projection=Short(3)
    )
    messages = request.payload()["messages"]
    projected = {"type": "tool_result", "tool_use_id": result.call_id, "content": result.output[:3]}
    assert messages[2]["content"] == [projected]
    assert messages[1]["content"][0] == {"type": "text", "text": "reading"}


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        (
            [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]}],
            "message 0: tool_result for ['a'] answers no tool_use of message -1",
        ),
        (
            [
                {"role": "user", "content": [{"type": "text", "text": "t"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}, {"type": "tool_use", "id": "b"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
            ],
            "message 1: tool_use ['b'] has no tool_result in message 2",
        ),
        (
            [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]},
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "a"},
                        {"type": "tool_result", "tool_use_id": "z"},
                    ],
                },
            ],
            "message 1: tool_result for ['z'] answers no tool_use of message 0",
        ),
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]}],
            "message 0: tool_use ['a'] has no tool_result in message 1",
        ),
        (
            [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]},
            ],
            "message 0: tool_result for ['a'] answers no tool_use of message -1",
        ),
        (
            [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}]},
                {"role": "user", "content": [{"type": "text", "text": "no result"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
            ],
            "message 0: tool_use ['a'] has no tool_result in message 1",
        ),
    ],
)
def test_check_pairing_names_the_message_and_the_orphan(messages: list, error: str) -> None:
    with pytest.raises(CompileError) as caught:
        check_pairing({"messages": messages})
    assert str(caught.value) == error


def test_check_pairing_accepts_a_paired_payload_and_one_with_no_messages() -> None:
    check_pairing({})
    check_pairing({"messages": []})
    check_pairing(
        {
            "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "a"}, {"type": "text", "text": "x"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a"}]},
            ]
        }
    )
