"""A fold summary is paid for once: its reply stays in the record, and a fold asking again takes it.

The resume case (a process killed after a summary was answered and stored,
before its fold committed) is ``tests/test_crash.py``'s
``test_a_kill_between_a_summary_and_its_fold_commit_resumes_without_sending_it_again``;
here, what the record keeps and how the answer is found.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import calls, read, text

from actors.shape import SUMMARY_MAX_TOKENS
from actors.side_answers import recorded_answer, summary_of
from runtime import Flow, Node, Operation, PolicyRegistry, Profile, Runtime, ScriptedProvider, ScriptPolicy
from runtime.request.compiler import RequestSettings, compile_request
from runtime.sim.clock import ManualClock
from runtime.sim.summary_policy import FoldSummaryPolicy
from runtime.values.messages import AssistantResponse, Instruction, Note, TextPart

READER = Profile(
    system="You read files under a ceiling.",
    tools=("synthetic_read",),
    max_input_tokens=6_000,
    context_management=True,
    context_fold_target=0.5,
    context_strategy="compaction",
)


def side_request(prompt: Instruction, model: str = "claude-haiku-5-5") -> Any:
    settings = RequestSettings(model=model, max_tokens=SUMMARY_MAX_TOKENS, intent="side")
    return compile_request(system=None, tools=(), view=(prompt,), settings=settings)


async def run_reader() -> tuple[Any, list[Any]]:
    script = [calls(read(f"src/f{i:02d}.py", 2500)) for i in range(8)] + [text("All read.")]
    registry = PolicyRegistry({"reader": ScriptPolicy("reader", script)}, default=FoldSummaryPolicy())
    clock = ManualClock(1_000.0)
    events: list[Any] = []
    async with Runtime(provider=ScriptedProvider(registry, clock=clock), clock=clock, monotonic=clock) as rt:
        rt.signals.add_handler(events.append, name="test")
        result = await rt.run(Flow([Node("reader", Operation("iterative", ("Read the sources.",)), profile=READER)]))
    return result, events


@pytest.mark.anyio
async def test_each_summary_reply_follows_its_prompt_in_the_record_naming_what_it_answered() -> None:
    result, events = await run_reader()
    branch = result.branches["reader"]
    record = branch.record_messages()
    sides = [e for e in events if e.type == "RequestSent" and e.data["intent"] == "side"]
    prompts = [i for i, m in enumerate(record) if isinstance(m, Instruction) and m.text.startswith("You summarize")]
    assert sides and len(prompts) == len(sides)
    notes = [m for m in record if isinstance(m, Note) and m.stage == "compaction"]
    for index in prompts:
        prompt, reply = record[index], record[index + 1]
        assert isinstance(reply, AssistantResponse) and reply.context == side_request(prompt).context_digest()
        assert recorded_answer(branch, side_request(prompt)) is reply
        assert reply.id not in branch.view_ids() and any(reply.text in note.text for note in notes)


@pytest.mark.anyio
async def test_a_prompt_never_answered_finds_nothing_and_marks_do_not_matter() -> None:
    result, _ = await run_reader()
    branch = result.branches["reader"]
    prompt = next(m for m in branch.record_messages() if isinstance(m, Instruction) and m.text.startswith("You summ"))
    assert recorded_answer(branch, side_request(Instruction(prompt.text + " "))) is None
    # The digest is of the conversation only: the same prompt is the same question, whatever the marks.
    assert recorded_answer(branch, side_request(prompt).with_marks(())) is not None
    # A main reply (no context kept without thinking) is never taken for a summary.
    mains = [m for m in branch.record_messages() if isinstance(m, AssistantResponse) and m.id in branch.view_ids()]
    assert mains and all(m.context is None for m in mains)


def test_a_reply_with_no_text_is_a_failure_whether_sent_or_taken_from_the_record() -> None:
    empty = AssistantResponse((TextPart("  "),), stop_reason="end_turn")
    assert summary_of(empty.text, None).failure == "the summary request answered with no text"
    assert summary_of("Read f00.", None).text == "Read f00."
