"""The cost model prices recalls, lands no candidate below what a fold keeps, and folds only for the ceiling.

Issue 19's second pass: reading folded material back (``read_result``) is an extra request and a page;
a candidate assumed to land below the kept prefix looked free
and made the model commit every request (``fits``; ``staged-curl`` at token factor 1.37); a fold the
ceiling is not expected to need is not committed.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fold_by_cost import Counted  # the measurer the growth meter's tests count with

from actors.branch import Branch
from actors.fold_recalls import recall_profile
from runtime.fold.context_tool import CONTEXT_TOOL_NAME
from runtime.fold.cost import (
    RECALL_CALL_TOKENS,
    CostPrices,
    CostState,
    RecallProfile,
    best_line,
    commit_cost,
    decide_fold,
    per_request,
    predicted_cycle,
    target_candidate,
)
from runtime.values.messages import AssistantResponse, Instruction, Message, TextPart, ToolCall, ToolResult

PRICES = CostPrices(read=0.1, write=1.25, output=5.0)


# -- the recall profile, priced -------------------------------------------------------------------


def test_a_recall_misses_the_view_for_the_share_of_the_cycle_its_distance_passes_the_kept_tail() -> None:
    profile = RecallProfile(10, (1_000.0, 5_000.0, 9_000.0), page_tokens=800.0)
    # tail 2,000, span 4,000: the first never misses, the second for 3/4 of the cycle, the third always.
    assert profile.rate(2_000, 4_000) == pytest.approx((0 + 0.75 + 1) / 10)
    assert profile.rate(10_000, 4_000) == 0
    assert profile.rate(0, 0) == pytest.approx(3 / 10)  # no span: every recall misses
    assert RecallProfile(4).rate(0, 1_000) == 0


def test_a_recall_costs_an_extra_request_its_call_and_its_page() -> None:
    profile = RecallProfile(10, (1.0,), page_tokens=800.0, call_tokens=60.0)
    assert profile.cost(20_000, PRICES) == pytest.approx(0.1 * 20_000 + 5.0 * 60 + 1.25 * 800)
    assert RecallProfile(1).call_tokens == RECALL_CALL_TOKENS


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"requests": 0}, "requests"),
        ({"requests": True}, "requests"),
        ({"requests": 3, "distances": (-1.0,)}, "distances"),
        ({"requests": 3, "page_tokens": float("nan")}, "page_tokens"),
        ({"requests": 3, "call_tokens": -5.0}, "call_tokens"),
    ],
)
def test_a_recall_profile_refuses_what_is_not_a_count_or_a_size(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        RecallProfile(**kwargs)  # type: ignore[arg-type]


def test_the_per_request_cost_adds_the_expected_recalls_at_their_price() -> None:
    candidate = target_candidate(50_000, 0.1, 1_000, 300)
    state = CostState(tokens=30_000, growth=4_000, ceiling=50_000)
    profile = RecallProfile(20, (4_500.0,) * 15, page_tokens=4_000.0)
    line = 20_000.0
    blind = per_request(candidate, line, state, PRICES)
    priced = per_request(candidate, line, state, PRICES, profile)
    assert blind is not None and priced is not None
    span, carried = line - candidate.tokens_after, (candidate.tokens_after + line) / 2
    expected = profile.rate(candidate.tail, span) * profile.cost(carried, PRICES)
    assert expected > 0
    assert priced == pytest.approx(blind + expected)


@given(
    after=st.integers(1_000, 20_000),
    growth=st.floats(500, 6_000),
    distance=st.floats(0, 60_000),
    recalls=st.integers(1, 30),
)
@settings(max_examples=200)
def test_the_line_with_recalls_is_never_worse_than_the_recall_blind_line(
    after: int, growth: float, distance: float, recalls: int
) -> None:
    candidate = target_candidate(100_000, 0.3, after // 2, 300, floor_tokens=after)
    state = CostState(tokens=after, growth=growth, ceiling=100_000)
    profile = RecallProfile(40, (distance,) * recalls, page_tokens=3_000.0)
    line = best_line(candidate, state, PRICES, profile)
    blind = best_line(candidate, state, PRICES)
    assert candidate.tokens_after + growth - 1e-6 <= line <= state.hard + 1e-6
    chosen, other = (
        per_request(candidate, line, state, PRICES, profile),
        per_request(candidate, blind, state, PRICES, profile),
    )
    if other is not None:
        assert chosen is not None and chosen <= other + 1e-9


def test_frequent_recalls_lengthen_the_cycle_or_keep_more_and_cost_less_than_ignoring_them() -> None:
    # Every request reads back something five rounds old: the deepest target keeps 8,000 tokens of
    # tail, so a short cycle would send each of them to read_result.
    common = {"tokens": 45_000, "growth": 4_000.0, "ceiling": 100_000, "margin": 0.045}
    blind = decide_fold(**common, kept_prefix_tokens=2_000, prices=PRICES, caching=True)  # type: ignore[arg-type]
    profile = RecallProfile(10, (20_000.0,) * 10, page_tokens=4_000.0)
    priced = decide_fold(**common, kept_prefix_tokens=2_000, prices=PRICES, caching=True, recalls=profile)  # type: ignore[arg-type]
    assert blind.choice is not None and priced.choice is not None
    assert blind.line is not None and priced.line is not None and priced.predicted_per_request is not None
    assert blind.commit and not priced.commit  # the recall-blind line is passed, the priced one is not
    assert priced.line - priced.choice.tokens_after > blind.line - blind.choice.tokens_after
    state = CostState(tokens=45_000, growth=4_000.0, ceiling=100_000)
    ignoring = per_request(blind.choice, blind.line, state, PRICES, profile)
    assert ignoring is not None and priced.predicted_per_request < ignoring


def test_the_predicted_cycle_includes_the_expected_recalls() -> None:
    profile = RecallProfile(10, (20_000.0,) * 10, page_tokens=4_000.0)
    common = {"tokens": 70_000, "growth": 4_000.0, "ceiling": 100_000, "margin": 0.045, "kept_prefix_tokens": 2_000}
    priced = decide_fold(**common, prices=PRICES, caching=True, recalls=profile)  # type: ignore[arg-type]
    choice, line, horizon = priced.choice, priced.line, priced.horizon_requests
    assert choice is not None and line is not None and horizon is not None
    state = CostState(tokens=70_000, growth=4_000.0, ceiling=100_000)
    recalls = profile.rate(choice.tail, line - choice.tokens_after) * profile.cost(
        (choice.tokens_after + line) / 2, PRICES
    )
    assert recalls > 0
    blind = commit_cost(choice, PRICES) + horizon * (0.1 * (choice.tokens_after + line) / 2 + 1.25 * 4_000)
    assert predicted_cycle(priced, 4_000.0, PRICES) == pytest.approx(blind + horizon * recalls)
    assert per_request(choice, line, state, PRICES, profile) == pytest.approx(priced.predicted_per_request)


# -- no candidate below what a fold keeps ---------------------------------------------------------


def test_a_floor_above_the_target_is_where_the_candidate_lands() -> None:
    candidate = target_candidate(50_000, 0.1, 1_000, 300, floor_tokens=7_000)
    assert (candidate.tokens_after, candidate.rewrite_tokens, candidate.tail) == (7_000, 6_000, 6_000)
    assert target_candidate(50_000, 0.3, 1_000, 300, floor_tokens=7_000).tokens_after == 15_000
    with pytest.raises(ValueError, match="floor_tokens"):
        target_candidate(50_000, 0.1, 1_000, 300, floor_tokens=-1)


def test_a_kept_prefix_above_the_target_is_not_a_free_commit() -> None:
    # fits: 22,500 tokens of protected first round under a 200k ceiling, whose 0.1 target is 20,000.
    # A candidate at 20,000 would rewrite nothing; the commit line must sit above the prefix itself.
    decision = decide_fold(
        tokens=27_000,
        growth=2_200,
        ceiling=200_000,
        margin=0.045,
        kept_prefix_tokens=22_500,
        prices=PRICES,
        caching=True,
    )
    assert decision.choice is not None and decision.choice.tokens_after >= 22_500
    assert decision.line is not None and decision.line > 22_500 + 2_200


# -- folding only for the ceiling -----------------------------------------------------------------


def test_a_fold_the_ceiling_is_not_expected_to_need_waits() -> None:
    common = {
        "tokens": 100_000,
        "growth": 2_000.0,
        "ceiling": 200_000,
        "margin": 0.045,
        "kept_prefix_tokens": 20_000,
        "prices": PRICES,
        "caching": True,
    }
    ungated = decide_fold(**common)  # type: ignore[arg-type]
    assert ungated.commit  # past its cost line
    # 100,000 + 2,000 x 30 = 160,000 < hard 189,000: the work is not expected to reach the ceiling.
    early = decide_fold(**common, elapsed_requests=30)  # type: ignore[arg-type]
    assert not early.commit and "not expected" in early.reason
    assert early.choice == ungated.choice and early.line == ungated.line
    # 100,000 + 2,000 x 45 = 190,000 >= 189,000: expected, so the cost line holds.
    assert decide_fold(**common, elapsed_requests=45).commit  # type: ignore[arg-type]


def test_past_the_hard_limit_a_fold_runs_however_short_the_work_so_far() -> None:
    decision = decide_fold(
        tokens=190_000,
        growth=2_000,
        ceiling=200_000,
        margin=0.045,
        kept_prefix_tokens=20_000,
        prices=PRICES,
        caching=True,
        elapsed_requests=1,
    )
    assert decision.commit


# -- the profile from the branch's own record -----------------------------------------------------


def _read_result(index: int, page: str, *, action: str = "read_result") -> ToolResult:
    call = ToolCall.create(f"c{index}-{action}", CONTEXT_TOOL_NAME, {"action": action, "index": index})
    return ToolResult.for_call(call, page)


@pytest.mark.anyio
async def test_the_recall_profile_measures_each_read_result_from_its_original() -> None:
    branch = Branch.create(system=None)
    async with branch.turn() as turn:
        assert recall_profile(turn, Counted()) is None  # no response yet
        turn.append(Instruction("t" * 400))  # index 0: the original a recall reads back
        turn.append(AssistantResponse((TextPart("a" * 40),)))  # 10 tokens
        turn.append(Instruction("u" * 360))  # 90 tokens
        turn.append(AssistantResponse((TextPart("b" * 80),)))  # 20 tokens
        turn.deliver(m.id for m in branch.view())
        assert recall_profile(turn, Counted()) == RecallProfile(2)
        turn.append(_read_result(0, "p" * 1_200))  # 120 tokens between the original and the recall
        turn.append(_read_result(0, "q" * 400, action="status"))  # not a recall
        turn.append(AssistantResponse((TextPart("c" * 40),)))
        turn.deliver(m.id for m in branch.view())
        profile = recall_profile(turn, Counted())
    assert profile is not None
    assert profile.requests == 3
    assert profile.distances == (pytest.approx(2.0 * (10 + 90 + 20)),)
    assert profile.page_tokens == pytest.approx(2.0 * 300)


@pytest.mark.anyio
async def test_the_memo_counts_each_message_once_across_calls() -> None:
    counted: list[str] = []

    class Counting(Counted):
        def block_tokens(self, message: Message) -> tuple[int, int]:
            counted.append(message.id)
            return super().block_tokens(message)

    branch = Branch.create(system=None)
    memo: dict[str, int] = {}
    async with branch.turn() as turn:
        turn.append(Instruction("t" * 400))
        turn.append(AssistantResponse((TextPart("a" * 40),)))
        turn.append(_read_result(0, "p" * 1_200))
        turn.deliver(m.id for m in branch.view())
        first = recall_profile(turn, Counting(), memo)
        assert recall_profile(turn, Counting(), memo) == first
    assert first is not None and first.distances == (pytest.approx(2.0 * 10),)
    assert sorted(counted) == sorted(set(counted))  # nothing counted twice
