"""Fold rules a third mutation run found unpinned (scripts/mutation): each test names the rule it pins.

Like ``test_fold_mutants.py`` and ``test_fold_mutants_2.py``: every test here
was written against a mutant of ``runtime/fold`` that the module's other tests
let through, named in the comment above it. The note tests check the note's
text as the model reads it: its listing lines, its summary and its digests.
"""

from __future__ import annotations

import pytest

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, fold_input, measurer_for, run_planner
from runtime.fold.formats import parse_clip_marker
from runtime.fold.notes import (
    SUMMARY_MAX_CHARS,
    build_note,
    fold_id_of,
    span_digest,
    structural_digest,
    transcript,
    unit_lines,
)
from runtime.fold.planner import SUMMARY_ALLOWANCE_TOKENS, SUMMARY_SYSTEM, FoldPlanner, SummaryResult
from runtime.fold.protected import protected_ids
from runtime.fold.settings import FoldSettings
from runtime.fold.target import TARGET_LOW
from runtime.fold.units import units_of
from runtime.values.messages import (
    AssistantResponse,
    ClipInfo,
    ImagePart,
    Instruction,
    Note,
    RedactedThinkingPart,
    TextPart,
    ThinkingPart,
    ToolCall,
    ToolResult,
)
from tests.test_fold_mutants_2 import a_brief_then_small_rounds
from tests.test_fold_planner import COUNTER, plan_for, read

IMAGE = ImagePart("image/png", "AAAA", "ab" * 32, 10, 20, 100)
IMAGE_TEXT = "image sha256:abababababababab PNG 10x20, 100 bytes, ~1 tokens"
HEADING = (
    'Folded calls (read any original with context {"action":"read_result","index":N}; '
    'restore with context {"action":"restore","index":N}):'
)


def _restore(index: int) -> str:
    return f'restore with context {{"action":"restore","index":{index}}}'


def _mixed() -> tuple[Conversation, list[ToolResult]]:
    """A task with an image, then a reply with thinking, text and two calls (one erring, one with an image)."""
    c = Conversation()
    c.add(Instruction("Look at this.", images=(IMAGE,)))
    calls = (ToolCall.create("toolu_1", "read_file", {"path": "a.md"}), ToolCall.create("toolu_2", "stat", {"p": 1}))
    parts = (
        ThinkingPart("let me think about it", "sig"),
        RedactedThinkingPart("xyz"),
        TextPart("Reading both."),
        TextPart("  "),
        TextPart("Then stat."),
        *calls,
    )
    c.add(AssistantResponse(parts))
    results = [
        ToolResult.for_call(calls[0], "x" * 120, images=(IMAGE,)),
        ToolResult.for_call(calls[1], "no", is_error=True),
    ]
    for result in results:
        c.add(result)
    return c, results


# notes unit_lines mutmut_6, _8, _12, _17, _18, _23.._29, _45, _52, _56, _57, _62.._64; thinking_line mutmut_1.._9
# (no test of the planner reached a reply with thinking): a note lists the task with its image, the reply's text,
# the thinking it held (redacted blocks counted), each call with its size, error and image, under the heading.
def test_a_note_lists_every_folded_message_thinking_call_and_image() -> None:
    c, _ = _mixed()
    branch = c.branch()
    note = build_note("tool_io", units_of(branch.view(), branch), branch, summary="  done  ")
    lines = note.text.splitlines()
    assert lines[0].startswith("[fold f-") and lines[0].endswith(" · tool_io · 4 messages from #1]")
    assert lines[1:] == [
        "Summary:",
        "done",
        HEADING,
        '- #1 user: "Look at this."',
        f"  (#1 {IMAGE_TEXT}; {_restore(1)})",
        '- #2 assistant: "Reading both.\\nThen stat."',
        f"  (#2 held 2 thinking block(s), 1 redacted, about 5 thinking tokens; {_restore(2)})",
        '- #3 read_file {"path":"a.md"} -> 120 chars',
        '  (#3 line 1: "' + "x" * 120 + '")',
        f"  (#3 {IMAGE_TEXT}; {_restore(3)})",
        '- #4 stat {"p":1} -> error, 2 chars',
        '  (#4 line 1: "no")',
    ]
    assert note.first_index == 1 and note.stage == "tool_io" and len(note.replaced) == 4


