"""The reader policy: it follows its plan and recalls facts from view, by read_result, or by a re-run."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.bench.facts import fact_line, fact_value
from runtime.bench.reader import (
    PAGE_CHARS,
    ReaderPlanError,
    ReaderPolicy,
    recalls_of,
)
from runtime.bench.tools import document_text, facts_printed, stage_text
from runtime.fold.formats import call_line, clip_marker, read_result_text
from runtime.scripted.policies import PolicyExhausted, ScriptCall, ScriptStep

READ_A = {"path": "docs/a.md", "size": 40_000, "facts": ["F1"]}
TOOLS = [{"name": "read_doc", "description": "", "input_schema": {"type": "object"}}]
CONTEXT = {"name": "context", "description": "", "input_schema": {"type": "object"}}


def step(*calls: tuple[str, dict[str, Any]], text: str | None = None) -> ScriptStep:
    return ScriptStep(text=text, tool_calls=tuple(ScriptCall.create(n, a) for n, a in calls))


def probe(fact: str) -> tuple[str, dict[str, Any]]:
    return ("answer", {"fact": fact, "value": {"recall": fact}})


PLAN = (step(("read_doc", READ_A)), step(probe("F1")), step(text="done"))


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def result(call_id: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def payload(*messages: dict[str, Any], context: bool = True) -> dict[str, Any]:
    tools = TOOLS + ([CONTEXT] if context else [])
    return {"model": "m", "max_tokens": 10, "messages": list(messages), "tools": tools}


def tool_uses(reply: Any) -> list[dict[str, Any]]:
    return [b for b in reply.content if b["type"] == "tool_use"]


def start(policy: ReaderPolicy) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the first step (the read) and return the conversation with its result, and the call."""
    task = user(text("read and answer"))
    first = policy.respond(payload(task))
    (call,) = tool_uses(first)
    assert call["name"] == "read_doc" and call["input"] == READ_A
    doc = document_text("docs/a.md", 40_000, ("F1",))
    return [task, assistant(call), user(result(call["id"], doc))], call


def test_a_visible_fact_is_answered_from_view_without_an_extra_round() -> None:
    policy = ReaderPolicy("n", PLAN)
    messages, _ = start(policy)
    reply = policy.respond(payload(*messages))
    (answer,) = tool_uses(reply)
    assert answer["name"] == "answer" and answer["input"] == {"fact": "F1", "value": fact_value("F1")}
    (outcome,) = policy.log
    assert (outcome.fact, outcome.kind, outcome.outcome, outcome.value, outcome.rounds) == (
        "F1",
        "probe",
        "view",
        fact_value("F1"),
        0,
    )
    final = policy.respond(payload(*messages, assistant(answer), user(result(answer["id"], "noted"))))
    assert final.stop_reason == "end_turn" and final.content == ({"type": "text", "text": "done"},)
    with pytest.raises(PolicyExhausted, match="its plan had 3 step"):
        policy.respond(
            payload(
                *messages,
                assistant(answer),
                user(result(answer["id"], "noted")),
                assistant(text("done")),
                user(text("more?")),
            )
        )


