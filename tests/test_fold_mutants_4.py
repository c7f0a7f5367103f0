"""Fold rules a third mutation run found unpinned, continued (scripts/mutation): recovery, the measurer,
projection, plan_run and units; each test names the rule it pins (see ``test_fold_mutants_3.py``).
"""

from __future__ import annotations

import json

import attrs
import pytest

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, measurer_for
from runtime.fold.bodies import Body, result_shape
from runtime.fold.cost import (
    COST_TARGETS,
    SUMMARY_OUTPUT_TOKENS,
    UNCACHED,
    Candidate,
    CostDecision,
    CostPrices,
    CostState,
    choose,
    decide_fold,
    per_request,
    target_candidate,
)
from runtime.fold.formats import parse_clip_marker
from runtime.fold.marks import FoldMark
from runtime.fold.notes import build_note
from runtime.fold.projection import (
    ProjectionError,
    _cut_text,
    bound_retained,
    clipped_copy,
    project,
    project_body,
)
from runtime.fold.recovery import RecoveryCorrupted, plan_restore, read_result
from runtime.fold.settings import FoldSettings
from runtime.fold.units import is_complete_round, units_of
from runtime.measuring.image_count import measure_request
from runtime.values.image_rules import CHAT_IMAGES, MESSAGES_IMAGES
from runtime.values.messages import (
    AssistantResponse,
    ImagePart,
    Instruction,
    Message,
    Note,
    SystemMessage,
    ToolCall,
    ToolResult,
)
from tests.test_fold_mutants_3 import _estimate, _plan
from tests.test_fold_planner import COUNTER, plan_for, read

# -- recovery ---------------------------------------------------------------------------------------------------


def _two_rounds() -> tuple[Conversation, dict[str, Message], Note]:
    """A task, a round of two reads and a round of one, folded into one note; the ids sort against record order."""
    c = Conversation()
    c.task("Read.")
    calls = [ToolCall.create(f"toolu_{n}", "read_file", {"path": f"{n}.md"}) for n in range(3)]
    made = {
        "R": AssistantResponse((calls[0], calls[1]), id="m9"),
        "X1": ToolResult(calls[0].call_id, "read_file", calls[0].arguments_json, "one " * 50, id="m8"),
        "X2": ToolResult(calls[1].call_id, "read_file", calls[1].arguments_json, "two " * 50, id="m7"),
        "R2": AssistantResponse((calls[2],), id="m6"),
        "Y": ToolResult(calls[2].call_id, "read_file", calls[2].arguments_json, "three " * 50, id="m5"),
    }
    for message in made.values():
        c.add(message)
    branch = c.branch()
    note = build_note("tool_io", units_of(branch.view(), branch)[1:], branch)
    c.add(note, in_view=False)
    c.view = [c.view[0], note.id]
    return c, made, note


# recovery plan_restore mutmut_49, _51, _round_at mutmut_21: restoring a note brings back every original it stands
# for, whole rounds in record order, and drops the note.
def test_restoring_a_note_brings_back_its_rounds_in_record_order() -> None:
    c, made, note = _two_rounds()
    branch = c.branch()
    plan = plan_restore(branch.view(), branch, start=branch.index_of(note.id))
    order = [made[k].id for k in ("R", "X1", "X2", "R2", "Y")]
    assert plan.view_ids == (c.view[0], *order)
    assert plan.restored == tuple(order) and plan.dropped_notes == (note.id,)


# recovery _unit_of_original mutmut_12, _15, _insert mutmut_17.._19: restoring the second result of a round brings
# back its whole round, placed before the note that still stands for the rest (a tie in time goes before notes).
def test_restoring_one_result_brings_back_its_round_before_the_note() -> None:
    c, made, note = _two_rounds()
    branch = c.branch()
    plan = plan_restore(branch.view(), branch, start=branch.index_of(made["X2"].id))
    assert plan.view_ids == (c.view[0], made["R"].id, made["X1"].id, made["X2"].id, note.id)
    assert plan.dropped_notes == ()