# notes thinking_line mutmut_10, _11: a reply whose thinking has no redacted block says nothing of redaction.
def test_the_thinking_line_of_a_reply_without_redacted_blocks() -> None:
    c = Conversation()
    c.task("Think.")
    c.add(AssistantResponse((ThinkingPart("one two three", "s"), TextPart("Done."))))
    branch = c.branch()
    reply = units_of(branch.view(), branch)[1]
    assert unit_lines(reply, branch) == [
        '- #2 assistant: "Done."',
        f"  (#2 held 1 thinking block(s), about 3 thinking tokens; {_restore(2)})",
    ]


# notes unit_lines mutmut_34: a call whose result is not in the unit is skipped, and the calls after it still listed.
def test_a_round_lists_the_calls_after_one_whose_result_is_not_folded_with_it() -> None:
    c = Conversation()
    c.task("Read.")
    response, results = c.round([("read_file", {"path": "a"}, "aaa"), ("read_file", {"path": "b"}, "bbbb")])
    c.view.remove(results[0].id)
    branch = c.branch()
    (_, round_unit) = units_of(branch.view(), branch)
    assert unit_lines(round_unit, branch) == ['- #4 read_file {"path":"b"} -> 4 chars', '  (#4 line 1: "bbbb")']


# notes unit_lines mutmut_68.._86, _original mutmut_8: a result folded without its call (a clipped copy standing for
# an erring original with an image) is listed as its original: index, size, error and image; a copy whose original
# is not in the record is refused, naming both.
def test_a_lone_copy_is_listed_as_its_original_and_a_copy_without_one_is_refused() -> None:
    c = Conversation()
    c.task("Read.")
    _, (original,) = c.round([("read_file", {"path": "a"}, "y" * 50)])
    erring = ToolResult(
        original.call_id, "read_file", original.arguments_json, "z" * 70, is_error=True, images=(IMAGE,)
    )
    c.add(erring, in_view=False)
    copy = ToolResult(
        erring.call_id,
        "read_file",
        erring.arguments_json,
        "z…z",
        is_error=True,
        clipped_from=erring.id,
        clip=ClipInfo(original_index=4, total=70, head=1, tail=1),
    )
    c.add(copy, in_view=False)
    c.view = [c.view[0], copy.id]
    branch = c.branch()
    lone = units_of(branch.view(), branch)[1]
    assert lone.members == (copy,)
    assert unit_lines(lone, branch) == [
        "- #4 read_file {} -> error, 70 chars",
        '  (#4 line 1: "' + "z" * 70 + '")',  # the original's salient line, not the copy's
        f"  (#4 {IMAGE_TEXT}; {_restore(4)})",
    ]
    stranger = ToolResult("call-9", "read_file", "{}", "kept", clipped_from="gone-id")
    c.add(stranger)
    branch = c.branch()
    with pytest.raises(KeyError) as refused:
        unit_lines(units_of(branch.view(), branch)[-1], branch)
    assert refused.value.args[0] == f"clipped copy {stranger.id} names original gone-id, which is not in the record"


# notes build_note mutmut_2.._4: a note of nothing is refused, saying so.
def test_a_note_of_no_unit_is_refused() -> None:
    with pytest.raises(ValueError) as refused:
        build_note("tool_io", [], Conversation().branch())
    assert str(refused.value) == "build_note: a note must replace at least one unit"


# notes build_note mutmut_28, _31.._33: a summary of exactly SUMMARY_MAX_CHARS is kept whole; a longer one is cut
# to that many characters, its last three "...".
def test_a_summary_is_kept_up_to_its_bound_and_cut_to_it_beyond() -> None:
    c = Conversation()
    c.task("Go.")
    branch = c.branch()
    units = units_of(branch.view(), branch)

    def summary_of(text: str) -> str:
        body = build_note("all", units, branch, summary=text).text.split("Summary:\n", 1)[1]
        return body.split("\n" + HEADING, 1)[0]

    exact = "s" * SUMMARY_MAX_CHARS
    assert summary_of(exact) == exact
    cut = summary_of("t" * (SUMMARY_MAX_CHARS - 1) + "uv")
    assert cut == "t" * (SUMMARY_MAX_CHARS - 3) + "..."
    assert len(cut) == SUMMARY_MAX_CHARS


