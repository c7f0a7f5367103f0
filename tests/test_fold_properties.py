"""Invariants of folding over random conversations and fold sequences (Hypothesis).

For any conversation and any sequence of folds, restores and marks:

- no compiled request carries an orphaned tool call or result;
- the system text, the task instruction and every assistant text are sent
  byte for byte as recorded (a fold moves them or leaves them, never edits);
- between two rewrites (a fold commit or a restore) each request's messages
  are a byte prefix of the next request's;
- every original is recoverable byte for byte through read_result paging,
  Unicode included.

The pure layer drives the planner directly; the engine layer runs the whole
send path on a scripted model with random outputs.
"""

from __future__ import annotations

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import runtime_for

from actors.tools import BUILTIN_TOOLS, Tool, ToolSpec
from runtime.bench.conversations import Conversation, fold_input, measurer_for, run_planner
from runtime.config import Profile
from runtime.flows.flow import Flow
from runtime.fold.formats import parse_read_result
from runtime.fold.marks import FoldMark
from runtime.fold.planner import FoldPlanner, SummaryResult
from runtime.fold.protected import protected_ids
from runtime.fold.recovery import plan_restore, read_result, stood_for
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter
from runtime.providers.scripted import ScriptedProvider
from runtime.request.compiler import EMPTY_RESPONSE_TEXT
from runtime.scripted.policies import PolicyRegistry, ScriptCall, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import AssistantResponse, Instruction, TextPart, ToolResult
from tests.pairing import check_pairing
from tests.payload_rewrites import first_divergence

COUNTER = TokenCounter()

# Outputs are a random Unicode text repeated, so results run from empty to several thousand characters.
texts = st.builds(
    lambda text, times: text * times,
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=300),
    st.integers(min_value=1, max_value=30),
)
rounds = st.lists(texts, min_size=1, max_size=4)
events = st.lists(
    st.one_of(
        st.tuples(st.just("round"), rounds, st.booleans()),
        st.tuples(st.just("round"), rounds, st.booleans()),
        st.tuples(st.just("turn"), st.text(min_size=1, max_size=300)),
        st.tuples(st.just("fold"), st.floats(0.8, 0.98), st.booleans(), st.booleans()),
        st.tuples(st.just("mark"), st.floats(0, 1), st.floats(0, 1)),
        st.tuples(st.just("restore"), st.floats(0, 1)),
    ),
    min_size=4,
    max_size=24,
)


def page_through(branch, index: int) -> str:
    got, offset = [], 0
    while True:
        page = parse_read_result(read_result(branch, index, offset=offset, limit=700).text)
        got.append(page.text)
        if page.next_offset is None:
            return "".join(got)
        offset = page.next_offset


def check_request(c: Conversation, payload: dict, system: str, task: Instruction) -> None:
    check_pairing(payload)
    assert payload["system"] == [{"type": "text", "text": system}]
    first = payload["messages"][0]["content"][0]
    assert first == {"type": "text", "text": task.rendered_text()}
    recorded = {
        p.text for m in c.record if isinstance(m, AssistantResponse) for p in m.parts if isinstance(p, TextPart)
    }
    for message in payload["messages"]:
        if message["role"] != "assistant":
            continue
        for block in message["content"]:
            if block["type"] == "text":
                assert block["text"] in recorded or block["text"] == EMPTY_RESPONSE_TEXT


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(events, st.booleans())
def test_random_conversations_and_fold_sequences_keep_every_invariant(script: list, bound_on: bool) -> None:
    c = Conversation()
    system = c.system.text  # type: ignore[union-attr]
    task = c.task("The task: read what you are given and report.")
    bound = 1500 if bound_on else None
    previous: dict | None = None
    rewritten = False
    marks: tuple[FoldMark, ...] = ()

    def send() -> None:
        nonlocal previous, rewritten
        branch = c.branch()
        payload = measurer_for(branch, counter=COUNTER, bound=bound).compile(branch.view()).payload()
        check_request(c, payload, system, task)
        if previous is not None and not rewritten:
            assert first_divergence(previous, payload) is None
        previous, rewritten = payload, False
        c.deliver()

    for event in script:
        kind = event[0]
        if kind == "round":
            _, outputs, say = event
            c.round([("echo", {"n": i}, out) for i, out in enumerate(outputs)], say="Reading." if say else None)
            send()
        elif kind == "turn":
            c.answer("Noted: " + event[1])
            c.add(Instruction("Next: " + event[1]))
            send()
        elif kind == "mark":
            length = len(c.record)
            start, end = sorted((int(event[1] * (length - 1)), int(event[2] * (length - 1))))
            marks = marks + (FoldMark(start, end),)
        elif kind == "fold":
            _, share, caching, summary_ok = event
            branch = c.branch()
            measurer = measurer_for(branch, counter=COUNTER, bound=bound)
            estimate = measurer.estimate(branch.view())
            fold = FoldSettings(ceiling=max(50, int(estimate / share)), caching=caching, result_bound=bound)
            protected = protected_ids(None, branch.view()) if caching else frozenset()
            answer = (
                SummaryResult(text="Summary: the span read files.") if summary_ok else SummaryResult(failure="down")
            )
            plan, _ = run_planner(
                FoldPlanner(fold_input(branch, fold, protected=protected, marks=marks), measurer),
                lambda need, answer=answer: answer,
            )
            before = list(c.view)
            if plan.landed:
                c.land(plan)
                rewritten = rewritten or c.view[: len(before)] != before
            else:
                assert plan.view_ids == tuple(before)
            marks = plan.held_marks
        elif kind == "restore":
            branch = c.branch()
            standing = stood_for(branch.view(), branch)
            hidden = [i for i in range(len(c.record)) if c.record[i].id in standing]
            if not hidden:
                continue
            index = hidden[int(event[1] * (len(hidden) - 1))]
            restore = plan_restore(branch.view(), branch, start=index)
            if restore.changed:
                c.view = list(restore.view_ids)
                rewritten = True
    branch = c.branch()
    payload = measurer_for(branch, counter=COUNTER, bound=bound).compile(branch.view()).payload()
    check_request(c, payload, system, task)
    for index, message in enumerate(c.record):
        if isinstance(message, ToolResult) and message.clipped_from is None:
            assert page_through(branch, index) == message.output


