"""Fold rules a fourth mutation run found unpinned (scripts/mutation): the cost model's recall-priced
line, its boundaries and errors, and the measurer's splice; each test names the mutants it was written
against (see ``test_fold_mutants_3.py``).
"""

from __future__ import annotations

import attrs
import pytest

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, measurer_for
from runtime.fold.cost import (
    LINE_POINTS,
    Candidate,
    CostDecision,
    CostPrices,
    CostState,
    RecallProfile,
    best_line,
    choose,
    commit_cost,
    decide_fold,
    per_request,
    predicted_cycle,
    target_candidate,
)
from runtime.fold.notes import build_note
from runtime.fold.plan_run import rebuild_view
from runtime.fold.units import units_of
from runtime.measuring.image_count import measure_request
from runtime.measuring.measure import TokenCounter
from runtime.values.image_rules import CHAT_IMAGES, MESSAGES_IMAGES
from runtime.values.messages import ImagePart, Instruction, Message

PRICES = CostPrices(read=0.1, write=1.25, output=5.0)
STATE = CostState(tokens=100_000, growth=2_000.0, ceiling=200_000, margin=0.045)
CANDIDATE = Candidate("c", tokens_after=40_000, rewrite_tokens=30_000, summary_output_tokens=300, tail_tokens=30_000)
# Recalls from 35k to 90k tokens back: a longer cycle folds more of them away, so the line moves off b*.
RECALLS = RecallProfile(20, (35_000.0, 50_000.0, 70_000.0, 90_000.0), page_tokens=2_000.0)


def _grid(candidate: Candidate, state: CostState) -> list[float]:
    """The lines the docstring names: LINE_POINTS evenly spaced from one round after the fold to the hard limit."""
    low, high = candidate.tokens_after + state.growth, state.hard
    return [low + (high - low) * i / (LINE_POINTS - 1) for i in range(LINE_POINTS)]


# -- cost: the line searched when recalls are priced --------------------------------------------------------------


# cost best_line mutmut_23, _25, _28, _29, _32, _36, _41, _46, _47, _48: with recalls seen, the line is the least J
# over the evenly spaced lines from one round after the fold to the hard limit (here one of them, not b*).
def test_with_recalls_the_line_is_the_cheapest_of_the_evenly_spaced_lines() -> None:
    closed = best_line(CANDIDATE, STATE, PRICES)
    line = best_line(CANDIDATE, STATE, PRICES, RECALLS)
    grid = _grid(CANDIDATE, STATE)
    assert line != pytest.approx(closed, abs=1.0)
    assert line == pytest.approx(grid[9])  # 83,343.75: a longer cycle than b* (79,497) folds fewer recalls away
    cost = per_request(CANDIDATE, line, STATE, PRICES, RECALLS)
    assert cost is not None
    for other in [closed, *grid]:
        other_cost = per_request(CANDIDATE, other, STATE, PRICES, RECALLS)
        assert other_cost is not None and cost <= other_cost
    # Without distances the profile prices nothing: the closed form.
    assert best_line(CANDIDATE, STATE, PRICES, RecallProfile(20)) == closed


# cost best_line mutmut_49: a candidate landing within one round of the hard limit leaves no line to search:
# the line is the hard limit (the closed form), not an error.
def test_with_recalls_a_candidate_with_no_room_gets_the_hard_limit() -> None:
    tight = Candidate("tight", tokens_after=188_000, rewrite_tokens=10_000, tail_tokens=10_000)
    assert best_line(tight, STATE, PRICES, RECALLS) == STATE.hard == best_line(tight, STATE, PRICES)
    assert per_request(tight, STATE.hard, STATE, PRICES, RECALLS) is None


# cost choose mutmut_7, _11: choose searches each candidate's line with its recalls, so the decision's line is
# the recall-priced one and its figures are that line's.
def test_choose_decides_on_the_recall_priced_line() -> None:
    decision = choose([CANDIDATE], STATE, PRICES, RECALLS)
    line = best_line(CANDIDATE, STATE, PRICES, RECALLS)
    assert decision.line == pytest.approx(line)
    assert decision.line != pytest.approx(best_line(CANDIDATE, STATE, PRICES), abs=1.0)
    assert decision.predicted_per_request == pytest.approx(per_request(CANDIDATE, line, STATE, PRICES, RECALLS))
    assert decision.commit  # 100,000 tokens: past the line either way