# notes transcript mutmut_4, _5, _15, _19: the summary request's transcript names each message by its record index,
# projects each result at its original's index, and separates the entries by a blank line.
def test_the_transcript_names_indexes_and_projects_each_original() -> None:
    c, results = _mixed()
    copy = ToolResult(
        results[0].call_id,
        "read_file",
        results[0].arguments_json,
        "x…x",
        clipped_from=results[0].id,
        clip=ClipInfo(original_index=3, total=120, head=1, tail=1),
    )
    c.add(copy, in_view=False)
    c.view[c.view.index(results[0].id)] = copy.id
    branch = c.branch()
    text = transcript(units_of(branch.view(), branch), branch, lambda r, i: f"<#{i}: {len(r.output)} chars>")
    assert text.split("\n\n") == [
        "[user #1]\nLook at this.",
        "[assistant #2]\nReading both.",
        "[assistant #2]\nThen stat.",
        '[assistant #2 calls read_file {"path":"a.md"}]',
        '[assistant #2 calls stat {"p":1}]',
        "[result #3 of read_file]\n<#3: 120 chars>",
        "[result #4 of stat]\n<#4: 2 chars>",
    ]


# notes structural_digest mutmut_3.._12, _16.._20: the span digest (written in older notes' headers) and the fold id
# derived from it (every note's header) are checked again when the note is restored, from records a store kept
# across runs and versions; so the digest of a note and of a clipped copy, and the fold id's formula, are part of
# the stored format, pinned here (a changed formula would refuse every stored note).
def test_the_digests_of_a_note_and_of_a_clipped_copy_are_the_stored_format() -> None:
    note = Note("folded #2-#5", ("id-a", "id-b"), 2, "tool_io")
    clip = ClipInfo(original_index=4, total=9000, head=750, tail=250)
    copy = ToolResult("toolu_1", "read_file", "{}", "head…tail", clipped_from="orig-1", clip=clip)
    assert structural_digest(note) == "e48648618c002211580cd451462273514b6631e026e9c656106d73c1b2193f4b"
    assert structural_digest(copy) == "06a8790942d24ab656f608ba09f9d09f629db5b62455307238968e3a39f8579c"
    assert span_digest([note, copy]) == "fcc48938761b1ef5c955476f27c8803683f2fce43fd4b622936c8e8762b7dc6e"
    assert fold_id_of("tool_io", span_digest([note, copy])) == "f-56f3a17e6e33"


# -- the planner ------------------------------------------------------------------------------------------------


def _estimate(c: Conversation, scale: float | None = None) -> int:
    branch = c.branch()
    return measurer_for(branch, counter=COUNTER, scale=scale).estimate(branch.view())


def _plan(c: Conversation, settings: FoldSettings, summary: str | None = "s", **overrides):
    """Plan a fold with the first round protected; every summary request is answered with ``summary``
    (or fails when it is None)."""
    answer = SummaryResult(text=summary) if summary is not None else SummaryResult(failure="boom")
    protected = protected_ids(None, c.branch().view())
    _, _, plan, needs = plan_for(c, settings, lambda need: answer, protected=protected, **overrides)
    return plan, needs


def _passes(plan) -> list[tuple[str, str, str]]:
    return [(p.stage, p.outcome, p.detail) for p in plan.passes]


def _one_big_read() -> tuple[Conversation, ToolResult]:
    c = Conversation()
    c.task("Read.")
    _, (big,) = c.round([read("big.md", 30_000)])
    c.answer("Read it.")
    c.add(Instruction("Next."))
    c.deliver()
    return c, big


