"""Measurement of requests built by the real compiler: the pieces it emits count like the whole."""

from __future__ import annotations

import attrs

from runtime.measuring.measure import TokenCounter, measure
from runtime.measuring.tokenizer import count_tokens
from runtime.request.compiler import RequestSettings, ToolSpec, compile_request
from runtime.values.messages import AssistantResponse, Instruction, Message, TextPart, ToolCall, ToolResult

TOOLS = (
    ToolSpec.create("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
    ToolSpec.create("context", "Reduce the context.", {"type": "object", "properties": {"action": {"type": "string"}}}),
)
SETTINGS = RequestSettings(model="claude-haiku-5-5")
OUTPUTS = [
    "def f(x):\n    return {k: v for k, v in x.items() if v}\n" * 12,
    "Контекст сворачивается без потерь. 上下文窗口的折叠。 مرحبا بالعالم 🙂👍🏽 " * 10,
    '{"rows": [{"id": 1, "ok": true}, {"id": 2, "ok": false}], "next": null}' * 15,
    "x" * 3_000,
    "",
]


@attrs.frozen
class Mark:
    location: tuple
    ttl: str


def view_of(rounds: int) -> list[Message]:
    view: list[Message] = [Instruction("Summarise the repository layout.")]
    for n in range(rounds):
        calls = [ToolCall.create(f"toolu_{n}_{i}", "read_file", {"path": f"src/{n}/{i}.py"}) for i in range(1 + n % 3)]
        view.append(AssistantResponse((TextPart(f"Reading batch {n}."), *calls)))
        view += [ToolResult.for_call(call, OUTPUTS[(n + i) % len(OUTPUTS)]) for i, call in enumerate(calls)]
    view.append(AssistantResponse((TextPart("The layout is flat."),)))
    return view


def test_compiled_pieces_count_exactly_like_the_payload() -> None:
    request = compile_request(system="You are terse.", tools=TOOLS, view=view_of(30), settings=SETTINGS)
    measurement = measure(request.pieces(), TokenCounter(), 1.0)
    assert measurement.counted == count_tokens(request.payload_text())
    assert measurement.counted > 10_000


def test_marked_requests_and_the_next_turn_count_exactly_and_reuse_the_cache() -> None:
    counter = TokenCounter()
    view = view_of(20)
    first = compile_request(system="You are terse.", tools=TOOLS, view=view, settings=SETTINGS)
    marked = first.with_marks([Mark(("tools", 1), "1h"), Mark(("messages", len(first.messages) - 1, 0), "5m")])
    assert measure(marked.pieces(), counter, 1.0).counted == count_tokens(marked.payload_text())
    before = counter.stats()
    follow = view + [Instruction("Now list the tests.")]
    second = compile_request(system="You are terse.", tools=TOOLS, view=follow, settings=SETTINGS)
    assert measure(second.pieces(), counter, 1.0).counted == count_tokens(second.payload_text())
    after = counter.stats()
    # new: the instruction, plus the blocks whose marks came off (tool 1, the last message's block)
    assert after.misses - before.misses <= 3
    # every message before the marked one is taken from the first request's running state, uncounted
    assert after.reused_segments - before.reused_segments == len(first.messages) - 1


def test_largest_parts_are_labelled_by_message_id() -> None:
    view = view_of(6)
    big = ToolResult.for_call(ToolCall.create("toolu_big", "read_file", {"path": "big.txt"}), "word " * 5_000)
    view += [AssistantResponse((ToolCall.create("toolu_big", "read_file", {"path": "big.txt"}),)), big]
    request = compile_request(system="You are terse.", tools=TOOLS, view=view, settings=SETTINGS)
    measurement = measure(request.pieces(), TokenCounter(), 1.0)
    assert measurement.parts[0][0] == big.id
    assert measurement.parts[0][1] >= 5_000