# cost RecallProfile.rate mutmut_2: a one-token span still counts each recall by its distance past the tail (a
# recall whose original is in the kept tail never misses); only no span at all counts every recall as missed.
def test_a_span_of_one_token_counts_recalls_by_their_distance() -> None:
    profile = RecallProfile(4, (10.0, 500.0))
    assert profile.rate(100.0, 1.0) == pytest.approx(1 / 4)
    assert profile.rate(100.0, 0.5) == pytest.approx(1 / 4)
    assert profile.rate(100.0, 0.0) == pytest.approx(2 / 4)


# cost RecallProfile.__attrs_post_init__ mutmut_11, _12, _18, _19, _25, _26: a bad profile is refused naming
# the field and the value.
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"distances": (5.0, -1.0)}, "RecallProfile.distances: -1.0 is not a non-negative finite number"),
        ({"page_tokens": float("nan")}, "RecallProfile.page_tokens: nan is not a non-negative finite number"),
        ({"call_tokens": -2}, "RecallProfile.call_tokens: -2 is not a non-negative finite number"),
    ],
)
def test_a_bad_recall_profile_is_refused_naming_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        RecallProfile(3, **kwargs)  # type: ignore[arg-type]
    assert str(raised.value) == message


# -- cost: the target candidate --------------------------------------------------------------------------------


# cost target_candidate mutmut_1, _12, _55: with no floor a candidate lands at the target's share exactly (0 on a
# ceiling too small for one token); one landing at its kept prefix keeps no tail; a negative floor is refused
# naming the argument.
def test_a_target_candidate_without_a_floor_lands_at_its_share_and_one_at_its_prefix_keeps_no_tail() -> None:
    tiny = target_candidate(3, 0.3, 0, 0)
    assert (tiny.tokens_after, tiny.rewrite_tokens, tiny.tail) == (0, 0, 0)
    at_prefix = target_candidate(100_000, 0.1, 30_000, 300, floor_tokens=30_000)
    assert (at_prefix.tokens_after, at_prefix.rewrite_tokens, at_prefix.tail_tokens) == (30_000, 0, 0)
    with pytest.raises(ValueError) as raised:
        target_candidate(100_000, 0.1, 0, 0, floor_tokens=-1)
    assert str(raised.value) == "floor_tokens: -1 is not a non-negative finite number"


# -- cost: the ceiling's need -----------------------------------------------------------------------------------


def _decide(tokens: int, elapsed: int | None) -> CostDecision:
    # hard = 200,000 x 0.75 - 1,000 = 149,000 exactly.
    return decide_fold(
        tokens=tokens,
        growth=1_000.0,
        ceiling=200_000,
        margin=0.25,
        kept_prefix_tokens=5_000,
        prices=PRICES,
        caching=True,
        elapsed_requests=elapsed,
    )


# cost decide_fold mutmut_52, _54: a fold is committed when the ceiling is expected to be reached exactly at the
# end of the estimate (tokens + growth x elapsed = hard); one request short, it waits, and the recorded decision
# says commit: false (not null).
def test_the_ceiling_reached_exactly_within_the_estimate_commits_and_short_of_it_waits() -> None:
    assert _decide(139_000, None).commit is True  # past the cost line
    at = _decide(139_000, 10)
    assert at.commit is True and at.reason.startswith("past the cost line")
    short = _decide(139_000, 9)
    assert short.commit is False
    assert short.to_json()["commit"] is False
    assert short.reason.startswith("the ceiling is not expected to be needed: 139000 tokens growing 1000")
    assert "reach 148000 in another 9 requests, under the hard limit 149000" in short.reason


# -- cost: the predicted cycle of a decision without a per-request figure ----------------------------------------


# cost predicted_cycle mutmut_11 .. _23: a decision that carries a choice, a line and a horizon but no per-request
# figure (one built by hand) is predicted as its commit, then each request's carrying at the read price and its
# new tokens at the write price over the horizon.
def test_a_cycle_without_a_per_request_figure_is_the_commit_then_carrying_and_new_tokens() -> None:
    choice = Candidate("c", tokens_after=30_000, rewrite_tokens=20_000, summary_output_tokens=300)
    decision = CostDecision(True, "by hand", choice=choice, line=70_000.0, horizon_requests=8.0)
    expected = (1.25 * 20_000 + 5.0 * 300) + 8.0 * (0.1 * (30_000 + 70_000) / 2 + 1.25 * 4_000)
    assert commit_cost(choice, PRICES) == 26_500
    assert predicted_cycle(decision, 4_000.0, PRICES) == pytest.approx(expected)  # 26,500 + 8 x 10,000 = 106,500
    assert expected == pytest.approx(106_500)


