"""Issue 11, cases 1 and 4: the notice decided on the request as sent; the model's window bounds every request."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import (
    READER,
    bounded,
    calls,
    iterative,
    node,
    read,
    runtime_for,
    scripted,
    text,
)

from runtime.decision.ceiling import ResolvedCeiling
from runtime.decision.send_bounds import WINDOW_SOURCE, bound_by_window, choose_notice
from runtime.flows.flow import Flow
from runtime.measuring.measure import Measurement, TokenCounter, measure
from runtime.measuring.tokenizer import count_tokens
from runtime.models.limits import default_model_table
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.messages import Instruction

COUNTER = TokenCounter()
TASK = "Summarise the design notes below in five lines.\n" + " ".join(
    f"note {i}: the fold keeps originals." for i in range(220)
)


def measure_with(notice: str | None, scale: float = 1.0) -> Measurement:
    request = compile_request(
        system="You are terse.",
        tools=(),
        view=[Instruction(TASK, notice=notice)],
        settings=RequestSettings(model="claude-haiku-5-5"),
    )
    return measure(request.pieces(), COUNTER, scale)


def ceiling(value: int | None) -> ResolvedCeiling:
    return ResolvedCeiling(value, "profile", None, f"profile max_input_tokens: {value}")


BARE = measure_with(None).estimate


def stated(notice: str) -> int:
    found = re.search(r"about (\d+) tokens", notice)
    assert found, notice
    return int(found[1])


@settings(max_examples=200, deadline=None)
@given(offset=st.integers(-120, 160), scale=st.sampled_from([1.0, 1.15, 1.37]))
def test_nothing_over_the_ceiling_is_sent_and_nothing_fitting_is_refused_for_the_notice(
    offset: int, scale: float
) -> None:
    bare = measure_with(None, scale).estimate
    limit = bare + offset
    choice = choose_notice(lambda notice: measure_with(notice, scale), ceiling(limit))
    sent = measure_with(choice.notice, scale)  # the request exactly as it goes out
    assert sent.estimate == choice.measurement.estimate
    if bare <= limit:
        assert choice.action in ("notice", "pass", "omit")  # never refused for the notice's sake
        assert sent.estimate <= limit  # and never pushed over by it
    else:
        assert choice.action == "over" and choice.notice is None
    if choice.notice is not None:
        assert stated(choice.notice) == sent.estimate  # the notice states its own request's figure
    if choice.action == "omit":
        assert "only without the notice" in choice.reason


def test_the_four_outcomes() -> None:
    assert choose_notice(measure_with, ceiling(None)).action == "pass"
    assert choose_notice(measure_with, ceiling(BARE * 2)).action == "pass"
    assert choose_notice(measure_with, ceiling(BARE + 200)).action == "notice"
    omitted = choose_notice(measure_with, ceiling(BARE))
    assert omitted.action == "omit" and omitted.notice is None and omitted.measurement.estimate == BARE
    assert choose_notice(measure_with, ceiling(BARE - 1)).action == "over"


def decisions(events):
    return [e.data for e in events if e.type == "ContextDecision"]


async def run_one(profile, op, script, *, model: str = "claude-haiku-5-5"):
    provider = scripted({"n": script})
    events = []
    async with runtime_for(provider, model=model) as rt:
        rt.signals.add_handler(events.append, name="t")
        result = await rt.run(Flow([node("n", op, profile=profile)]))
    return result, events


async def bare_server_count() -> int:
    """What the server counts for the task's request without a notice (near the ceiling, the figure decided on)."""
    _, events = await run_one(READER.evolve(max_input_tokens=90_000), bounded(TASK), [text("ok")])
    (received,) = [e.data["usage"] for e in events if e.type == "ResponseReceived"]
    return sum(v for k, v in received.items() if k != "output_tokens")


@pytest.mark.anyio
async def test_a_request_that_fits_only_without_the_notice_is_sent_without_it() -> None:
    bare = await bare_server_count()
    result, events = await run_one(READER.evolve(max_input_tokens=bare), bounded(TASK), [text("ok")])
    assert result["n"].status == "ok", result["n"].reason  # main refused it: the notice pushed it over
    decision = decisions(events)[0]
    assert decision["sent"] and decision["estimate_after"] == decision["provider_count"] == bare
    assert "only without the notice" in decision["reason"]
    instruction = result.branches["n"].view()[0]
    assert isinstance(instruction, Instruction) and instruction.notice is None


@pytest.mark.anyio
async def test_the_notice_states_the_figure_of_the_request_that_carries_it() -> None:
    bare = await bare_server_count()
    result, events = await run_one(READER.evolve(max_input_tokens=bare + 200), bounded(TASK), [text("ok")])
    assert result["n"].status == "ok"
    decision = decisions(events)[0]
    instruction = result.branches["n"].view()[0]
    assert instruction.notice is not None and decision["action"] == "notice"
    # the provider's count of the request that carries the notice (main stated the bare figure)
    assert stated(instruction.notice) == decision["estimate_after"] == decision["provider_count"] > bare


