"""The ceiling policy: parsing, resolution, the per-send decision, the notice and the refusal."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.decision.ceiling import (
    UNSET,
    Decision,
    ResolvedCeiling,
    decide,
    notice_line,
    parse_max_input_tokens,
    refusal,
    resolve_ceiling,
)
from runtime.errors import ConfigError, FoldlineError, InputCeilingExceeded
from runtime.measuring.measure import Measurement
from runtime.models.pricing import PricingTable

PRICING = PricingTable.load_default()
HAIKU, SONNET_45, UNKNOWN = "claude-haiku-5-5", "claude-sonnet-4-5", "house-model-7"
WHERE = "scenarios/x.toml: nodes[2].max_input_tokens"


# --- parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, parsed", [(1, 1), (100_000, 100_000), (10**12, 10**12), ("auto", "auto"), ("none", "none")]
)
def test_parse_accepts_positive_ints_auto_and_none(value: object, parsed: object) -> None:
    assert parse_max_input_tokens(value, WHERE) == parsed


def test_parse_reads_a_missing_key_as_unset() -> None:
    assert parse_max_input_tokens(UNSET, WHERE) is None


@pytest.mark.parametrize(
    "value",
    [0, -1, -100_000, True, False, 100_000.0, 1.5, "100000", "100_000", "Auto", "NONE", "off", "", None, [1], {}],
)
def test_parse_refuses_everything_else_naming_the_key_and_value(value: object) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_max_input_tokens(value, WHERE)
    assert str(caught.value) == f'{WHERE}: {value!r} is not a positive integer, "auto" or "none"'


def test_parse_message_for_zero_matches_the_documented_form() -> None:
    with pytest.raises(
        ConfigError, match=r"^scenarios/x\.toml: nodes\[2\]\.max_input_tokens: 0 is not a positive integer"
    ):
        parse_max_input_tokens(0, WHERE)


# --- resolution ----------------------------------------------------------------------


def resolve(model: str = HAIKU, profile=None, configured=None, call=None) -> ResolvedCeiling:
    return resolve_ceiling(model=model, profile_value=profile, model_value=configured, call_value=call, pricing=PRICING)


def test_unset_on_a_tier_priced_model_is_the_first_tier_boundary() -> None:
    resolved = resolve(HAIKU)
    assert (resolved.ceiling, resolved.source, resolved.tier) == (100_000, "auto", 0)
    assert resolved.reason == "unset, read as auto: first price tier of claude-haiku-5-5 ends at 100000 prompt tokens"


def test_auto_on_a_tier_priced_model() -> None:
    resolved = resolve("claude-sonnet-4", profile="auto")
    assert (resolved.ceiling, resolved.source, resolved.tier) == (200_000, "auto", 0)
    assert "auto (profile): first price tier of claude-sonnet-4 ends at 200000 prompt tokens" == resolved.reason


@pytest.mark.parametrize("value", [None, "auto"])
def test_unset_or_auto_on_a_flat_priced_model_is_no_ceiling_and_says_so(value: object) -> None:
    resolved = resolve(SONNET_45, configured=value)
    assert (resolved.ceiling, resolved.source, resolved.tier) == (None, "unpriced", None)
    assert f"on flat-priced {SONNET_45}: no ceiling" in resolved.reason
    assert resolved.reason.startswith("unset" if value is None else "auto (model)")


@pytest.mark.parametrize("value", [None, "auto"])
def test_unset_or_auto_on_an_unpriced_model_is_no_ceiling_and_says_so(value: object) -> None:
    resolved = resolve(UNKNOWN, profile=value)
    assert (resolved.ceiling, resolved.source) == (None, "unpriced")
    assert resolved.reason.endswith(f"unpriced model {UNKNOWN}: no ceiling")


def test_none_is_no_ceiling_on_any_model() -> None:
    for model in (HAIKU, SONNET_45, UNKNOWN):
        resolved = resolve(model, profile="none", configured=50_000)
        assert (resolved.ceiling, resolved.source, resolved.tier) == (None, "none", None)


def test_the_profile_value_wins_over_the_model_value() -> None:
    assert resolve(profile=30_000, configured=60_000) == ResolvedCeiling(
        30_000, "profile", None, "profile max_input_tokens: 30000"
    )
    assert resolve(profile="auto", configured=60_000).ceiling == 100_000


def test_the_model_value_applies_when_the_profile_is_unset() -> None:
    resolved = resolve(SONNET_45, configured=60_000)
    assert (resolved.ceiling, resolved.source) == (60_000, "model")


def test_a_lower_call_value_lowers_the_ceiling() -> None:
    resolved = resolve(profile=80_000, call=50_000)
    assert (resolved.ceiling, resolved.source, resolved.tier) == (50_000, "call", None)
    assert "50000" in resolved.reason and "80000" in resolved.reason


def test_an_equal_call_value_changes_nothing() -> None:
    assert resolve(profile=80_000, call=80_000) == resolve(profile=80_000)


def test_a_call_value_above_the_ceiling_is_refused_naming_both_values() -> None:
    with pytest.raises(ConfigError) as caught:
        resolve(profile=80_000, call=90_000)
    message = str(caught.value)
    assert message.startswith("call.max_input_tokens: 90000 would raise the ceiling 80000")
    assert "may only lower it" in message


def test_a_call_none_under_a_ceiling_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^call\.max_input_tokens: 'none' would raise the ceiling 100000"):
        resolve(HAIKU, call="none")


def test_a_call_auto_that_finds_no_ceiling_under_one_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"'auto' \(resolves to no ceiling\) would raise the ceiling 40000"):
        resolve(SONNET_45, configured=40_000, call="auto")


def test_a_call_auto_is_the_models_auto_under_the_rule() -> None:
    assert resolve(HAIKU, call="auto") == resolve(HAIKU)  # the same ceiling: nothing changes
    lowered = resolve(HAIKU, profile="none", call="auto")  # from no ceiling to the tier boundary
    assert (lowered.ceiling, lowered.source, lowered.tier) == (100_000, "call", 0)
    with pytest.raises(ConfigError, match=r"'auto' \(resolves to 100000\) would raise the ceiling 60000"):
        resolve(HAIKU, profile=60_000, call="auto")


def test_a_call_value_sets_a_ceiling_where_there_is_none() -> None:
    for model, profile in ((SONNET_45, None), (UNKNOWN, None), (HAIKU, "none")):
        resolved = resolve(model, profile=profile, call=20_000)
        assert (resolved.ceiling, resolved.source) == (20_000, "call")


def test_a_call_none_or_auto_without_a_ceiling_keeps_no_ceiling() -> None:
    assert resolve(SONNET_45, call="none") == resolve(SONNET_45)
    assert resolve(UNKNOWN, call="auto") == resolve(UNKNOWN)


@pytest.mark.parametrize(
    "field, kwargs",
    [
        ("profile.max_input_tokens", {"profile": 0}),
        ("model.max_input_tokens", {"configured": True}),
        ("call.max_input_tokens", {"call": "100000"}),
    ],
)
def test_resolve_refuses_unparsed_bad_values_naming_the_field(field: str, kwargs: dict) -> None:
    with pytest.raises(ConfigError, match=rf"^{field}: "):
        resolve(**kwargs)


@given(profile=st.integers(1, 10**7), call=st.integers(1, 10**7))
def test_a_call_value_never_raises_the_ceiling(profile: int, call: int) -> None:
    if call > profile:
        with pytest.raises(ConfigError):
            resolve(profile=profile, call=call)
    else:
        assert resolve(profile=profile, call=call).ceiling == call


# --- decisions --------------------------------------------------------------------------


def m(estimate: int, counted: int | None = None, scale: float = 1.0, parts=(("m1", 10),)) -> Measurement:
    return Measurement(counted=estimate if counted is None else counted, scale=scale, estimate=estimate, parts=parts)


CEILING = ResolvedCeiling(100_000, "profile", None, "profile max_input_tokens: 100000")


@pytest.mark.parametrize(
    "estimate, can_fold, action",
    [
        (100_001, False, "refuse"),
        (100_001, True, "fold"),
        (100_000, False, "notice"),  # equal to the ceiling is sent
        (100_000, True, "fold"),
        (99_999, False, "notice"),
        (80_000, True, "fold"),  # at the fold line (>=)
        (79_999, True, "pass"),
        (80_000, False, "notice"),
        (79_999, False, "pass"),
        (0, True, "pass"),
    ],
)
def test_decide_boundaries(estimate: int, can_fold: bool, action: str) -> None:
    decision = decide(m(estimate), CEILING, can_fold=can_fold)
    assert (decision.action, decision.estimate, decision.ceiling) == (action, estimate, 100_000)
    assert str(estimate) in decision.reason


def test_no_ceiling_always_passes_with_the_resolution_reason() -> None:
    resolved = resolve(SONNET_45)
    decision = decide(m(10**9), resolved, can_fold=False)
    assert decision == Decision("pass", 10**9, None, f"estimate {10**9}; {resolved.reason}")


def test_fold_line_below_the_notice_line_folds_first() -> None:
    assert decide(m(75_000), CEILING, can_fold=True, fold_at=0.7, notice_at=0.9).action == "fold"
    assert decide(m(75_000), CEILING, can_fold=False, fold_at=0.7, notice_at=0.9).action == "pass"
    assert decide(m(90_000), CEILING, can_fold=False, fold_at=0.7, notice_at=0.9).action == "notice"


def test_thresholds_are_free_of_float_noise() -> None:
    assert 0.14 * 100_000 > 14_000  # binary float noise
    assert decide(m(14_000), CEILING, can_fold=True, fold_at=0.14).action == "fold"
    assert decide(m(14_000), CEILING, can_fold=False, notice_at=0.14).action == "notice"
    assert decide(m(13_999), CEILING, can_fold=True, fold_at=0.14, notice_at=0.14).action == "pass"


def test_reasons_carry_the_numbers() -> None:
    assert decide(m(100_001), CEILING, can_fold=False).reason == (
        "estimate 100001 is over the ceiling 100000 and nothing may fold"
    )
    assert "fold line 80000 (0.8 x ceiling 100000)" in decide(m(85_000), CEILING, can_fold=True).reason
    assert "reaches 80000 (0.8 x ceiling 100000): notice" in decide(m(85_000), CEILING, can_fold=False).reason


@pytest.mark.parametrize("name, value", [("fold_at", 0), ("fold_at", 1.2), ("notice_at", -0.5), ("notice_at", True)])
def test_decide_refuses_thresholds_outside_zero_to_one(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"^{name}: .* is not a fraction of the ceiling in \(0, 1\]"):
        decide(m(1), CEILING, can_fold=True, **{name: value})


@given(estimate=st.integers(0, 300_000), ceiling=st.integers(1, 200_000), can_fold=st.booleans())
def test_nothing_over_the_ceiling_passes_or_is_noticed(estimate: int, ceiling: int, can_fold: bool) -> None:
    decision = decide(m(estimate), ResolvedCeiling(ceiling, "profile", None, "p"), can_fold=can_fold)
    if estimate > ceiling:
        assert decision.action == ("fold" if can_fold else "refuse")
    else:
        assert decision.action != "refuse"


# --- notice and refusal ----------------------------------------------------------------


def test_notice_line_is_one_deterministic_line_with_the_numbers() -> None:
    line = notice_line(m(84_213), 100_000)
    assert line == notice_line(m(84_213, counted=60_000, scale=1.4035), 100_000)  # the estimate is what it shows
    assert "\n" not in line
    assert "84213 tokens" in line and "84%" in line and "100000-token ceiling" in line
    for tool in ("fold", "read_result", "restore"):
        assert tool in line
    assert notice_line(m(84_214), 100_000) != line


@pytest.mark.parametrize("bad", [0, -5, True, 1.5])
def test_notice_line_refuses_a_bad_ceiling(bad: object) -> None:
    with pytest.raises(ValueError, match="ceiling: .* is not a positive integer"):
        notice_line(m(1), bad)  # type: ignore[arg-type]


def test_refusal_carries_every_number_and_the_branch() -> None:
    measurement = Measurement(counted=80_000, scale=1.37, estimate=109_600, parts=(("tool-7", 50_000), ("system", 900)))
    error = refusal(measurement, 100_000, branch_id="b-42")
    assert isinstance(error, InputCeilingExceeded) and isinstance(error, FoldlineError)
    assert (error.estimate, error.ceiling, error.counted, error.scale) == (109_600, 100_000, 80_000, 1.37)
    assert error.largest_parts == [("tool-7", 50_000), ("system", 900)]
    assert error.branch_id == "b-42"
    message = str(error)
    for fragment in ("b-42", "109600", "100000", "80000", "1.3700", "tool-7 50000", "nothing was sent"):
        assert fragment in message


def test_refusal_without_a_branch() -> None:
    error = refusal(m(5, parts=()), 4)
    assert error.branch_id is None and error.largest_parts == []
    assert "largest parts: none" in str(error) and " on branch" not in str(error)


def test_refusal_survives_pickling_with_its_numbers() -> None:
    error = refusal(m(9, counted=7, scale=1.25, parts=(("m", 7),)), 8, branch_id="b")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is InputCeilingExceeded
    assert (
        copy.to_dict()
        == error.to_dict()
        == {"estimate": 9, "ceiling": 8, "counted": 7, "scale": 1.25, "largest_parts": [["m", 7]], "branch_id": "b"}
    )
    assert str(copy) == str(error)


def test_large_thresholds_read_as_whole_numbers() -> None:
    big = ResolvedCeiling(10_000_000, "profile", None, "p")
    assert "fold line 8000000 (0.8 x ceiling 10000000)" in decide(m(9_000_000), big, can_fold=True).reason
    assert (
        "reaches 33333.30 (0.333333 x ceiling 100000)"
        in decide(m(40_000), CEILING, can_fold=False, notice_at=0.333333).reason
    )


# --- boundaries the mutation run found unchecked ---------------------------------------


def test_unset_reads_as_unset() -> None:
    assert repr(UNSET) == "UNSET"


def test_none_says_where_it_came_from() -> None:
    assert resolve(HAIKU, profile="none").reason == 'profile max_input_tokens is "none": no ceiling'
    assert resolve(HAIKU, configured="none").reason == 'model max_input_tokens is "none": no ceiling'


def test_a_call_auto_that_lowers_the_ceiling_names_itself_and_what_it_lowered() -> None:
    lowered = resolve(HAIKU, profile=150_000, call="auto")
    assert (lowered.ceiling, lowered.source, lowered.tier) == (100_000, "call", 0)
    assert lowered.reason == (
        "auto (call): first price tier of claude-haiku-5-5 ends at 100000 prompt tokens, "
        "below 150000 (profile max_input_tokens: 150000)"
    )


def test_fractions_of_one_are_allowed_and_mean_the_ceiling_itself() -> None:
    resolved = resolve(HAIKU, profile=1_000)
    at_ceiling = decide(Measurement(1_000, 1.0, 1_000, ()), resolved, can_fold=True, fold_at=1, notice_at=1.0)
    assert at_ceiling.action == "fold"
    assert at_ceiling.reason == "estimate 1000 reaches the fold line 1000 (1 x ceiling 1000)"
    below = decide(Measurement(999, 1.0, 999, ()), resolved, can_fold=False, notice_at=1)
    assert below.action == "pass"


def test_the_notice_line_text_is_exact_and_a_ceiling_of_one_is_a_ceiling() -> None:
    assert notice_line(Measurement(17_000, 1.0, 17_000, ()), 20_000) == (
        "[context] This request is about 17000 tokens, 85% of its 20000-token ceiling. Your context tool can "
        "reduce it: fold marks spans to fold, read_result reads a folded original in ranges, restore brings "
        "one back when it fits."
    )
    assert "about 1 tokens, 100% of its 1-token ceiling" in notice_line(Measurement(1, 1.0, 1, ()), 1)
