"""The cost model: when to commit and how deep, from prices (pure)."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from runtime.fold.cost import (
    COST_TARGETS,
    GROWTH_WINDOW,
    SUMMARY_OUTPUT_TOKENS,
    Candidate,
    CostPrices,
    CostState,
    GrowthMeter,
    best_line,
    choose,
    commit_cost,
    decide_fold,
    fixed_fraction_line,
    per_request,
    predicted_cycle,
    prices_for,
    prices_or_default,
    realised,
    target_candidate,
    usage_cost,
)
from runtime.models.pricing import PriceTier, PricingTable
from runtime.values.usage import Usage

PRICES = CostPrices()  # read 0.1, write 1.25, output 5


def test_prices_come_from_a_tier_and_an_unknown_price_is_named() -> None:
    tier = PricingTable.load_default().first_tier("claude-opus-5")
    assert tier is not None
    prices = prices_for(tier)
    assert prices == CostPrices(read=0.1, write=1.25, output=5.0)
    with pytest.raises(ValueError, match="no output price"):
        prices_for(PriceTier(max_prompt_tokens=None, input=1.0, cache_read=0.1, cache_write_5m=1.25))
    with pytest.raises(ValueError, match="no input price"):
        prices_for(PriceTier(max_prompt_tokens=None))


def test_the_line_is_the_square_root_rule_when_the_ceiling_is_far() -> None:
    state = CostState(tokens=50_000, growth=2_000, ceiling=1_000_000)
    candidate = Candidate("deep", tokens_after=60_000, rewrite_tokens=50_000)
    line = best_line(candidate, state, PRICES)
    assert line == pytest.approx(60_000 + math.sqrt(2 * 2_000 * 1.25 * 50_000 / 0.1))


def test_the_line_never_passes_the_hard_limit() -> None:
    state = CostState(tokens=10_000, growth=3_000, ceiling=20_000)
    candidate = Candidate("deep", tokens_after=8_000, rewrite_tokens=6_000)
    assert best_line(candidate, state, PRICES) == pytest.approx(state.hard) == pytest.approx(20_000 * 0.955 - 3_000)


def test_under_the_line_it_waits_and_past_the_hard_limit_it_commits() -> None:
    candidate = Candidate("deep", tokens_after=6_000, rewrite_tokens=4_000, summary_output_tokens=300)
    waiting = choose([candidate], CostState(tokens=9_000, growth=2_000, ceiling=20_000), PRICES)
    assert not waiting.commit and waiting.choice == candidate and "under the cost line" in waiting.reason
    due = choose([candidate], CostState(tokens=17_500, growth=2_000, ceiling=20_000), PRICES)
    assert due.commit and "hard limit" in due.reason
    assert due.predicted_commit_cost == pytest.approx(1.25 * 4_000 + 5 * 300)
    assert due.to_json()["choice"] == "deep"


def test_it_commits_past_the_cost_line_before_the_hard_limit() -> None:
    state = CostState(tokens=200_000, growth=1_000, ceiling=1_000_000)
    candidate = Candidate("deep", tokens_after=20_000, rewrite_tokens=10_000)
    decision = choose([candidate], state, PRICES)
    assert decision.commit and "past the cost line" in decision.reason
    assert decision.line is not None and decision.line < state.hard


def test_the_deeper_fold_wins_when_it_rewrites_no_more() -> None:
    state = CostState(tokens=17_000, growth=2_000, ceiling=20_000)
    shallow = Candidate("shallow", tokens_after=12_000, rewrite_tokens=8_000)
    deep = Candidate("deep", tokens_after=7_000, rewrite_tokens=5_000, summary_output_tokens=200)
    assert choose([shallow, deep], state, PRICES).choice == deep


def test_a_candidate_with_no_room_is_never_taken_while_another_has_room() -> None:
    state = CostState(tokens=17_500, growth=2_000, ceiling=20_000)
    useless = Candidate("useless", tokens_after=16_500, rewrite_tokens=0)
    real = Candidate("real", tokens_after=8_000, rewrite_tokens=7_000)
    assert choose([useless, real], state, PRICES).choice == real
    alone = choose([useless], state, PRICES)
    assert alone.commit and alone.choice is None and "no candidate leaves room" in alone.reason
    calm = choose([useless], CostState(tokens=5_000, growth=2_000, ceiling=20_000), PRICES)
    assert not calm.commit and calm.choice is None


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: CostPrices(read=0), "CostPrices.read"),
        (lambda: CostPrices(output=-1), "CostPrices.output"),
        (lambda: Candidate("x", tokens_after=10, rewrite_tokens=11), "rewrites 11 tokens"),
        (lambda: Candidate("x", tokens_after=-1, rewrite_tokens=0), "tokens_after"),
        (lambda: CostState(tokens=1, growth=0, ceiling=10), "growth"),
        (lambda: CostState(tokens=1, growth=1, ceiling=10, margin=1.0), "margin"),
        (lambda: CostState(tokens=1, growth=float("nan"), ceiling=10), "growth"),
        (lambda: realised(-1, 0, 0, PRICES), "read_tokens"),
        (lambda: fixed_fraction_line(100, 0), "fold_at"),
    ],
)
def test_bad_inputs_are_named(build: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()  # type: ignore[operator]


def test_realised_prices_usage_in_the_same_units() -> None:
    assert realised(1_000, 2_000, 100, PRICES) == pytest.approx(100 + 2_500 + 500)
    assert fixed_fraction_line(20_000, 0.8) == pytest.approx(16_000)


candidates = st.builds(
    lambda after, share, out: Candidate(
        "c", tokens_after=after, rewrite_tokens=int(after * share), summary_output_tokens=out
    ),
    st.integers(min_value=0, max_value=150_000),
    st.floats(min_value=0, max_value=1),
    st.integers(min_value=0, max_value=4_000),
)


@settings(max_examples=200, deadline=None)
@given(
    cands=st.lists(candidates, min_size=1, max_size=6),
    tokens=st.integers(min_value=0, max_value=200_000),
    growth=st.floats(min_value=1, max_value=20_000),
    ceiling=st.integers(min_value=1_000, max_value=200_000),
)
# A free commit's line is after + growth, which rounds a hair under growth when subtracted back.
@example(cands=[Candidate("c", 7, 0, 0)], tokens=0, growth=1.04, ceiling=1_000)
def test_the_choice_is_the_cheapest_candidate_with_room_and_never_runs_past_the_hard_limit(
    cands: list[Candidate], tokens: int, growth: float, ceiling: int
) -> None:
    state = CostState(tokens=tokens, growth=growth, ceiling=ceiling)
    decision = choose(cands, state, PRICES)
    if decision.choice is None:
        assert all(c.tokens_after + growth > state.hard for c in cands)
        assert decision.commit == (tokens > state.hard)
        return
    chosen = decision.choice
    assert chosen.tokens_after + growth <= state.hard + 1e-6
    assert decision.line is not None and chosen.tokens_after + growth <= decision.line + 1e-6
    assert decision.line <= state.hard + 1e-6
    cost = per_request(chosen, decision.line, state, PRICES)
    for other in cands:
        other_cost = per_request(other, best_line(other, state, PRICES), state, PRICES)
        if other_cost is not None:
            assert cost is not None and cost <= other_cost + 1e-9
    assert decision.commit == (tokens > state.hard or tokens >= decision.line)
    assert decision.predicted_commit_cost == pytest.approx(commit_cost(chosen, PRICES))


@settings(max_examples=100, deadline=None)
@given(
    after=st.integers(min_value=0, max_value=50_000),
    rewrite_share=st.floats(min_value=0, max_value=1),
    growth=st.floats(min_value=100, max_value=5_000),
)
def test_the_best_line_minimises_the_per_request_cost(after: int, rewrite_share: float, growth: float) -> None:
    state = CostState(tokens=0, growth=growth, ceiling=10_000_000)
    candidate = Candidate("c", tokens_after=after, rewrite_tokens=int(after * rewrite_share), summary_output_tokens=50)
    line = best_line(candidate, state, PRICES)
    best = per_request(candidate, line, state, PRICES)
    assert best is not None
    for factor in (0.5, 0.9, 1.1, 2.0):
        other = per_request(candidate, after + (line - after) * factor, state, PRICES)
        if other is None:  # a span shorter than one request's growth is never a choice
            assert (line - after) * factor < growth
        else:
            assert best <= other + 1e-9


def test_growth_is_the_mean_of_recent_increments_and_a_commit_starts_a_new_cycle() -> None:
    meter = GrowthMeter()
    assert meter.mean is None
    for estimate in (1_000, 3_000, 4_000):
        meter = meter.observe(estimate)
    assert meter.mean == pytest.approx(1_500)
    meter = meter.observe(2_000)  # a commit landed: no negative growth
    assert meter.mean == pytest.approx(1_500) and meter.last == 2_000
    with pytest.raises(ValueError, match="GrowthMeter.observe"):
        meter.observe(-1)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=100_000), min_size=1, max_size=40))
def test_growth_stays_within_the_increments_seen(estimates: list[int]) -> None:
    meter = GrowthMeter()
    for estimate in estimates:
        meter = meter.observe(estimate)
    assert len(meter.increments) <= GROWTH_WINDOW
    if meter.mean is not None:
        positive = [i for i in meter.increments if i > 0]
        assert min(positive) <= meter.mean <= max(positive)


def test_the_target_rule_as_a_candidate() -> None:
    candidate = target_candidate(20_000, 0.6, kept_prefix_tokens=1_500, summary_output_tokens=300)
    assert candidate == Candidate(
        "target 0.6",
        tokens_after=12_000,
        rewrite_tokens=10_500,
        summary_output_tokens=300,
        target=0.6,
        tail_tokens=10_500,
    )
    assert target_candidate(20_000, 0.1, 50_000, 0).rewrite_tokens == 0
    with pytest.raises(ValueError, match="target"):
        target_candidate(20_000, 1.0, 0, 0)


# -- what the runtime asks (issue 19) -----------------------------------------------------------


def test_the_runtime_takes_the_deepest_target_that_leaves_room_and_commits_at_its_line() -> None:
    decision = decide_fold(
        tokens=15_000, growth=2_000, ceiling=20_000, margin=0.045, kept_prefix_tokens=1_000, prices=PRICES, caching=True
    )
    assert decision.commit and decision.choice is not None and decision.choice.target == min(COST_TARGETS)
    waiting = decide_fold(
        tokens=3_000, growth=2_000, ceiling=20_000, margin=0.045, kept_prefix_tokens=1_000, prices=PRICES, caching=True
    )
    assert not waiting.commit and waiting.line is not None and 3_000 < waiting.line <= 20_000 * 0.955 - 2_000


def test_without_caching_nothing_is_rewritten_and_carrying_costs_fresh_input() -> None:
    decision = decide_fold(
        tokens=9_000, growth=2_000, ceiling=20_000, margin=0.045, kept_prefix_tokens=1_000, prices=PRICES, caching=False
    )
    assert decision.choice is not None and decision.choice.rewrite_tokens == 0
    # b* = a + sqrt(2 g F / 1) with F the summary's output at 5x: the line comes early.
    after = decision.choice.tokens_after
    assert decision.line == pytest.approx(after + math.sqrt(2 * 2_000 * 5.0 * SUMMARY_OUTPUT_TOKENS / 1.0))


@given(
    tokens=st.integers(0, 200_000),
    growth=st.floats(1, 20_000),
    ceiling=st.integers(5_000, 200_000),
    prefix=st.integers(0, 20_000),
    caching=st.booleans(),
)
@settings(max_examples=300)
def test_a_chosen_target_is_always_on_the_menu_and_past_the_hard_limit_it_always_commits(
    tokens: int, growth: float, ceiling: int, prefix: int, caching: bool
) -> None:
    decision = decide_fold(
        tokens=tokens,
        growth=growth,
        ceiling=ceiling,
        margin=0.045,
        kept_prefix_tokens=prefix,
        prices=PRICES,
        caching=caching,
    )
    if decision.choice is not None:
        assert decision.choice.target in COST_TARGETS
    if tokens > ceiling * 0.955 - growth:
        assert decision.commit


def test_the_predicted_cycle_is_the_commit_then_carrying_and_new_tokens_over_the_horizon() -> None:
    decision = decide_fold(
        tokens=15_000, growth=2_000, ceiling=20_000, margin=0.045, kept_prefix_tokens=1_000, prices=PRICES, caching=True
    )
    choice, line, horizon = decision.choice, decision.line, decision.horizon_requests
    assert choice is not None and line is not None and horizon is not None
    expected = commit_cost(choice, PRICES) + horizon * (0.1 * (choice.tokens_after + line) / 2 + 1.25 * 2_000)
    assert predicted_cycle(decision, 2_000, PRICES) == pytest.approx(expected)
    assert predicted_cycle(choose([], CostState(tokens=1, growth=1, ceiling=10), PRICES), 1, PRICES) is None


def test_usage_is_priced_in_base_input_tokens_output_included() -> None:
    usage = Usage(
        input_tokens=100,
        cache_read_input_tokens=1_000,
        cache_write_5m_tokens=200,
        cache_write_1h_tokens=10,
        output_tokens=7,
    )
    assert usage_cost(usage, PRICES) == pytest.approx(100 + 100 + 250 + 20 + 35)


def test_an_unpriced_model_falls_back_to_the_default_ratios() -> None:
    table = PricingTable.load_default()
    assert prices_or_default(None) == CostPrices()
    unpriced_output = PriceTier(max_prompt_tokens=None, input=1.0, cache_read=0.1, cache_write_5m=1.25)
    assert prices_or_default(unpriced_output) == CostPrices()  # its output price is unknown
    assert prices_or_default(table.first_tier("claude-opus-5")) == CostPrices(read=0.1, write=1.25, output=5.0)