# recovery _insert mutmut_12: a round that belongs after everything in the view goes at the end, once.
def test_a_restored_round_later_than_the_whole_view_goes_last() -> None:
    c, made, note = _two_rounds()
    branch = c.branch()
    plan = plan_restore(branch.view(), branch, start=branch.index_of(made["Y"].id))
    assert plan.view_ids == (c.view[0], note.id, made["R2"].id, made["Y"].id)


# recovery _restore_targets mutmut_10: a range that starts at the system message restores what follows it.
def test_a_range_from_the_system_message_restores_everything_folded() -> None:
    c, made, note = _two_rounds()
    branch = c.branch()
    plan = plan_restore(branch.view(), branch, start=0, end=branch.index_of(made["Y"].id))
    assert set(plan.restored) == {m.id for m in made.values()}


# recovery _restore_targets mutmut_31, _44: a range goes on past a note inside it and past a message that nothing
# stands for.
def test_a_range_goes_on_past_an_earlier_note_and_an_unfolded_message() -> None:
    c = Conversation()
    c.task("Read.")
    dropped = Instruction("Dropped from the view; nothing stands for it.")
    c.add(dropped, in_view=False)
    _, (first,) = c.round([read("a.md", 300)])
    branch = c.branch()
    earlier = build_note("tool_io", units_of(branch.view(), branch)[1:], branch)
    c.add(earlier, in_view=False)
    c.view = [c.view[0], earlier.id]
    later, (second,) = c.round([read("b.md", 300)])
    branch = c.branch()
    plan = plan_restore(branch.view(), branch, start=branch.index_of(dropped.id), end=branch.index_of(second.id))
    assert first.id in plan.restored
    assert plan.already == (later.id, second.id)


# recovery _round_at mutmut_7, _8, _12.._14, _20, _22, _25, _26: a round whose original result is missing (only a
# copy names its call) is refused as corrupted, naming the round and the call.
def test_a_round_missing_an_original_result_is_refused_naming_the_call() -> None:
    c = Conversation()
    c.task("Read.")
    calls = [ToolCall.create("toolu_a", "read_file", {"path": "a"}), ToolCall.create("toolu_b", "read_file", {})]
    response = AssistantResponse(tuple(calls))
    c.add(response, in_view=False)
    c.add(ToolResult.for_call(calls[0], "a"), in_view=False)
    c.add(ToolResult("toolu_b", "read_file", "{}", "b", clipped_from="gone"), in_view=False)
    c.add(Instruction("Go on."))
    note = Note("folded", (response.id,), 2, "tool_io")
    c.add(note)
    branch = c.branch()
    with pytest.raises(RecoveryCorrupted) as refused:
        plan_restore(branch.view(), branch, start=branch.index_of(note.id))
    assert str(refused.value) == "the round at #2 has no original result for calls ['toolu_b']"


# recovery _unit_of_original mutmut_24: a result whose call is not in the record is refused as corrupted.
def test_a_result_whose_call_is_not_in_the_record_is_refused() -> None:
    c = Conversation()
    c.task("Read.")
    stray = ToolResult("toolu_z", "read_file", "{}", "z")
    c.add(stray, in_view=False)
    c.add(Note("folded", (stray.id,), 2, "tool_io"))
    branch = c.branch()
    with pytest.raises(RecoveryCorrupted) as refused:
        plan_restore(branch.view(), branch, start=2)
    assert str(refused.value) == "result #2 answers call 'toolu_z', whose call is not in the record"


# recovery _unit_of_original mutmut_25, _insert mutmut_6: a folded instruction comes back alone, in its place.
def test_a_folded_instruction_comes_back_alone() -> None:
    c = Conversation()
    c.task("First.")
    old = c.task("An older request.")
    c.view.remove(old.id)
    c.add(Note("folded", (old.id,), 2, "tool_io"))
    c.task("The current request.")
    branch = c.branch()
    plan = plan_restore(branch.view(), branch, start=2)
    assert plan.restored == (old.id,)
    assert plan.view_ids == (c.view[0], old.id, c.view[2])