# planner _summary_need mutmut_5, _6, _17.._19, _21, _28, _29, _34, _46: a summary request opens with
# SUMMARY_SYSTEM and names where its span starts; each result body in it is cut to the span's budget (half the
# ceiling, at four characters a token, shared by its results) or to the result bound when that is lower, and its
# clip marker names the original's index.
def test_a_summary_request_cuts_each_result_to_its_share_of_the_budget_or_to_the_bound() -> None:
    c, big = _one_big_read()
    index = c.branch().index_of(big.id)
    limits = []
    for bound in (None, 1500):
        plan, needs = _plan(c, FoldSettings(ceiling=5000, strategy="compaction", result_bound=bound))
        (need,) = needs
        assert need.system == SUMMARY_SYSTEM
        assert need.prompt.startswith(
            "Summarize this span of the conversation, from #1, which is being folded out of the agent's context."
        )
        (marker,) = parse_clip_marker(need.prompt)
        assert (marker.index, marker.total) == (index, 30_000)
        limits.append(marker.limit)
    assert limits == [5000 * 2, 1500]


# planner _fold mutmut_18, _81, _85, _90.._92: with caching, when the ordinary stages (which take only what follows
# the newest note) do not reach the target, reset folds everything after the protected first round, the earlier
# note and the answers before it included, into one note.
def test_a_reset_after_the_ordinary_stages_takes_the_earlier_note_and_what_precedes_it() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    before = []
    for i in range(3):
        before.append(c.answer(f"Answer {i}: " + synthetic_text(f"answer{i}", 3000)))
        c.task(f"Next request {i}.")
    earlier = Note("[earlier note] " + "listing line\n" * 5, (), 3, "tool_io")
    c.add(earlier)
    for i in range(6):
        c.round([read(f"r/{i}.md", 1500)])
    c.deliver()
    c.round([read("newest.md", 1500)])
    plan, needs = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), caching=True, target=0.3))
    assert [need.stage for need in needs] == ["reset"]
    assert plan.stages[-1] == "reset" and plan.target_reached
    (reset,) = [m for m in plan.added if isinstance(m, Note) and m.stage == "reset"]
    assert {m.id for m in before} | {earlier.id} <= set(reset.replaced)


# planner _fold mutmut_26, _33, _34, _35: an early reset (notes over 15% of the ceiling) folds the notes themselves;
# rolled back (its summary costs more than the notes), it is not asked for again at the end.
def test_an_early_reset_folds_the_notes_and_once_rolled_back_is_not_asked_again() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    notes = [Note(f"[earlier note {i}] " + "listing line\n" * 30, (), 3, "tool_io") for i in range(4)]
    for note in notes:
        c.add(note)
    c.round([read("r/0.md", 3000)])
    c.deliver()
    c.round([read("newest.md", 3000)])
    branch = c.branch()
    measurer = measurer_for(branch, counter=COUNTER)
    notes_tokens = sum(measurer.block_tokens(note)[0] for note in notes)
    settings = FoldSettings(ceiling=int(notes_tokens / 0.16), caching=True, target=0.2)
    plan, needs = _plan(c, settings, summary="x " * 20_000)
    assert [need.stage for need in needs] == ["reset"]
    assert {note.id for note in notes} <= set(needs[0].span_ids)
    assert _passes(plan)[0] == ("reset", "rolled_back", "tail 2")
    assert [p.stage for p in plan.passes].count("reset") == 1


# planner _summarized_pass mutmut_10.._14, _16: reset does not summarize a lone note into another note.
def test_reset_leaves_a_lone_note_alone() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    c.add(Note("[earlier note] " + "listing line\n" * 400, (), 3, "tool_io"))
    c.round([read("r/0.md", 1500)])
    c.deliver()
    plan, needs = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), caching=True))
    assert needs == []
    assert _passes(plan) == [("clip", "landed", "#6 1500 chars kept 1024")]


# planner _tool_io mutmut_50, _51, _fold mutmut_55: a round held back (folding it would fall far below the target)
# that the clip cannot make up for (no result above the clip floor) is folded after all, without a summary.
def test_a_round_held_back_is_folded_after_all_when_the_clip_cannot_reach() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([("stat", {"path": "first"}, "ok")])
    _, many = c.round([read(f"many/{i}.txt", 1000) for i in range(10)])
    c.round([read("mid.md", 1000)])
    for i in range(6):
        c.round([read(f"t/{i}.md", 1000)])
    c.deliver()
    plan, needs = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), target=0.7))
    assert needs == [] and plan.target_reached
    assert _passes(plan) == [("tool_io", "landed", "tail 6, the oldest 1 of 5 rounds")]
    assert {r.id for r in many} <= set(plan.folded_ids)


