"""Compile, measure and certify after appends and folds cost the new work and change nothing.

The incremental paths (a layout continued from an earlier view, a measurement
continued from an earlier request's running state, certificates continued from
an earlier placement) must give exactly what doing everything afresh gives:
the payload, the count of the whole payload, the largest parts and every
block's certificate.
"""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.cache import CacheLedger, certify_payload, place_marks
from runtime.measuring.measure import TokenCounter, measure
from runtime.measuring.tokenizer import count_tokens
from runtime.request.compiler import Request, RequestSettings, ToolSpec, compile_request
from runtime.request.layout import forget_layouts
from runtime.values.messages import (
    AssistantResponse,
    Instruction,
    Message,
    Note,
    TextPart,
    ToolCall,
    ToolResult,
)

TOOLS = (ToolSpec.create("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),)
SETTINGS = RequestSettings(model="claude-haiku-5-5")
WORDS = [
    "fold",
    "the",
    "ceiling",
    "cache",
    "résumé",
    "上下文",
    "🙂",
    "x = 1",
    "def f(a):",
    "\n",
    "\n\n",
    "  ",
    '{"k": [1, 2]}',
    "12345",
    "naïve",
    "—",
    "Контекст",
    "\t",
    "return",
    "'s",
    "http://example.org/a/b",
]


@attrs.frozen
class Mark:
    location: tuple
    ttl: str


texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=40).map(" ".join)


@st.composite
def rounds(draw: st.DrawFn) -> tuple[str, list[str], str]:
    return draw(texts), draw(st.lists(texts, min_size=1, max_size=3)), draw(st.sampled_from(["round", "instruction"]))


class Conversation:
    """A view grown by appends and shrunk by folds, checked after every change."""

    def __init__(self) -> None:
        self.view: list[Message] = [Instruction("Start.", id="instruction-0")]
        self.counter = TokenCounter()
        self.serial = 0
        self.certified = None
        self.folds = 0

    def _id(self, kind: str) -> str:
        self.serial += 1
        return f"{kind}-{self.serial}"

    def append(self, spec: tuple[str, list[str], str]) -> None:
        text, outputs, kind = spec
        if kind == "instruction":
            self.view.append(Instruction(text or "Go on.", id=self._id("instruction")))
            return
        calls = [ToolCall.create(self._id("toolu"), "read_file", {"path": f"f{i}"}) for i in range(len(outputs))]
        self.view.append(AssistantResponse((TextPart(text), *calls), id=self._id("response")))
        self.view += [
            ToolResult(c.call_id, c.name, c.arguments_json, out, id=self._id("result"))
            for c, out in zip(calls, outputs, strict=True)
        ]

    def fold(self, first: int, span: int) -> None:
        starts = [i for i, m in enumerate(self.view) if isinstance(m, AssistantResponse)]
        if len(starts) < 2:
            return
        a = starts[first % (len(starts) - 1)]
        b = starts[min(starts.index(a) + 1 + span, len(starts) - 1)]
        replaced = tuple(m.id for m in self.view[a:b])
        note = Note("Folded: read some files.", replaced, a, "tool_io", id=self._id("note"))
        self.view[a:b] = [note]
        self.folds += 1

    def check(self, marked: bool) -> None:
        request = compile_request(system="S", tools=TOOLS, view=self.view, settings=SETTINGS)
        forget_layouts()
        afresh = compile_request(system="S", tools=TOOLS, view=self.view, settings=SETTINGS)
        assert request.payload_text() == afresh.payload_text()
        self._check_measure(request)
        if marked:
            last = len(request.messages) - 1
            self._check_measure(request.with_marks([Mark(("messages", last, 0), "5m"), Mark(("tools", 0), "1h")]))
        certified = certify_payload(request.prepared(), previous=self.certified)
        assert certified.refs == certify_payload(request.payload()).refs
        self.certified = certified

    def _check_measure(self, request: Request) -> None:
        incremental = measure(request.pieces(), self.counter, 1.0)
        whole = measure(tuple(request.pieces()), TokenCounter(), 1.0)
        assert incremental == whole
        assert incremental.counted == count_tokens(request.payload_text())


@settings(max_examples=30, deadline=None)
@given(
    phases=st.lists(
        st.tuples(st.lists(rounds(), min_size=0, max_size=4), st.integers(0, 50), st.integers(0, 3)),
        min_size=1,
        max_size=3,
    ),
    marked=st.booleans(),
)
def test_after_any_appends_and_folds_everything_equals_doing_it_afresh(
    phases: list[tuple[list[tuple[str, list[str], str]], int, int]], marked: bool
) -> None:
    conversation = Conversation()
    conversation.check(marked)
    for appends, first, span in phases:
        # two rounds first, so there is always something to fold
        for spec in [("a", ["b"], "round"), ("c", ["d"], "round"), *appends]:
            conversation.append(spec)
            conversation.check(marked)
        conversation.fold(first, span)
        conversation.check(marked)
    assert conversation.folds >= len(phases)  # the generator really reaches folds, every phase


def test_one_appended_turn_renders_counts_and_certifies_only_the_turn() -> None:
    conversation = Conversation()
    for n in range(30):
        conversation.append((f"reading {n}", ["fold the ceiling " * 40], "round"))
    first = compile_request(system="S", tools=TOOLS, view=conversation.view, settings=SETTINGS)
    measure(first.pieces(), conversation.counter, 1.0)
    placed = place_marks(first.prepared(), ledger=CacheLedger.empty(), now=0.0, route="direct", process_id="p")
    conversation.append(("one more", ["a new result"], "round"))
    second = compile_request(system="S", tools=TOOLS, view=conversation.view, settings=SETTINGS)
    assert second.messages[: len(first.messages)] == first.messages
    assert all(a is b for a, b in zip(second.messages, first.messages[:-1], strict=False))
    before = conversation.counter.stats()
    assert measure(second.pieces(), conversation.counter, 1.0).counted == count_tokens(second.payload_text())
    after = conversation.counter.stats()
    assert after.reused_segments - before.reused_segments == len(first.messages)
    assert after.misses - before.misses <= 3  # the assistant text, the call, the result
    again = place_marks(
        second.prepared(),
        ledger=CacheLedger.empty(),
        now=0.0,
        route="direct",
        process_id="p",
        previous=placed.certified,
    )
    assert again.certified.reused_messages(placed.certified) == len(first.messages)
    assert again.certified.refs == certify_payload(second.payload()).refs


def test_a_message_rendered_twice_is_measured_whole() -> None:
    repeated = Instruction("the same turn, twice", id="twice")
    view = [repeated, AssistantResponse((TextPart("ok"),), id="ok"), repeated]
    request = compile_request(system="S", tools=(), view=view, settings=SETTINGS)
    m = measure(request.pieces(), TokenCounter(), 1.0)
    assert m == measure(tuple(request.pieces()), TokenCounter(), 1.0)
    assert m.counted == count_tokens(request.payload_text())


def test_placement_from_the_prepared_request_equals_placement_from_the_payload() -> None:
    from runtime.values.usage import Usage

    settings = RequestSettings(model="claude-haiku-5-5", max_tokens=77, tool_choice_json='{"type":"auto"}')
    conversation = Conversation()
    ledgers = {"prepared": CacheLedger.empty(), "payload": CacheLedger.empty()}
    previous = None
    for n in range(12):
        conversation.append((f"step {n}", ["fold the ceiling " * (5 + n)], "round" if n % 4 else "instruction"))
        request = compile_request(system="S", tools=TOOLS, view=conversation.view, settings=settings)
        placed = {
            "prepared": place_marks(
                request.prepared(),
                ledger=ledgers["prepared"],
                now=float(n),
                route="direct",
                process_id="p",
                anchors=[("messages", 0, 0)],
                previous=None if previous is None else previous.certified,
            ),
            "payload": place_marks(
                request.payload(),
                ledger=ledgers["payload"],
                now=float(n),
                route="direct",
                process_id="p",
                anchors=[("messages", 0, 0)],
            ),
        }
        assert placed["prepared"] == placed["payload"]
        assert placed["prepared"].certified.refs == placed["payload"].certified.refs
        usage = Usage(cache_read_input_tokens=100 * n, cache_write_5m_tokens=50, output_tokens=5)
        for shape in ledgers:
            ledgers[shape] = ledgers[shape].after_response(placed[shape], usage, float(n), "direct", "p")
        assert ledgers["prepared"] == ledgers["payload"]
        previous = placed["prepared"]
    assert len(ledgers["prepared"]) > 0