def test_the_window_bounds_a_ceiling_above_it_or_none() -> None:
    none = ResolvedCeiling(None, "none", None, 'profile max_input_tokens is "none": no ceiling')
    bounded_ = bound_by_window(none, "claude-sonnet-4-5", 200_000)
    assert (bounded_.ceiling, bounded_.source) == (200_000, WINDOW_SOURCE)
    assert "context window of claude-sonnet-4-5" in bounded_.reason
    assert bound_by_window(ceiling(300_000), "m", 200_000).ceiling == 200_000
    assert bound_by_window(ceiling(100_000), "m", 200_000) == ceiling(100_000)
    assert bound_by_window(none, "unknown-model", None) is none
    with pytest.raises(ValueError):
        bound_by_window(none, "m", 0)


def test_the_model_table_has_sources_dates_and_no_guesses() -> None:
    table = default_model_table()
    assert table.context_window("claude-haiku-5-5") == 1_000_000
    assert table.max_output_tokens("claude-haiku-5-5") is None  # not stated anywhere read: absent
    assert table.context_window("claude-sonnet-4-5") == 200_000
    assert table.max_output_tokens("claude-sonnet-4-5") == 64_000
    assert table.context_window("no-such-model") is None
    for limits in table.entries.values():
        assert limits.source and limits.read_on.year >= 2026


@pytest.mark.anyio
async def test_a_request_over_the_window_is_refused_before_it_is_sent_whatever_the_ceiling() -> None:
    script = [calls(read("huge.md", 1_000_000)), text("done")]
    result, events = await run_one(
        READER.evolve(max_input_tokens="none"), iterative("read"), script, model="claude-sonnet-4-5"
    )
    assert result["n"].status == "failed"
    last = decisions(events)[-1]
    assert last["ceiling"] == 200_000 and last["ceiling_source"] == "window" and not last["sent"]
    assert last["estimate_before"] > 200_000
    sent = [e for e in events if e.type == "RequestSent"]
    assert len(sent) == 1  # only the first, small request went out
    assert count_tokens("x")  # the real tokenizer is what measured it


# -- issue 28, item 4: a decision says what was done with the notice, and the report counts what was sent ----


async def notices_reported(profile, op, script) -> tuple[list[dict], int]:
    provider = scripted({"n": script})
    events: list = []
    async with runtime_for(provider, model="claude-haiku-5-5") as rt:
        rt.signals.add_handler(events.append, name="t")
        await rt.run(Flow([node("n", op, profile=profile)]))
        report = rt.report()
    return decisions(events), report["notices"]


@pytest.mark.anyio
async def test_a_request_sent_without_the_notice_is_not_a_notice_in_the_decision_or_the_report() -> None:
    bare = await bare_server_count()
    decided, notices = await notices_reported(READER.evolve(max_input_tokens=bare), bounded(TASK), [text("ok")])
    (decision,) = decided
    assert decision["sent"] and decision["action"] == "pass"  # at the notice line, but no notice went
    assert "only without the notice" in decision["reason"] and "sent without a size notice" in decision["reason"]
    assert notices == 0


@pytest.mark.anyio
async def test_only_the_request_carrying_the_notice_counts_as_one() -> None:
    script = [calls(read("a.txt", 200)), calls(read("b.txt", 200)), text("ok")]
    first, _ = await notices_reported(READER.evolve(max_input_tokens=4_000), iterative(TASK), script)
    ceiling = int(first[0]["estimate_after"] / 0.85)  # the first request at 85%: it carries the notice
    decided, notices = await notices_reported(READER.evolve(max_input_tokens=ceiling), iterative(TASK), script)
    assert [d["action"] for d in decided] == ["notice", "pass", "pass"], [d["reason"] for d in decided]
    assert all("sent without a size notice" in d["reason"] for d in decided[1:])
    assert notices == 1


def test_as_sent_keeps_every_other_action() -> None:
    from runtime.decision.ceiling import Decision
    from runtime.decision.send_bounds import as_sent, carries_notice
    from runtime.values.messages import AssistantResponse, TextPart

    noticed = Instruction("task", notice="[context] about")
    answered = (noticed, AssistantResponse((TextPart("ok"),)))
    assert carries_notice((noticed,)) and not carries_notice(answered) and not carries_notice(())
    for action in ("pass", "fold", "refuse"):
        decision = Decision(action, 10, 12, "why")  # type: ignore[arg-type]
        assert as_sent(decision, answered) is decision
    notice = Decision("notice", 10, 12, "why")
    assert as_sent(notice, (noticed,)) is notice
    assert as_sent(notice, answered).action == "pass"