def _answers(count: int, newest_reads: int = 2, size: int = 2000) -> Conversation:
    c = Conversation()
    c.task("Work through the requests.")
    for i in range(count):
        c.answer(f"Answer {i}: done. " + synthetic_text(f"a{i}", size))
        c.add(Instruction(f"Next request {i}."))
    c.deliver()
    c.round([read(f"small/{i}.txt", 200) for i in range(newest_reads)])
    return c


# planner _fold mutmut_63, _summarized_pass mutmut_57, _113: when the floor view reaches the target, the `all`
# stage tries tail six before tail two; each summary is counted; a failed one is named in its pass's detail.
def test_the_all_stage_tries_tail_six_first_and_counts_its_summaries() -> None:
    c = _answers(4)
    settings = FoldSettings(ceiling=int(_estimate(c) / 0.85), target=0.5)
    plan, needs = _plan(c, settings)
    assert [need.stage for need in needs] == ["all", "all"]
    assert _passes(plan) == [("all", "landed", "tail 6"), ("all", "landed", "tail 2")]
    assert plan.summaries == 2
    failed, _ = _plan(c, FoldSettings(ceiling=settings.ceiling, target=0.7), summary=None)
    assert _passes(failed)[0][2] == "tail 6; summary failed: boom"


# planner _summarized_pass mutmut_46, _47: the `all` stage takes only the oldest units it needs to reach the target
# with room left for the summary to come (SUMMARY_ALLOWANCE_TOKENS, at the scale in force).
@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_the_all_stage_leaves_room_for_the_summary_under_the_target(scale: float) -> None:
    c = _answers(12, size=1000)
    branch = c.branch()
    measurer = measurer_for(branch, counter=COUNTER, scale=scale)
    settings = FoldSettings(ceiling=int(measurer.estimate(branch.view()) / 0.85), target=0.7)
    planner = FoldPlanner(fold_input(branch, settings), measurer)
    plan, needs = run_planner(planner, lambda need: SummaryResult(text="(summary)"))
    (landed,) = plan.passes
    assert landed.stage == "all" and landed.outcome == "landed"
    room = settings.target_tokens - SUMMARY_ALLOWANCE_TOKENS * scale
    assert room - 200 * scale < landed.estimate_after <= room


# planner _span_units mutmut_10, _fold mutmut_69, _76: with caching, the `all` stage summarizes only what follows
# the newest note; the answers before it keep their place (a byte prefix for the cache).
def test_with_caching_the_all_stage_summarizes_only_what_follows_the_newest_note() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    before = [c.answer(f"Before {i}. " + synthetic_text(f"b{i}", 2000)) for i in range(3)]
    c.add(Note("[earlier note] " + "listing line\n" * 5, (), 3, "tool_io"))
    after = []
    for i in range(4):
        after.append(c.answer(f"After {i}. " + synthetic_text(f"c{i}", 2000)))
        c.add(Instruction(f"Go on {i}."))
    c.deliver()
    c.round([read("newest.md", 1500)])
    plan, needs = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), target=0.7, caching=True))
    (need,) = needs
    assert need.stage == "all"
    assert not {m.id for m in before} & set(need.span_ids)
    assert {m.id for m in after[:2]} <= set(need.span_ids)
    assert all(m.id in plan.view_ids for m in before)


# planner _clip mutmut_3, _10, _31: the clip never cuts the protected first round's result, however large; the
# pass's detail lists each cut, separated by "; ".
def test_the_clip_spares_the_protected_round_and_lists_each_cut() -> None:
    c = Conversation()
    c.task("Read.")
    _, (first,) = c.round([read("first.md", 30_000)])
    c.deliver()
    c.round([read("a.md", 9000), read("b.md", 9000)])
    plan, needs = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), target=0.5))
    assert needs == []
    assert _passes(plan) == [("clip", "landed", "#5 9000 chars kept 1024; #6 9000 chars kept 1024")]
    assert first.id in plan.view_ids