def folded(messages: list[dict[str, Any]], call: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The conversation after a fold replaced the read's round with a note listing it."""
    note = (
        "[fold f-000000000000 · tool_io · 2 messages from #2 · span sha256 "
        + "0" * 64
        + "]\n"
        + call_line(index, "read_doc", READ_A, 40_000, False)
    )
    return [messages[0], assistant(text("reading")), user(text(note))]


def test_a_folded_fact_is_read_back_page_by_page_from_the_notes_index() -> None:
    policy = ReaderPolicy("n", PLAN)
    messages, call = start(policy)
    view = folded(messages, call, index=3)
    doc = document_text("docs/a.md", 40_000, ("F1",))
    assert doc.index(fact_line("F1")) > PAGE_CHARS  # the fact is on the second page

    first = policy.respond(payload(*view))
    (read1,) = tool_uses(first)
    assert read1["name"] == "context"
    assert read1["input"] == {"action": "read_result", "index": 3, "offset": 0, "limit": PAGE_CHARS}
    view += [
        assistant(read1),
        user(result(read1["id"], read_result_text(3, 0, PAGE_CHARS, 40_000, PAGE_CHARS, doc[:PAGE_CHARS]))),
    ]

    second = policy.respond(payload(*view))
    (read2,) = tool_uses(second)
    offset = read2["input"]["offset"]
    assert read2["input"]["action"] == "read_result" and offset < PAGE_CHARS <= offset + read2["input"]["limit"]
    chunk = doc[offset : offset + read2["input"]["limit"]]
    view += [
        assistant(read2),
        user(result(read2["id"], read_result_text(3, offset, len(chunk), 40_000, offset + len(chunk), chunk))),
    ]

    answered = policy.respond(payload(*view))
    (answer,) = tool_uses(answered)
    assert answer["input"]["value"] == fact_value("F1")
    (outcome,) = policy.log
    assert (outcome.outcome, outcome.rounds) == ("read_result", 2)


def serve_pages(policy: ReaderPolicy, view: list[dict[str, Any]], doc: str, index: int) -> dict[str, Any]:
    """Answer the policy's read_result calls from ``doc`` until it takes its step; returns that reply."""
    while True:
        reply = policy.respond(payload(*view))
        calls = tool_uses(reply)
        if not calls or calls[0]["name"] != "context":
            return reply
        (read,) = calls
        arguments = read["input"]
        assert arguments["action"] == "read_result" and arguments["index"] == index
        offset, limit = arguments["offset"], arguments["limit"]
        chunk = doc[offset : offset + limit]
        nxt = offset + len(chunk) if offset + len(chunk) < len(doc) else None
        page = read_result_text(index, offset, limit, len(doc), nxt, chunk)
        view += [assistant(read), user(result(read["id"], page))]


def test_a_clipped_result_is_read_back_from_the_markers_exact_call() -> None:
    policy = ReaderPolicy("n", PLAN)
    messages, call = start(policy)
    doc = document_text("docs/a.md", 40_000, ("F1",))
    marker = clip_marker(index=3, start=3_000, end=39_000, total=40_000, limit=PAGE_CHARS)
    clipped = doc[:3_000] + marker + doc[39_000:]
    view = messages[:2] + [user(result(call["id"], clipped))]
    first = policy.respond(payload(*view))
    (read,) = tool_uses(first)
    assert read["input"] == {"action": "read_result", "index": 3, "offset": 3_000, "limit": PAGE_CHARS}
    policy = ReaderPolicy("n", PLAN)
    start(policy)
    (answer,) = tool_uses(serve_pages(policy, view, doc, 3))
    assert answer["input"]["value"] == fact_value("F1")
    (outcome,) = policy.log
    assert outcome.outcome == "read_result"
    assert outcome.rounds == 2  # the fact sits past the first 16,000 omitted characters


def test_a_fact_with_nothing_pointing_back_is_fetched_by_rerunning_its_call() -> None:
    policy = ReaderPolicy("n", PLAN)
    _, call = start(policy)
    compacted = [user(text("Summary: read docs/a.md.\n\nread and answer"))]
    reply = policy.respond(payload(*compacted, context=False))
    (rerun,) = tool_uses(reply)
    assert rerun["name"] == "read_doc" and rerun["input"] == READ_A and rerun["id"] != call["id"]
    doc = document_text("docs/a.md", 40_000, ("F1",))
    view = compacted + [assistant(rerun), user(result(rerun["id"], doc))]
    (answer,) = tool_uses(policy.respond(payload(*view, context=False)))
    assert answer["input"]["value"] == fact_value("F1")
    assert [(o.outcome, o.rounds) for o in policy.log] == [("rerun", 1)]


def test_notes_without_a_context_tool_lead_to_a_rerun_not_a_read() -> None:
    policy = ReaderPolicy("n", PLAN)
    messages, call = start(policy)
    reply = policy.respond(payload(*folded(messages, call, 3), context=False))
    assert [c["name"] for c in tool_uses(reply)] == ["read_doc"]


def test_a_recall_that_the_rerun_does_not_show_fails_and_is_filled_unknown() -> None:
    policy = ReaderPolicy("n", PLAN)
    start(policy)
    compacted = [user(text("restart"))]
    (rerun,) = tool_uses(policy.respond(payload(*compacted, context=False)))
    view = compacted + [assistant(rerun), user(result(rerun["id"], "the document is gone", is_error=True))]
    (answer,) = tool_uses(policy.respond(payload(*view, context=False)))
    assert answer["input"]["value"] == "unknown"
    (outcome,) = policy.log
    assert (outcome.outcome, outcome.value, outcome.rounds) == ("failed", None, 1)


def test_a_fact_never_seen_and_never_named_fails_at_once() -> None:
    policy = ReaderPolicy("n", (step(probe("Z9")),))
    (answer,) = tool_uses(policy.respond(payload(user(text("go")))))
    assert answer["input"]["value"] == "unknown"
    assert policy.log[0].outcome == "failed" and policy.log[0].detail


def test_a_fact_first_seen_in_a_cloned_view_is_traced_through_the_note_that_names_it() -> None:
    # A child starts from a parent's view in which the read was already folded: the
    # child never saw the result, but the note lists read_doc with facts ["F1"].
    policy = ReaderPolicy("child", (step(probe("F1")),))
    note = (
        "[fold f-000000000000 · tool_io · 2 messages from #2 · span sha256 "
        + "0" * 64
        + "]\n"
        + call_line(5, "read_doc", READ_A, 40_000, False)
    )
    (read,) = tool_uses(policy.respond(payload(user(text("task")), assistant(text("ok")), user(text(note)))))
    assert read["input"] == {"action": "read_result", "index": 5, "offset": 0, "limit": PAGE_CHARS}


def test_a_stage_key_is_recalled_into_the_stage_call() -> None:
    plan = (step(("stage", {"n": 2, "size": 10, "key": {"recall": "S1"}})),)
    assert recalls_of(plan[0]) == (("S1", "key"),)
    policy = ReaderPolicy("n", plan)
    reply = policy.respond(payload(user(text("go"), text("stage 1 complete\n" + fact_line("S1")))))
    (call,) = tool_uses(reply)
    assert call["input"] == {"key": fact_value("S1"), "n": 2, "size": 10}
    assert policy.log[0].kind == "key" and policy.log[0].outcome == "view"


def test_the_same_request_again_gets_the_same_answer_and_moves_nothing() -> None:
    policy = ReaderPolicy("n", PLAN)
    request = payload(user(text("read")))
    first = policy.respond(request)
    assert policy.respond(request) == first
    assert policy.steps_taken == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"value": {"recall": "F1", "extra": 1}}, "has keys besides 'recall'"),
        ({"value": {"recall": "not an id"}}, "is not 1 to 40 letters"),
        ({"value": [{"recall": 3}]}, r"value\[0\]: fact id 3"),
    ],
)
def test_malformed_recalls_are_refused_when_the_policy_is_built(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ReaderPlanError, match=message):
        ReaderPolicy("n", (step(("answer", {"fact": "F1", **arguments})),))