# -- the engine layer -----------------------------------------------------------------------


async def _echo(arguments, context):
    return str(arguments.get("text", ""))


ECHO = Tool(
    ToolSpec.create("echo", "Return the text given.", {"type": "object", "properties": {"text": {"type": "string"}}}),
    _echo,
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.text(min_size=0, max_size=2500), min_size=1, max_size=3), min_size=3, max_size=14),
    st.sampled_from([6_000, 9_000]),
    st.booleans(),
    st.sampled_from(["epoch", "immediate"]),
)
def test_the_send_path_keeps_every_invariant_on_random_runs(
    outputs: list[list[str]], ceiling: int, caching: bool, scheduling: str
) -> None:
    steps = [
        ScriptStep(tool_calls=tuple(ScriptCall.create("echo", {"text": t}) for t in round_outputs))
        for round_outputs in outputs
    ] + [ScriptStep(text="done")]
    registry = PolicyRegistry({"n": ScriptPolicy("n", steps)})
    profile = Profile(
        system="You echo.",
        tools=("echo",),
        max_input_tokens=ceiling,
        context_management=True,
        prompt_caching=caching,
        fold_scheduling=scheduling,  # type: ignore[arg-type]
    )
    payloads: list[dict] = []

    class Capture:
        name = "scripted"
        caches_by_prefix = True
        max_retries = 0
        counts_tokens = True

        def __init__(self) -> None:
            self.inner = ScriptedProvider(registry, clock=ManualClock(1_000.0))

        async def send(self, request, *, node_id):
            if node_id is not None:
                payloads.append(request.payload())
            return await self.inner.send(request, node_id=node_id)

        async def count_tokens(self, request):
            return await self.inner.count_tokens(request)

        async def aclose(self) -> None:
            await self.inner.aclose()

    async def main():
        from support import iterative, node

        events: list = []
        async with runtime_for(Capture(), registry=BUILTIN_TOOLS.with_tool(ECHO)) as rt:  # type: ignore[arg-type]
            rt.signals.add_handler(events.append, name="t")
            result = await rt.run(Flow([node("n", iterative("Echo everything.", max_rounds=40), profile=profile)]))
            report = rt.report()
        return result, events, report

    result, events, report = anyio.run(main)
    assert report["rewrites"]["unexplained"] == 0 and report["bytes_unrecoverable"] == 0
    for event in events:
        if event.type == "ContextDecision" and event.data["sent"]:
            assert event.data["estimate_after"] <= ceiling
    for payload in payloads:
        check_pairing(payload)
        assert (
            payload["system"][0]["text"] == "You echo."
            and payload["messages"][0]["content"][0]["text"] == "Echo everything."
        )
    causes = {e.data["request_digest"]: e.data["cause"] for e in events if e.type == "CacheRewrite"}
    for before, after in zip(payloads, payloads[1:], strict=False):
        if first_divergence(before, after) is not None:
            assert causes.get(sha256_hex(canonical_json(after))), "a rewrite without a recorded cause"
    branch = result.branches["n"]
    for index, message in enumerate(branch.record_messages()):
        if isinstance(message, ToolResult) and message.clipped_from is None:
            assert page_through(branch, index) == message.output
    if result.status != "ok":
        assert type(result["n"].error).__name__ == "InputCeilingExceeded"
