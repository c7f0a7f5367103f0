"""Issue 28, items 1 and 2: nothing is sent over its ceiling by the provider's count, whatever the content.

The flow, the content kinds and the tally are the script's
(``scripts/over_ceiling_new_content.py``, which prints the sweep's figures).
Every request here runs the real send path against the simulator's own
counting code (the scripted provider answers with it in process), and every
response's billed input (fresh + cache read + cache write) is checked against
the ceiling its send decided under.

- Item 1, content the calibration never saw: the run starts from a book fitted
  on other content (ratio 1.0: what a branch calibrated on requests of mostly
  framing shows), then one large tool result of a kind the simulator bills at
  its token factor arrives (CJK, emoji, base64, random unicode, digits). The
  part of the request new since the last calibrated request is bounded at the
  family's uncalibrated maximum (DESIGN.md section 13) or counted exactly.
- Item 2, a provider above the assumed maximum: the simulator refuses token
  factors beyond that maximum, and a first request with no exact count to be
  had (no count-tokens endpoint) is decided on it, for every factor it takes.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runtime.config import ProviderSpec
from runtime.errors import ConfigError
from runtime.inputs.bounds import MAX_TOKEN_FACTOR
from runtime.measuring.model_calibration import UNCALIBRATED_MAX_SCALE, UNCERTAINTY
from runtime.sim.config import SimConfig


def _script_module() -> Any:
    """``scripts/over_ceiling_new_content.py``: the flow, the content kinds and the tally these tests share."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "over_ceiling_new_content.py"
    spec = importlib.util.spec_from_file_location("foldline_over_ceiling_new_content", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


NEW = _script_module()
KINDS, FACTORS, MODEL = NEW.KINDS, (1.15, 1.37, 1.6, MAX_TOKEN_FACTOR), NEW.MODEL
run_once, last_request, sent_over = NEW.run_once, NEW.last_request, NEW.sent_over


# -- item 1: content the calibration never saw ---------------------------------------------------------------


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(KINDS),
    factor=st.sampled_from(FACTORS),
    size=st.integers(2_000, 12_000),
    share=st.floats(0.0, 1.0),
)
@example(kind="cjk", factor=1.15, size=12_000, share=0.5)
@example(kind="base64", factor=MAX_TOKEN_FACTOR, size=4_000, share=0.0)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_property_new_content_is_never_sent_over_by_the_providers_count(
    backend: str, kind: str, factor: float, size: int, share: float
) -> None:
    """Ceilings between our estimate of the blob's request and the simulator's bill of it (the band where the
    calibration alone would send it), and a little either side."""

    async def run() -> None:
        estimate, billed = await last_request(kind, factor, size, 1.0, True)
        assert billed > estimate  # the calibration underestimates the new content: the band is not empty
        ceiling = estimate - 50 + round(share * (billed - estimate + 100))
        outcome, decided, bills = await run_once(ceiling, kind, factor, size, book=1.0)
        assert sent_over(decided, bills) == [], (decided, bills)
        if billed <= ceiling - 600:  # fits, the notice's room included: sent, not refused
            assert outcome.status == "ok", decided
        blob_decision = decided[-1]
        if blob_decision["method"] == "provider count_tokens" and outcome.status == "ok":
            assert "new since the last calibrated request" in blob_decision["reason"]

    anyio.run(run, backend=backend)


@pytest.mark.anyio
async def test_the_decision_on_new_content_says_it_was_bounded_and_counted() -> None:
    estimate, billed = await last_request("cjk", 1.37, 8_000, 1.0, True)
    ceiling = (estimate + billed) // 2  # under the bill: the calibration alone sent it over (the audit's case)
    outcome, decided, bills = await run_once(ceiling, "cjk", 1.37, 8_000, book=1.0)
    assert outcome.status == "failed" and len(bills) == 1  # the first request went; the blob's was refused
    refused = decided[-1]
    assert refused["action"] == "refuse" and not refused["sent"]
    assert refused["method"] == "provider count_tokens" and refused["provider_count"] == billed
    assert "new since the last calibrated request, bounded at 2 x for claude-haiku-5-5" in refused["reason"]