# planner _clip mutmut_20: a clip under a result bound keeps no more of a result than the bound.
def test_a_clip_under_a_result_bound_keeps_no_more_than_the_bound() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([("stat", {"path": "first"}, "ok")])
    c.deliver()
    c.round([read("a.md", 20_000)])
    plan, _ = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), target=0.7, result_bound=10_000))
    (copy,) = plan.added
    assert isinstance(copy, ToolResult) and len(copy.output) <= 10_000
    assert _passes(plan) == [("clip", "landed", "#5 20000 chars kept 5839")]


def _notes_history(lines: int) -> tuple[Conversation, list[Note]]:
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    notes = [Note(f"[earlier note {i}] " + "listing line\n" * lines, (), 3, "tool_io") for i in range(4)]
    for note in notes:
        c.add(note)
    for i in range(6):
        c.round([read(f"r/{i}.md", 1500)])
    c.deliver()
    c.round([read("newest.md", 1500)])
    return c, notes


# planner _fold mutmut_21, _notes_tokens mutmut_2, _6: reset runs first only when the notes' tokens are strictly
# over 15% of the ceiling: at exactly 15% nothing is folded, one token of ceiling less and reset runs first.
def test_reset_runs_first_only_strictly_over_fifteen_percent() -> None:
    c, notes = _notes_history(100)
    measurer = measurer_for(c.branch(), counter=COUNTER)
    notes_tokens = sum(measurer.block_tokens(note)[0] for note in notes)
    assert notes_tokens % 3 == 0  # so a whole ceiling puts them at exactly 15% of it
    ceiling = notes_tokens * 20 // 3
    assert 0.15 * ceiling == notes_tokens
    plan, needs = _plan(c, FoldSettings(ceiling=ceiling, caching=True))
    assert needs == [] and plan.passes == ()
    plan, needs = _plan(c, FoldSettings(ceiling=ceiling - 1, caching=True))
    assert [need.stage for need in needs] == ["reset"] and plan.stages == ("reset",)


# planner _notes_tokens mutmut_7: the notes' share is taken at the scale in force (tokens times the scale).
def test_the_notes_share_is_measured_at_the_scale() -> None:
    c, notes = _notes_history(100)
    branch = c.branch()
    measurer = measurer_for(branch, counter=COUNTER, scale=2.0)
    notes_tokens = sum(measurer.block_tokens(note)[0] for note in notes)
    settings = FoldSettings(ceiling=notes_tokens * 10, caching=True)  # 10% unscaled, 20% at the scale
    planner = FoldPlanner(fold_input(branch, settings, protected=protected_ids(None, branch.view())), measurer)
    plan, needs = run_planner(planner, lambda need: SummaryResult(text="s"))
    assert [need.stage for need in needs][:1] == ["reset"]


# planner _fold mutmut_60: a floor view exactly at the ceiling still gets its summary (over it, none is asked for).
def test_a_floor_view_exactly_at_the_ceiling_still_gets_a_summary() -> None:
    c = Conversation()
    first = c.task("Work through the requests.")
    answers = []
    for i in range(3):
        answers.append(c.answer(f"Answer {i}: done."))
        task = c.task(f"Next request {i}.")
    c.deliver()
    response, results = c.round([read(f"small/{i}.txt", 1000) for i in range(36)])
    branch = c.branch()
    # The floor view: the task, the view's first message and the protected first round (its answer), the tail.
    floor = measurer_for(branch, counter=COUNTER).estimate([first, answers[0], task, response, *results])
    _, needs = _plan(c, FoldSettings(ceiling=floor))
    assert [need.stage for need in needs] == ["all"]
    _, needs = _plan(c, FoldSettings(ceiling=floor - 1))
    assert needs == []


