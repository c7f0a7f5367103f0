"""Issue 11, case 12 (the pure half): measure in the provider's tokens until calibrated, per model configuration."""

from __future__ import annotations

import math
import random

import anthropic
import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.measuring.calibration import MIN_CALIBRATION_TOKENS
from runtime.measuring.measure import Measurement, TokenCounter, measure
from runtime.measuring.model_calibration import (
    UNCERTAINTY,
    CalibrationBook,
    ModelCalibration,
    exact_measurement,
    fallback_measurement,
    needs_exact_count,
    shared_evidence,
)
from runtime.models.limits import default_model_table
from runtime.request.compiler import RequestSettings, compile_request
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.server import serve_simulator
from runtime.values.messages import Instruction

TEXT = " ".join(f"line {i}: the fold keeps every original recoverable by its index." for i in range(600))


def test_uncalibrated_counts_unless_far_under_calibrated_only_when_the_range_holds_the_ceiling() -> None:
    fresh = ModelCalibration()
    assert not fresh.calibrated
    assert needs_exact_count(60_000, 100_000, fresh)  # x 2.0 could be over
    assert not needs_exact_count(49_999, 100_000, fresh)  # under even at twice our count
    assert not needs_exact_count(10**6, None, fresh)
    small = fresh.observe(1000, 1150)
    assert not small.calibrated and small.scale == 1.15 and small.low == 1.15  # too small to calibrate
    warm = fresh.observe(MIN_CALIBRATION_TOKENS, int(MIN_CALIBRATION_TOKENS * 1.15))
    assert warm.calibrated and warm.scale == 1.15
    low, high = warm.bounds(80_000)
    assert low == int(80_000 * 1.15 * (1 - UNCERTAINTY)) and high == math.ceil(80_000 * 1.15 * (1 + UNCERTAINTY))
    assert not needs_exact_count(80_000, high, warm)  # fits even at the top of the range
    assert needs_exact_count(80_000, high - 1, warm)
    assert needs_exact_count(80_000, low, warm)
    assert not needs_exact_count(80_000, low - 1, warm)  # over even at the bottom of the range: refused uncounted
    wide = warm.observe(MIN_CALIBRATION_TOKENS, int(MIN_CALIBRATION_TOKENS * 0.9))
    assert wide.scale == 1.15 and wide.low == 0.9 and wide.bounds(80_000)[0] < low  # a lower ratio widens it


@given(st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 2 * 10**6)), max_size=20))
def test_the_scale_never_falls(observations: list[tuple[int, int]]) -> None:
    calibration = ModelCalibration()
    for counted, provider in observations:
        after = calibration.observe(counted, provider)
        assert after.scale >= calibration.scale
        calibration = after


def test_the_book_is_shared_by_model_and_survives_the_store() -> None:
    book = CalibrationBook().observe("claude-haiku-5-5", 1000, 1370).observe("claude-opus-4-6", 1000, 1100)
    assert book.get("claude-haiku-5-5").scale == 1.37 and book.get("never-seen") == ModelCalibration()
    assert CalibrationBook.from_json(book.to_json()) == book
    with pytest.raises(ValueError, match="not JSON"):
        CalibrationBook.from_json("{")
    with pytest.raises(ValueError, match="expected scale, samples and low"):
        CalibrationBook.from_json('{"m": {"scale": 1.2}}')
    with pytest.raises(ValueError, match="scale"):
        CalibrationBook.from_json('{"m": {"scale": 0.5, "samples": 1, "low": null}}')  # a scale never below 1.0
    with pytest.raises(ValueError, match="'m'.*low"):
        CalibrationBook.from_json('{"m": {"scale": 1.2, "samples": 1, "low": -1}}')


def test_priors_are_documented_and_conservative() -> None:
    table = default_model_table()
    assert table.token_prior("claude-haiku-5-5") == 1.37
    # Families OpenAI tokenizes with o200k_base (ours): our count is theirs.
    for model in ("gpt-4o", "gpt-4o-mini", "gpt-4.1-nano", "gpt-5", "gpt-5-mini", "o1", "o3-mini", "o4-mini"):
        assert table.token_prior(model) == 1.0, model
        family = table.family(model)
        assert family is not None and family.tokenizer == "o200k_base" and family.source, model
    # gpt-4 and gpt-3.5 use cl100k_base, and a model of no listed family has no ratio on record: the largest.
    for model in ("gpt-4", "gpt-4-turbo", "gpt-3.5-turbo", "llama-3.1-70b", "some-other-model"):
        assert table.family(model) is None and table.token_prior(model) == 1.37, model


def test_the_exact_count_replaces_the_estimate_whichever_way() -> None:
    m = Measurement(counted=1000, scale=1.0, estimate=1000, parts=())
    assert exact_measurement(m, 1370).estimate == 1370
    assert exact_measurement(m, 900).estimate == 900  # what the provider counts is what fits or not
    with pytest.raises(ValueError):
        exact_measurement(m, -1)