@pytest.mark.anyio
async def test_without_an_endpoint_new_content_is_decided_at_the_familys_maximum() -> None:
    """A calibrated model, no count to be had: the new part is bounded at 2.0, the seen part at the scale."""
    estimate, billed = await last_request("emoji", MAX_TOKEN_FACTOR, 6_000, 1.0, False)
    for ceiling in range(estimate, billed + 1, max(1, (billed - estimate) // 8)):
        outcome, decided, bills = await run_once(ceiling, "emoji", MAX_TOKEN_FACTOR, 6_000, book=1.0, counts=False)
        assert sent_over(decided, bills) == []
        assert decided[-1]["method"] == "o200k_base x conservative scale"
        assert "new since the last calibrated request" in decided[-1]["reason"]


# -- item 2: a provider above the assumed maximum ------------------------------------------------------------


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kind=st.sampled_from(KINDS),
    factor=st.floats(1.0, MAX_TOKEN_FACTOR),
    size=st.integers(2_000, 12_000),
    share=st.floats(0.0, 1.0),
)
@example(kind="digits", factor=MAX_TOKEN_FACTOR, size=6_000, share=0.9)
@example(kind="cjk", factor=1.6, size=6_000, share=0.5)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_property_with_no_exact_count_an_uncalibrated_request_is_never_sent_over(
    backend: str, kind: str, factor: float, size: int, share: float
) -> None:
    """No count-tokens endpoint, nothing calibrated, any factor the simulator takes: ceilings from our
    plain count of the blob's request to the simulator's bill of it."""

    async def run() -> None:
        _, billed = await last_request(kind, factor, size, None, True)  # the bill; our plain figure is under it
        ceiling = round(billed / factor) + round(share * (billed - billed / factor + 50))
        _, decided, bills = await run_once(ceiling, kind, factor, size, book=None, counts=False)
        assert sent_over(decided, bills) == [], (decided, bills)

    anyio.run(run, backend=backend)


def test_the_simulator_refuses_a_factor_beyond_the_assumed_maximum_with_the_reason() -> None:
    # What the simulator takes, with what it adds, stays within what the send assumes.
    assert MAX_TOKEN_FACTOR * (1 + UNCERTAINTY) <= UNCALIBRATED_MAX_SCALE
    SimConfig(token_factor=MAX_TOKEN_FACTOR)
    ProviderSpec(kind="simulated", token_factor=MAX_TOKEN_FACTOR)
    with pytest.raises(ConfigError, match=r"SimConfig.token_factor: 2.5 is above 1.9 \(foldline assumes at most 2"):
        SimConfig(token_factor=2.5)
    with pytest.raises(ConfigError, match=r"token_factor: 2.5 is above the upper bound 1.9 \(foldline assumes"):
        ProviderSpec(kind="simulated", token_factor=2.5)


@pytest.mark.anyio
async def test_without_an_endpoint_a_folding_branch_folds_on_the_bound_instead_of_being_refused() -> None:
    """Plain estimate under the fold line, the bound (the new blob at 2x) over the ceiling: the refusal is one
    a fold clears, so the turn folds and resumes (at most twice a turn) rather than failing."""
    from runtime.config.operation import Operation
    from runtime.flows.flow import Flow, Node
    from runtime.providers.scripted import ScriptedProvider
    from runtime.runtime import Runtime
    from runtime.scripted.policies import PolicyRegistry, ScriptCall, ScriptPolicy, ScriptStep
    from runtime.sim.clock import ManualClock
    from runtime.sim.summary_policy import FoldSummaryPolicy

    reads = [
        ScriptStep(tool_calls=(ScriptCall.create("synthetic_read", {"path": f"f{i}", "size": 1300}),))
        for i in range(12)
    ]
    blob = ScriptStep(tool_calls=(ScriptCall.create("blob", {"kind": "cjk", "size": 1800, "seed": 1}),))
    steps = [*reads, blob, ScriptStep(text="done")]
    clock = ManualClock(1_000.0)
    policies = PolicyRegistry({"n": ScriptPolicy("n", steps)}, default=FoldSummaryPolicy())
    provider = NEW.NoCountEndpoint(ScriptedProvider(policies, clock=clock, token_factor=1.15))
    profile = NEW.PROFILE.evolve(
        tools=("synthetic_read", "blob"), context_management=True, fold_policy="fixed", max_input_tokens=10_000
    )
    events: list[Any] = []
    async with Runtime(
        provider=provider,
        clock=clock,
        monotonic=clock,
        model=MODEL,
        registry=NEW.REGISTRY,
        calibration=NEW.book_at(1.0),
    ) as rt:
        rt.signals.add_handler(events.append, name="t")
        result = await rt.run(
            Flow([Node("n", Operation("iterative", ("Read the files.",), max_rounds=16), profile=profile)])
        )
    decided = [dict(e.data) for e in events if e.type == "ContextDecision"]
    bills = [
        sum(v for k, v in e.data["usage"].items() if k != "output_tokens")
        for e in events
        if e.type == "ResponseReceived"
    ]
    assert result["n"].status == "ok", (result["n"].reason, decided[-1]["reason"])
    assert sent_over(decided, bills) == []
    assert any(d["action"] == "fold" for d in decided), [
        (d["estimate_before"], d["estimate_after"], d["action"]) for d in decided
    ]
