"""Calibration: the scale rises to the provider's reported/counted ratio and never falls."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.measuring.calibration import MIN_CALIBRATION_TOKENS, Calibration
from runtime.values.usage import Usage


def test_starts_at_one() -> None:
    assert Calibration().scale == 1.0


def test_rises_to_reported_over_counted_with_reads_and_writes_counted_as_input() -> None:
    # seed 000 Amendment 1: the provider counted 93,525 where we counted 68,308
    usage = Usage(
        input_tokens=3_525,
        cache_read_input_tokens=60_000,
        cache_write_5m_tokens=20_000,
        cache_write_1h_tokens=10_000,
        output_tokens=999,
    )
    assert usage.total_input == 93_525
    calibrated = Calibration().after_response(68_308, usage)
    assert calibrated.scale == pytest.approx(93_525 / 68_308)
    assert calibrated.scale > 1.36


def test_never_falls() -> None:
    high = Calibration(scale=1.5)
    assert high.after_response(10_000, Usage(input_tokens=12_000)) == high  # ratio 1.2 < 1.5
    assert Calibration().after_response(10_000, Usage(input_tokens=8_000)).scale == 1.0  # ratio below one


def test_counts_below_the_minimum_leave_it_unchanged() -> None:
    assert MIN_CALIBRATION_TOKENS == 4000
    base = Calibration(scale=1.1)
    assert base.after_response(3_999, Usage(input_tokens=30_000)) == base
    assert base.after_response(4_000, Usage(input_tokens=6_000)).scale == 1.5  # 4,000 is enough


def test_a_response_reporting_no_input_changes_nothing() -> None:
    assert Calibration(scale=1.2).after_response(50_000, Usage()).scale == 1.2


@pytest.mark.parametrize("bad", [0.5, 0, -2.0, float("nan"), float("inf"), True, "1.3", None])
def test_refuses_a_bad_scale(bad: object) -> None:
    with pytest.raises(ValueError, match="scale: "):
        Calibration(scale=bad)  # type: ignore[arg-type]


def test_an_integer_scale_is_stored_as_a_float() -> None:
    assert isinstance(Calibration(scale=2).scale, float)


@pytest.mark.parametrize("bad", [-1, 4000.0, True, "5000"])
def test_refuses_a_bad_count(bad: object) -> None:
    with pytest.raises(ValueError, match="counted: .* is not a non-negative integer"):
        Calibration().after_response(bad, Usage(input_tokens=5000))  # type: ignore[arg-type]


def test_refuses_usage_that_is_not_a_usage() -> None:
    with pytest.raises(TypeError, match="expected a runtime.values.usage.Usage, got dict"):
        Calibration().after_response(5000, {"input_tokens": 6000})  # type: ignore[arg-type]


@given(
    steps=st.lists(
        st.tuples(st.integers(min_value=0, max_value=500_000), st.integers(min_value=0, max_value=900_000)),
        max_size=30,
    )
)
def test_scale_is_monotone_and_is_the_largest_qualifying_ratio(steps: list[tuple[int, int]]) -> None:
    calibration = Calibration()
    expected = 1.0
    for counted, reported in steps:
        after = calibration.after_response(counted, Usage(input_tokens=reported))
        assert after.scale >= calibration.scale
        if counted >= MIN_CALIBRATION_TOKENS:
            expected = max(expected, reported / counted)
        calibration = after
    assert calibration.scale == expected