# recovery _unit_of_original mutmut_9: a record with no system message: a response at index one is found.
def test_a_round_at_the_start_of_a_record_without_a_system_message() -> None:
    c = Conversation(system=None)
    c.task("Read.")
    response, (result,) = c.round([read("a.md", 300)])
    branch = c.branch()
    note = build_note("tool_io", units_of(branch.view(), branch)[1:], branch)
    c.add(note, in_view=False)
    c.view = [c.view[0], note.id]
    branch = c.branch()
    plan = plan_restore(branch.view(), branch, start=branch.index_of(result.id))
    assert plan.restored == (response.id, result.id)


# recovery plan_restore mutmut_84: a corrupted member of a restored round is refused, naming its index.
def test_a_corrupted_response_of_a_restored_round_is_refused_naming_it() -> None:
    c = Conversation()
    c.task("Read.")
    call = ToolCall.create("toolu_c", "read_file", {"path": "a"})
    response = AssistantResponse((call,))
    object.__setattr__(response, "sha256", "0" * 64)  # the stored digest no longer matches the content
    result = ToolResult.for_call(call, "text")
    c.add(response, in_view=False)
    c.add(result, in_view=False)
    c.add(Note("folded", (result.id,), 3, "tool_io"))
    branch = c.branch()
    with pytest.raises(RecoveryCorrupted) as refused:
        plan_restore(branch.view(), branch, start=3)
    assert str(refused.value).startswith(f"record message #2 (id {response.id}, assistant) fails its SHA-256 check")


# recovery read_result mutmut_37, _39, _47: under a result bound the answer fills the bound exactly when its header
# is as wide as the widest one; a bound smaller than the header still reads one character.
def test_read_result_fills_the_bound_and_reads_at_least_one_character() -> None:
    c = Conversation()
    c.task("t")
    _, (result,) = c.round([read("big.md", 40_000)])
    branch = c.branch()
    index = branch.index_of(result.id)
    full = read_result(branch, index, offset=30_000, limit=990, bound=1000)
    assert len(full.text) == 1000 and full.next_offset == 30_000 + full.limit
    tiny = read_result(branch, index, offset=0, bound=60)
    assert tiny.limit == 1 and tiny.next_offset == 1


# -- the measurer -----------------------------------------------------------------------------------------------


# measurer ViewMeasurer.compile mutmut_5, _10, messages_estimate mutmut_5, _10, block_tokens mutmut_3, _5: a
# measurer under a result bound measures results as the request carries them (cut to the bound), in a whole view,
# in messages measured alone and block by block.
def test_a_measurer_under_a_result_bound_measures_results_cut_to_it() -> None:
    c = Conversation()
    c.task("Read.")
    _, (result,) = c.round([read("big.md", 30_000)])
    branch = c.branch()
    view = branch.view()
    bounded = measurer_for(branch, counter=COUNTER, bound=2000)
    free = measurer_for(branch, counter=COUNTER)
    assert "read_result" in bounded.compile(view).payload_text()
    assert "read_result" not in free.compile(view).payload_text()
    assert bounded.estimate(view) < free.estimate(view) - 5000
    assert bounded.messages_estimate(view) < free.messages_estimate(view) - 5000
    assert bounded.block_tokens(result)[1] < 2300 < 30_000 < free.block_tokens(result)[1]


# -- projection -------------------------------------------------------------------------------------------------


def _text_body(length: int) -> tuple[ToolResult, Body, int]:
    original = ToolResult("toolu_1", "read_file", "{}", synthetic_text("k.md", 6000)[:length])
    shape = result_shape(original)
    return original, shape.bodies[0], len(shape.recovery)


