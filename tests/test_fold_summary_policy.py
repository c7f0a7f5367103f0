"""The scripted summarizer of fold summary requests, and the fold's small measuring helpers."""

from __future__ import annotations

import math

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, measurer_for
from runtime.bench.fold_micro import median
from runtime.fold.bodies import result_shape
from runtime.fold.projection import project
from runtime.measuring.measure import TokenCounter
from runtime.sim.summary_policy import LINE_CHARS, MAX_LINES, FoldSummaryPolicy, extractive_summary
from runtime.values.messages import ToolCall, ToolResult

TRANSCRIPT = "\n".join(
    [
        "[user #1]",
        "Read the config.",
        "",
        '[assistant #2 calls read_file {"path":"a.toml"}]',
        "[result #3 of read_file]",
        "",
        "[x] not a header line",
        "key = 1",
        "[assistant #4]",
        "",
        "",
        "",
        "too far to follow",
        "[earlier fold note]",
        "Folded calls: stat x",
        "[earlier fold note]",
        "[fold f-7c62abe76526 · reset · 3 messages from #4 · span sha256 2462]",
        "Summary:",
        "What the folded span did:",
        "- an inner line",
        "Folded calls (read any original with ...):",
        '- #5 synthetic_read {"path":"a.py"} -> 4200 chars',
        '- #13 context {"action":"fold"} -> 148 chars',
    ]
)


def test_the_extractive_summary_keeps_each_call_and_the_first_line_of_each_message() -> None:
    assert extractive_summary(TRANSCRIPT) == "\n".join(
        [
            "What the folded span did:",
            "- user #1: Read the config.",
            '- #2 calls read_file {"path":"a.toml"}',
            "- result #3 of read_file: key = 1",
            # An earlier note is said as a sentence: what it folded and its first listed call.
            "- An earlier fold note folded no calls.",
            '- An earlier fold note (reset, 3 messages from #4) lists 2 calls, the first #5 synthetic_read {"path":"a.py"}.',
        ]
    )


def test_the_extractive_summary_is_bounded_in_lines_and_line_length() -> None:
    many = "\n".join(f"[user #{i}]\n{'w' * 400}" for i in range(MAX_LINES + 5))
    lines = extractive_summary(many).splitlines()
    assert len(lines) == MAX_LINES + 1 and all(len(line) == LINE_CHARS for line in lines[1:])
    nothing = "The folded span held no calls or messages worth keeping."
    assert extractive_summary("nothing here\n[assistant #3]\n") == nothing


def test_the_policy_answers_from_the_user_text_of_the_request_only() -> None:
    payload = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "[user #1]"}, {"type": "text"}, {"type": "image"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "[user #9]\nignored"}]},
            {"role": "user", "content": "Read the config."},
        ]
    }
    reply = FoldSummaryPolicy().respond(payload)
    assert reply.stop_reason == "end_turn"
    assert reply.content == ({"type": "text", "text": "What the folded span did:\n- user #1: Read the config."},)
    empty = FoldSummaryPolicy().respond({})
    assert empty.content == ({"type": "text", "text": "The folded span held no calls or messages worth keeping."},)


def test_median_of_odd_and_even_samples() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([7.0]) == 7.0


def result(output: object) -> ToolResult:
    return ToolResult.for_call(ToolCall.create("toolu_1", "run", {}), output)


def largest_body_chars(result: ToolResult) -> int:
    return max((len(b.text) for b in result_shape(result).bodies), default=0)


def test_the_largest_body_and_what_a_projection_keeps_of_it() -> None:
    text = synthetic_text("big", 9_000)
    assert largest_body_chars(result(text)) == 9_000
    assert largest_body_chars(result({"a": "x" * 10, "b": "y" * 300, "ok": True})) == 300
    assert largest_body_chars(result({"success": True, "error": "x"})) == 0  # protected fields are no bodies
    kept = max(project(result(text), index=4, allowance=None, bound=2_000).kept)
    assert 0 < kept < 2_000
    assert max(project(result(text), index=4, allowance=500, bound=None).kept) == 500


def test_a_measurer_at_another_scale_scales_the_same_count() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([("read_file", {"path": "a.md"}, synthetic_text("a.md", 2_000))])
    branch = c.branch()
    measurer = measurer_for(branch, counter=TokenCounter())
    counted = measurer.measure(branch.view()).counted
    assert measurer.with_scale(1.5).estimate(branch.view()) == math.ceil(counted * 1.5)
    assert measurer.with_scale(1.5).scale == 1.5 and measurer.scale == 1.0


def test_the_first_round_decision_records_everything_it_was_decided_on() -> None:
    from runtime.fold.protected import decide
    from runtime.values.canonical import sha256_hex

    c = Conversation()
    c.task("Read.")
    call, results = c.round([("read_file", {"path": "a.md"}, synthetic_text("a.md", 400))])
    members = [call, *results]
    decision = decide(
        members, estimate_of=lambda ms: 150, ceiling=1_500, scale=1.25, result_bound=4_096, now=7, by="br-1"
    )
    assert (decision.included, decision.member_ids, decision.ceiling, decision.budget, decision.size) == (
        True,
        (call.id, results[0].id),
        1_500,
        150,
        150,
    )
    assert decision.digest == sha256_hex("\n".join(m.sha256 for m in members))
    recorded = (decision.scale, decision.result_bound, decision.decided_at, decision.decided_by)
    assert recorded == (1.25, 4_096, 7.0, "br-1")
    assert isinstance(decision.decided_at, float)
    over = decide(members, estimate_of=lambda ms: 151, ceiling=1_500, scale=1.0, result_bound=None, now=0, by="br-1")
    assert over.included is False and over.result_bound is None


def test_messages_alone_are_measured_under_the_measurers_result_bound() -> None:
    c = Conversation()
    c.task("Read.")
    call, results = c.round([("read_file", {"path": "a.md"}, synthetic_text("a.md", 20_000))])
    branch = c.branch()
    bounded = measurer_for(branch, counter=TokenCounter(), bound=2_000)
    unbounded = measurer_for(branch, counter=TokenCounter())
    assert bounded.messages_estimate([call, *results]) < unbounded.messages_estimate([call, *results]) / 4
