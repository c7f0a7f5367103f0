"""tail_skip selection at its boundaries (seed 001 Amendment 4)."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from runtime.cache.errors import CacheInputError
from runtime.cache.tail_skip import DEFAULT_TAIL_MARGIN, TailSkip, TailSkipRecord

CEILING = 100_000
AT = 0.9  # fold line 90,000; default margin 4,500 tokens


def decide(estimate, *, margin=DEFAULT_TAIL_MARGIN, at=AT, ceiling=CEILING):
    return TailSkip.decide(estimate=estimate, ceiling=ceiling, context_fold_at=at, margin=margin)


def test_default_margin():
    assert DEFAULT_TAIL_MARGIN == 0.045


@pytest.mark.parametrize(
    ("estimate", "selected"),
    [
        (85_500, True),  # gap 4,500 = m x C: inside
        (85_499, False),  # gap 4,501: outside
        (85_499.9, False),
        (88_000, True),
        (89_999, True),
        (89_999.5, True),  # gap 0.5
        (90_000, False),  # at the line: keeps its mark
        (90_001, False),  # past the line
        (120_000, False),
        (10_000, False),
        (0, False),
    ],
)
def test_selected_within_the_margin_below_the_line(estimate, selected):
    assert decide(estimate).selected is selected


def test_the_boundary_is_exact_for_decimal_inputs():
    # 0.8 x 100,000 - 0.045 x 100,000 is 75,500 in decimal, whatever the binary rounding.
    assert decide(75_500, at=0.8).selected
    assert not decide(75_499, at=0.8).selected
    assert decide(75_500.0, at=0.8, margin=0.045).selected


def test_a_zero_margin_selects_nothing():
    assert not decide(89_999, margin=0).selected
    assert not decide(89_999.999, margin=0.0).selected


def test_the_record_of_a_selected_request():
    skip = decide(88_000)
    assert skip.record == TailSkipRecord(estimate=88_000.0, fold_line=90_000.0, margin=0.045)
    assert skip.record.to_dict() == {"estimate": 88_000.0, "fold_line": 90_000.0, "margin": 0.045}


def test_an_unselected_request_records_nothing():
    assert decide(80_000).record is None
    assert decide(90_000).record is None


@pytest.mark.parametrize("margin", [-0.01, 0.9, 0.95, 1.0, math.nan, math.inf, True, "0.045", None])
def test_an_invalid_margin_is_refused(margin):
    with pytest.raises(CacheInputError, match="margin"):
        decide(80_000, margin=margin)


def test_the_margin_must_be_below_context_fold_at():
    decide(1, margin=0.49, at=0.5)
    with pytest.raises(CacheInputError, match=r"0 <= margin < context_fold_at \(0.5\)"):
        decide(1, margin=0.5, at=0.5)


@pytest.mark.parametrize("ceiling", [0, -5, True, 1.5, "100000"])
def test_an_invalid_ceiling_is_refused(ceiling):
    with pytest.raises(CacheInputError, match="ceiling"):
        decide(1, ceiling=ceiling)


@pytest.mark.parametrize("at", [0, -0.1, 1.01, math.nan, False])
def test_an_invalid_fold_line_share_is_refused(at):
    with pytest.raises(CacheInputError, match="context_fold_at"):
        decide(1, at=at, margin=0)


@pytest.mark.parametrize("estimate", [-1, math.nan, True, "5"])
def test_an_invalid_estimate_is_refused(estimate):
    with pytest.raises(CacheInputError, match="estimate"):
        decide(estimate)


@given(
    estimate=st.integers(min_value=0, max_value=200_000),
    ceiling=st.integers(min_value=1, max_value=1_000_000),
    at_pct=st.integers(min_value=1, max_value=100),
    margin_pct=st.integers(min_value=0, max_value=99),
)
def test_selection_matches_the_integer_rule(estimate, ceiling, at_pct, margin_pct):
    assume(margin_pct < at_pct)
    skip = TailSkip.decide(estimate=estimate, ceiling=ceiling, context_fold_at=at_pct / 100, margin=margin_pct / 100)
    gap_x100 = at_pct * ceiling - 100 * estimate
    assert skip.selected == (0 < gap_x100 <= margin_pct * ceiling)