@settings(max_examples=60, deadline=None)
@given(
    facts=st.lists(st.sampled_from(["A1", "B2", "C3", "D4"]), min_size=1, max_size=4, unique=True),
    shown=st.sets(st.sampled_from(["A1", "B2", "C3", "D4"])),
)
def test_a_recall_is_from_view_exactly_when_its_line_is_in_the_request(facts: list[str], shown: set[str]) -> None:
    plan = (step(*(probe(f) for f in facts)),)
    policy = ReaderPolicy("n", plan)
    lines = "".join(fact_line(f) for f in sorted(shown))
    reply = policy.respond(payload(user(text("go\n" + lines)), context=False))
    visible = [f for f in facts if f in shown]
    assert sorted(o.fact for o in policy.log if o.outcome == "view") == sorted(visible)
    assert all(o.value == fact_value(o.fact) for o in policy.log if o.outcome == "view")
    if len(visible) == len(facts):
        assert [c["input"]["value"] for c in tool_uses(reply)] == [fact_value(f) for f in facts]
    else:
        # Facts never seen and never named cannot be recovered: they fail, and the step is taken.
        assert {o.fact for o in policy.log if o.outcome == "failed"} == set(facts) - shown


def test_a_key_nothing_shows_any_more_is_fetched_by_rerunning_the_stage_that_prints_it() -> None:
    plan = (step(("stage", {"n": 1, "size": 10})), step(("stage", {"n": 2, "size": 10, "key": {"recall": "S1"}})))
    policy = ReaderPolicy("n", plan, prints=facts_printed)
    assert [c["name"] for c in tool_uses(policy.respond(payload(user(text("go")))))] == ["stage"]
    # A compaction replaced everything before the policy saw stage 1's result.
    restarted = [user(text("Summary: stage 1 was run.\n\ngo"))]
    (rerun,) = tool_uses(policy.respond(payload(*restarted, context=False)))
    assert (rerun["name"], rerun["input"]) == ("stage", {"n": 1, "size": 10})
    view = restarted + [assistant(rerun), user(result(rerun["id"], stage_text(1, 10)))]
    (second,) = tool_uses(policy.respond(payload(*view, context=False)))
    assert second["input"] == {"key": fact_value("S1"), "n": 2, "size": 10}
    assert [(o.fact, o.kind, o.outcome) for o in policy.log] == [("S1", "key", "rerun")]