# -- the measurer ------------------------------------------------------------------------------------------------


# measurer ViewMeasurer.measure mutmut_1 .. _9: measure is the whole view compiled and measured with the
# measurer's counter, scale and image rule; its estimate is the measurer's own.
def test_measure_is_the_compiled_view_at_the_measurers_scale_and_image_rule() -> None:
    image = ImagePart("image/png", "AAAA", "ab" * 32, 2000, 1000, 100_000)
    c = Conversation()
    c.add(Instruction("Look at this and read the notes.", images=(image,)))
    branch = c.branch()
    view = branch.view()
    counter = TokenCounter()
    chat = attrs.evolve(measurer_for(branch, counter=counter, scale=1.37), images=CHAT_IMAGES)
    measured = chat.measure(view)
    assert measured == measure_request(chat.compile(view), counter, 1.37, CHAT_IMAGES)
    assert measured.estimate != measure_request(chat.compile(view), counter, 1.37, MESSAGES_IMAGES).estimate
    assert measured.estimate != measure_request(chat.compile(view), counter, 1.0, CHAT_IMAGES).estimate
    assert measured.estimate == attrs.evolve(chat).estimate(view)


def _rounds(count: int, chars: int) -> Conversation:
    c = Conversation()
    c.task("Read the files and report.")
    for i in range(count):
        path = f"docs/f{i}.md"
        c.round([("read_file", {"path": path}, synthetic_text(path, chars))], say=f"Reading {i}.")
    c.deliver()
    return c


def _noted(view: list[Message], branch: object, rounds: list[int]) -> list[Message]:
    """``view`` with the given rounds (by their order among the rounds) folded into one note."""
    units = units_of(view, branch)  # type: ignore[arg-type]
    every = [i for i, unit in enumerate(units) if unit.kind == "round"]
    chosen = [every[r] for r in rounds]
    note = build_note("tool_io", [units[i] for i in chosen], branch)  # type: ignore[arg-type]
    return rebuild_view(view, units, set(chosen), {chosen[0]: note})


# measurer ViewMeasurer.estimate mutmut_5, _13: after one view counted whole, the candidates the fold's search
# measures are counted from it (the window that differs), not whole: the same number, for a handful of the
# counter's piece look-ups where a whole count makes one per piece.
def test_candidates_after_a_whole_count_are_counted_from_it() -> None:
    branch = _rounds(10, 500).branch()
    view = list(branch.view())
    counter = TokenCounter()
    measurer = measurer_for(branch, counter=counter, scale=1.37)
    assert measurer.estimate(view) == measurer_for(branch, scale=1.37).measure(view).estimate
    for count in (1, 2, 3):
        candidate = _noted(view, branch, list(range(count)))
        before = counter.stats()
        estimate = measurer.estimate(candidate)
        after = counter.stats()
        assert estimate == measurer_for(branch, scale=1.37).measure(candidate).estimate
        if count > 1:  # the first candidate builds the base from the view counted whole
            whole_lookups = len(measurer.compile(candidate).pieces().flat())
            lookups = (after.hits - before.hits) + (after.misses - before.misses)
            assert lookups * 3 < whole_lookups


# measurer ViewMeasurer.estimate mutmut_16: a spliced candidate's window is laid out under the measurer's result
# bound (a result in the window is counted cut to the bound, as the request carries it).
def test_a_spliced_window_counts_its_results_under_the_result_bound() -> None:
    branch = _rounds(6, 20_000).branch()
    view = list(branch.view())
    bounded = measurer_for(branch, bound=2000)
    free = measurer_for(branch)
    bounded.estimate(view)
    bounded.estimate(_noted(view, branch, [2]))  # builds the base
    candidate = _noted(view, branch, [3])  # the window starts at round 2, whose result it lays out
    estimate = bounded.estimate(candidate)
    assert estimate == measurer_for(branch, bound=2000).measure(candidate).estimate
    assert estimate < free.measure(candidate).estimate - 10_000