def test_the_fallback_is_the_prior_until_calibrated_then_the_top_of_the_range() -> None:
    m = Measurement(counted=10_000, scale=1.0, estimate=10_000, parts=())
    assert fallback_measurement(m, 1.37, ModelCalibration()).estimate == 13_700
    assert fallback_measurement(m, 1.0, ModelCalibration()).estimate == 10_000  # a family tokenized exactly
    assert fallback_measurement(attrs.evolve(m, scale=1.5), 1.0, ModelCalibration()).estimate == 15_000
    warm = ModelCalibration().observe(10_000, 11_500)
    assert fallback_measurement(m, 1.37, warm).estimate == warm.bounds(10_000)[1] == 12_075
    with pytest.raises(ValueError, match="scale"):
        fallback_measurement(m, 0.9, ModelCalibration())  # a prior below our count is no prior


@pytest.mark.anyio
@pytest.mark.parametrize("factor", [1.15, 1.37])
async def test_the_first_request_decided_on_the_servers_count_never_goes_over(factor: float) -> None:
    """The case from the issue: at scale 1.0 a request under the ceiling by our count is over by the server's."""
    request = compile_request(
        system=None, tools=(), view=[Instruction(TEXT)], settings=RequestSettings(model="claude-haiku-5-5")
    )
    ours = measure(request.pieces(), TokenCounter(), 1.0)
    ceiling = int(ours.estimate * 1.07)  # fits by our count, not by a server counting 15% or 37% more
    calibration = ModelCalibration()
    assert needs_exact_count(ours.counted, ceiling, calibration)
    policies = PolicyRegistry(default=ScriptPolicy("default", [ScriptStep(text="ok")]))
    clock = ManualClock()
    async with serve_simulator(SimConfig(token_factor=factor), policies, clock, sleep=clock.sleep) as sim:
        client = anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="sk-sim-test", max_retries=0)
        try:
            payload = request.payload()
            payload.pop("max_tokens")
            counted = await client.messages.count_tokens(**payload)
        finally:
            await client.close()
    exact = exact_measurement(ours, counted.input_tokens)
    assert ours.estimate <= ceiling < exact.estimate  # scale 1.0 would have sent it; the exact count refuses it
    assert calibration.observe(ours.counted, counted.input_tokens).scale >= factor * 0.95


def test_combined_evidence_takes_the_larger_scale_both_samples_and_the_lower_low() -> None:
    start = ModelCalibration(scale=1.2, samples=2, low=1.1)
    own = ModelCalibration(scale=1.3, samples=1, low=1.15)
    assert start.combined(own) == ModelCalibration(scale=1.3, samples=3, low=1.1)
    assert own.combined(ModelCalibration()) == own  # nothing to add
    assert ModelCalibration().combined(ModelCalibration()) == ModelCalibration()  # no low on either side
    assert ModelCalibration(samples=1).combined(ModelCalibration()).calibrated  # one sample calibrates (MIN_SAMPLES)


# -- in-run sharing: a node starts with the evidence its dependencies finished with --------------------------

MODELS = ("claude-haiku-5-5", "claude-sonnet-5", "gpt-x")
_observation = st.tuples(st.sampled_from(MODELS), st.integers(1, 40_000), st.integers(0, 80_000))


def _book(observations: list[tuple[str, int, int]]) -> CalibrationBook:
    book = CalibrationBook()
    for model, counted, provider in observations:
        book = book.observe(model, counted, provider)
    return book


@settings(max_examples=200)
@given(
    st.lists(st.lists(_observation, max_size=6), min_size=1, max_size=5),
    st.lists(_observation, max_size=4),
    st.randoms(use_true_random=False),
)
def test_shared_evidence_is_order_free_counts_a_dependency_once_and_never_falls(
    evidence: list[list[tuple[str, int, int]]], own: list[tuple[str, int, int]], rng: random.Random
) -> None:
    books = [_book(observations) for observations in evidence]
    # A diamond: the last dependency reached b through another path too (its evidence inside an extended one).
    upstream = _book(evidence[0] + own)
    books_with_paths = [*books, upstream]
    shared = shared_evidence(books_with_paths)
    shuffled = list(books_with_paths)
    rng.shuffle(shuffled)
    assert shared_evidence(shuffled) == shared  # whatever order the dependencies finished in
    assert shared_evidence([*shuffled, *books]) == shared  # the same evidence twice counts once
    assert shared_evidence([shared, books[0]]) == shared  # taking it again at a resume changes nothing
    for book in books_with_paths:  # nothing any dependency had is lost: no scale falls, no low rises
        for model, calibration in book.entries.items():
            mine = shared.get(model)
            assert mine.scale >= calibration.scale and mine.samples >= calibration.samples
            assert calibration.low is None or (mine.low is not None and mine.low <= calibration.low)
            assert mine.calibrated or not calibration.calibrated
    assert set(shared.entries) == {m for book in books_with_paths for m in book.entries}
    assert shared_evidence([]) == CalibrationBook()


def test_shared_evidence_takes_the_larger_scale_the_lower_low_and_the_larger_sample_count() -> None:
    a = CalibrationBook({"m": ModelCalibration(scale=1.2, samples=2, low=1.1)})
    c = CalibrationBook({"m": ModelCalibration(scale=1.3, samples=1, low=1.15), "n": ModelCalibration(scale=1.4)})
    shared = shared_evidence([a, c])
    assert shared.get("m") == ModelCalibration(scale=1.3, samples=2, low=1.1)
    assert shared.get("n") == ModelCalibration(scale=1.4)
    with pytest.raises(TypeError, match="expected CalibrationBook values, got dict"):
        shared_evidence([a, {"m": 1.2}])  # type: ignore[list-item]