# projection bound_retained mutmut_33, _34, _39, _40, _42, _49.._51, _54.._58: k_N is the greatest retained count
# whose cut body fits the bound (found here by trying every count from the top; the size is not monotonic in k,
# as the marker's offsets change width).
@pytest.mark.parametrize(
    ("length", "bound"),
    # The last three: the search's first estimate overshoots (it steps down), and undershoots (it steps up).
    [
        (1100, 1000),
        (1999, 1000),
        (2500, 1000),
        (5000, 1000),
        (3000, 2999),
        (2100, 1100),
        (1100, 335),
        (1500, 335),
        (2330, 1534),
    ],
)
def test_k_n_is_the_greatest_count_whose_cut_body_fits_the_bound(length: int, bound: int) -> None:
    _, body, total = _text_body(length)

    def size(k: int) -> int:  # the cut body's length at k, marker included (the one the bound's search measures)
        return len(_cut_text(body, k, index=7, total=total, bound=bound))

    k = bound_retained(body, bound, index=7, total=total)
    assert k == next(n for n in range(length - 1, 1, -1) if size(n) <= bound)
    assert project_body(body, index=7, total=total, allowance=None, bound=bound).kept == k


# projection bound_retained mutmut_10, _22, _23: a million-character result is cut under a small bound and under a
# large one at once: the search for k_N starts near it (a search that walked the body would not finish).
@pytest.mark.parametrize("bound", [2000, 500_000])
def test_a_million_character_result_is_cut_under_any_bound(bound: int) -> None:
    original = ToolResult("toolu_1", "read_file", "{}", "line of text\n" * 80_000)
    projection = project(original, index=3, allowance=None, bound=bound)
    assert len(projection.output) <= bound and bound - 250 < projection.kept[0] < bound


# projection bound_retained mutmut_43, _44, _46, _47, project_body mutmut_34: a bound that fits one head and one tail
# character beside the marker keeps two; one character less is refused, saying why; so is an allowance under two.
def test_the_smallest_bound_keeps_two_characters_and_below_it_the_cut_is_refused() -> None:
    _, body, total = _text_body(1500)
    smallest = next(b for b in range(100, 400) if len(_cut_text(body, 2, index=7, total=total, bound=b)) <= b)
    assert bound_retained(body, smallest, index=7, total=total) == 2
    with pytest.raises(ProjectionError) as refused:
        bound_retained(body, smallest - 1, index=7, total=total)
    assert str(refused.value) == (
        f"result #7: a body of 1500 characters cannot be cut to fit tool_result_max_chars={smallest - 1} "
        "with its head, tail and recovery marker"
    )
    with pytest.raises(ProjectionError) as too_small:
        project_body(body, index=7, total=total, allowance=1, bound=None)
    assert str(too_small.value) == "result #7: an allowance of 1 keeps no head and tail of its body"


# projection project mutmut_43, _44, _50: a JSON result cut under the bound says it was cut and what it kept.
def test_a_json_result_cut_under_the_bound_reports_the_cut() -> None:
    original = ToolResult("toolu_1", "query", "{}", json.dumps(["a" * 3000]), output_format="json")
    projection = project(original, index=3, allowance=None, bound=1000)
    assert projection.cut is True
    assert len(projection.kept) == 1 and 2 <= projection.kept[0] < 1000
    assert len(json.loads(projection.output)) <= 1000
    # project mutmut_23: one that needs no cut says so.
    small = ToolResult("toolu_2", "query", "{}", json.dumps(["a" * 30]), output_format="json")
    assert project(small, index=4, allowance=None, bound=1000).cut is False
    # project mutmut_64, _69: so does a mapping result with a field cut.
    mapping = ToolResult("toolu_4", "query", "{}", json.dumps({"content": "c" * 3000}), output_format="json")
    assert project(mapping, index=5, allowance=None, bound=1000).cut is True


# projection clipped_copy mutmut_12: a result with nothing a clip may cut (only protected fields) is copied whole,
# its clip info recording the allowance's head and tail.
def test_a_copy_of_a_result_with_only_protected_fields_keeps_it_whole() -> None:
    output = json.dumps({"success": False, "error": "e" * 3000})
    original = ToolResult("toolu_3", "query", "{}", output, output_format="json")
    copy = clipped_copy(original, index=5, allowance=1500, bound=None)
    assert copy.output == output and copy.clipped_from == original.id
    assert copy.clip is not None and (copy.clip.head, copy.clip.tail) == (1125, 375)