# planner _floor_estimate mutmut_8: with caching, the floor view keeps what precedes the newest note (the ordinary
# stages cannot take it), so a floor over the ceiling asks for no `all` summary, only the reset.
def test_with_caching_the_floor_keeps_what_precedes_the_newest_note() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    for i in range(4):
        c.answer(f"Before {i}. " + synthetic_text(f"b{i}", 4000))
        c.add(Instruction(f"Next {i}."))
    c.add(Note("[earlier note] " + "listing line\n" * 5, (), 3, "tool_io"))
    for i in range(3):
        c.answer(f"After {i}. " + synthetic_text(f"c{i}", 300))
        c.add(Instruction(f"Go on {i}."))
    c.deliver()
    c.round([read("newest.md", 500)])
    plan, needs = _plan(c, FoldSettings(ceiling=int(_estimate(c) * 0.9), caching=True))
    assert [need.stage for need in needs] == ["reset"]
    assert _passes(plan) == [("reset", "landed", "tail 2")]


# planner _clip mutmut_8, _9: a copy whose original the model just read (read_result recovers the original while the
# copy stays in the view) is not cut again by the clip.
def test_the_clip_leaves_a_copy_whose_original_was_just_read() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([("stat", {"path": "first"}, "ok")])
    _, (original,) = c.round([read("x.md", 20_000)])
    c.deliver()
    c.round([read("newest.md", 4000)])
    first, _ = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), target=0.7))
    c.land(first)
    assert [m.clipped_from for m in first.added] == [original.id]
    settings = FoldSettings(ceiling=int(_estimate(c) / 0.85), target=0.5)
    again, _ = _plan(c, settings)
    assert [m.clipped_from for m in again.added] == [original.id]  # unread, the copy is cut again
    after_read, _ = _plan(c, settings, recovered=frozenset({original.id}))
    assert original.id not in [m.clipped_from for m in after_read.added]


# planner _fold mutmut_105: an epoch commit is deferred only when it frees strictly less than 1% of the ceiling: one
# that frees exactly 1% lands.
def test_an_epoch_commit_freeing_exactly_one_percent_of_the_ceiling_lands() -> None:
    c = a_brief_then_small_rounds()
    plan, _ = _plan(c, FoldSettings(ceiling=10_000, caching=True))
    (landed,) = plan.passes
    freed = landed.estimate_before - landed.estimate_after
    assert plan.deferred and freed < 100
    ceiling = freed * 100  # 1% of it is exactly what the commit frees
    assert 0.01 * ceiling == freed
    exact, _ = _plan(c, FoldSettings(ceiling=ceiling, caching=True))
    assert [p.estimate_before - p.estimate_after for p in exact.passes] == [freed]
    assert not exact.deferred and exact.landed
    above, _ = _plan(c, FoldSettings(ceiling=ceiling + 1, caching=True))
    assert above.deferred


# planner _tool_io mutmut_45: tool_io holds a round back only when folding it lands strictly below TARGET_LOW of the
# target; landing exactly there, the round is folded (and the clip, which could also reach, is not needed).
def test_a_round_landing_exactly_at_the_low_mark_is_not_held_back() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([("stat", {"path": "first"}, "ok")])
    c.round([read(f"many/{i}.txt", 1000) for i in range(10)])
    c.round([read("mid.md", 1068)])  # its size makes the estimate below a multiple of nine (checked)
    for i in range(5):
        c.round([read(f"t/{i}.md", 1000)])
    c.round([read("big.md", 20_000)])
    c.deliver()
    branch = c.branch()
    units = units_of(branch.view(), branch)
    note = build_note("tool_io", [units[2]], branch)
    folded = [m for u in units[:2] for m in u.members] + [note] + [m for u in units[3:] for m in u.members]
    low = measurer_for(branch, counter=COUNTER).estimate(folded)  # the estimate with the oldest round folded
    assert low % 9 == 0
    settings = FoldSettings(ceiling=low * 20 // 9, target=0.5)  # TARGET_LOW of the target is exactly `low`
    assert TARGET_LOW * settings.target_tokens == low
    plan, needs = _plan(c, settings)
    assert needs == [] and plan.stages == ("tool_io",)
    assert [(p.detail, p.estimate_after) for p in plan.passes] == [("tail 6, the oldest 1 of 5 rounds", low)]