# projection BoundProjection.memo_key mutmut_3, _6: the same original message at different record indexes (two
# branches) renders with each branch's index in its clip marker.
def test_one_original_renders_with_each_records_own_index() -> None:
    call = ToolCall.create("toolu_m", "read_file", {"path": "m.md"})
    response = AssistantResponse((call,))
    original = ToolResult.for_call(call, synthetic_text("m.md", 5000))
    markers = []
    for extra in (0, 2):
        c = Conversation()
        c.task("Read.")
        for i in range(extra):
            c.task(f"Filler {i}.")
        c.add(response)
        c.add(original)
        branch = c.branch()
        text = measurer_for(branch, counter=COUNTER, bound=1500).compile(branch.view()).payload_text()
        (marker,) = parse_clip_marker(text.replace('\\"', '"'))
        markers.append(marker.index)
    assert markers == [3, 5]


# -- plan_run and units -----------------------------------------------------------------------------------------


# plan_run before_newest_note mutmut_15: with caching, the round right after the newest note is the first one the
# ordinary stages may take.
def test_with_caching_the_round_right_after_the_newest_note_is_foldable() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([read("first.md", 300)])
    c.add(Note("[earlier note] " + "listing line\n" * 5, (), 3, "tool_io"))
    rounds = [c.round([read(f"r/{i}.md", 3000)]) for i in range(8)]
    c.deliver()
    c.round([read("newest.md", 1500)])
    plan, _ = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), caching=True))
    response, (result,) = rounds[0]
    assert plan.stages[0] == "tool_io"
    assert {response.id, result.id} <= set(plan.folded_ids)


# plan_run attempt mutmut_48: marks whose note would cost more than the round they fold roll back, and stay pending.
def test_marks_that_roll_back_stay_pending() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([("stat", {"path": "first"}, "ok")])
    tiny = c.round([("stat", {"path": "tiny"}, "ok")])
    for i in range(6):
        c.round([read(f"d/{i}.md", 3000)])
    c.deliver()
    branch = c.branch()
    mark = FoldMark(branch.index_of(tiny[0].id), branch.index_of(tiny[1][0].id))
    _, _, plan, _ = plan_for(c, FoldSettings(ceiling=1_000_000), marks=(mark,), mode="light")
    assert [(p.stage, p.outcome) for p in plan.passes][:1] == [("marks", "rolled_back")]
    assert plan.held_marks == (mark,) and plan.agent_marks == 0


# plan_run never mutmut_4: a fold over an empty view plans nothing.
def test_a_fold_over_an_empty_view_plans_nothing() -> None:
    c = Conversation()
    plan, needs = _plan(c, FoldSettings(ceiling=1000))
    assert needs == [] and plan.passes == () and plan.view_ids == ()


# plan_run never mutmut_4: over the target with nothing in the view (a system prompt alone), every stage finds
# nothing to take.
def test_a_fold_of_a_system_prompt_alone_over_the_target_takes_nothing() -> None:
    alone = Conversation(system=SystemMessage("You read files. " + synthetic_text("system", 20_000)))
    plan, needs = _plan(alone, FoldSettings(ceiling=3000))
    assert needs == [] and plan.passes == () and plan.view_ids == () and not plan.target_reached


# plan_run not_now mutmut_11: a just-recovered round is not folded again, complete as it is.
def test_a_just_recovered_round_is_not_folded_again() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([("stat", {"path": "first"}, "ok")])
    recovered = c.round([read("back.md", 3000)])
    for i in range(6):
        c.round([read(f"d/{i}.md", 3000)])
    c.deliver()
    c.round([read("newest.md", 3000)])
    ids = frozenset({recovered[0].id, recovered[1][0].id})
    plan, _ = _plan(c, FoldSettings(ceiling=int(_estimate(c) / 0.85), target=0.5), recovered=ids)
    assert plan.landed and not ids & set(plan.folded_ids)


# units is_complete_round mutmut_2, _3: a round missing a result in the view is incomplete; other units are complete.
def test_a_round_missing_a_result_is_incomplete() -> None:
    c = Conversation()
    c.task("Read.")
    _, results = c.round([read("a.md", 100), read("b.md", 100)])
    branch = c.branch()
    task_unit, whole = units_of(branch.view(), branch)
    assert is_complete_round(whole) and is_complete_round(task_unit)
    c.view.remove(results[1].id)
    branch = c.branch()
    (_, partial) = units_of(branch.view(), branch)
    assert not is_complete_round(partial)


# measurer ViewMeasurer.measure mutmut_4, messages_estimate mutmut_14, _18: a measurer counts images by its own
# wire's rule (chat completions count an image differently from the Messages API), in a view and in messages alone.
def test_a_measurer_counts_images_by_its_wires_rule() -> None:
    image = ImagePart("image/png", "AAAA", "ab" * 32, 2000, 1000, 100_000)
    c = Conversation()
    c.add(Instruction("Look.", images=(image,)))
    branch = c.branch()
    view = branch.view()
    messages = measurer_for(branch, counter=COUNTER)
    chat = attrs.evolve(messages, images=CHAT_IMAGES)
    assert chat.estimate(view) == measure_request(chat.compile(view), COUNTER, chat.scale, CHAT_IMAGES).estimate
    assert messages.estimate(view) == measure_request(messages.compile(view), COUNTER, 1.0, MESSAGES_IMAGES).estimate
    assert chat.estimate(view) < messages.estimate(view)
    assert chat.messages_estimate(view) < messages.messages_estimate(view)
    assert chat.messages_estimate(view) == chat.estimate(view) - (
        messages.estimate(view) - messages.messages_estimate(view)
    )


# -- cost -------------------------------------------------------------------------------------------------------


def _by_choose(caching: bool, prices: CostPrices, margin: float) -> CostDecision:
    """decide_fold's decision spelled out: the target candidates, choose, at the prices in force."""
    candidates = [target_candidate(200_000, t, 5_000, SUMMARY_OUTPUT_TOKENS) for t in COST_TARGETS]
    if not caching:
        candidates = [attrs.evolve(c, rewrite_tokens=0) for c in candidates]
    state = CostState(tokens=170_000, growth=4000.0, ceiling=200_000, margin=margin)
    return choose(candidates, state, prices if caching else attrs.evolve(UNCACHED, output=prices.output))


# cost decide_fold mutmut_6, _18, _38: decide_fold is choose over the target candidates: with caching at the given
# prices, everything after the kept prefix rewritten; without, nothing rewritten and every carried token at the
# fresh price, the summary's output still at the given output price; at the given margin.
@pytest.mark.parametrize("caching", [True, False])
def test_decide_fold_is_choose_over_the_target_candidates(caching: bool) -> None:
    prices = CostPrices(output=40.0)
    margin = 0.2
    decision = decide_fold(
        tokens=170_000,
        growth=4000.0,
        ceiling=200_000,
        margin=margin,
        kept_prefix_tokens=5_000,
        prices=prices,
        caching=caching,
    )
    assert decision == _by_choose(caching, prices, margin)
    assert decision != _by_choose(caching, CostPrices(), margin)  # the output price counts, cached or not
    assert decision != _by_choose(caching, prices, 0.045)  # so does the margin
    assert decision != _by_choose(not caching, prices, margin)


# cost per_request mutmut_5: a line one request's growth above the candidate leaves room for that request even when
# the floating-point sum rounds the span a hair below the growth (the tolerance scales with the growth).
def test_a_line_one_growth_above_the_candidate_leaves_room_despite_rounding() -> None:
    growth = 10_000.3
    candidate = Candidate("deep", tokens_after=1_000_000_007, rewrite_tokens=0)
    line = candidate.tokens_after + growth
    assert line - candidate.tokens_after < growth  # the sum rounded the span down
    state = CostState(tokens=1_000_000_000, growth=growth, ceiling=2_000_000_000)
    assert per_request(candidate, line, state, CostPrices()) is not None
    assert per_request(candidate, line - 1.0, state, CostPrices()) is None
