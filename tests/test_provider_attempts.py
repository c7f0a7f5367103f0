"""A provider sends exactly one attempt: the real SDK against the simulator, no retry inside."""

from __future__ import annotations

import pytest

from runtime.contract.provider import AttemptFailed, ProviderError
from runtime.providers.anthropic import AnthropicProvider
from runtime.request.compiler import Request, RequestSettings, compile_request
from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.server import SimConfig, serve_simulator
from runtime.values.messages import Instruction

KEY = "sk-sim-attempts"


def _request() -> Request:
    settings = RequestSettings(model="claude-haiku-5-5")
    return compile_request(system=None, tools=(), view=(Instruction("q"),), settings=settings)


@pytest.mark.anyio
async def test_a_failed_attempt_is_raised_once_with_what_the_retry_rules_read() -> None:
    clock = ManualClock()
    config = SimConfig(api_keys=frozenset({KEY}), faults=(FaultRule(kind="529", on_request=1, retry_after_ms=7),))
    policies = PolicyRegistry({"n": ScriptPolicy("n", [ScriptStep(text="ok")] * 3)})
    async with serve_simulator(config, policies, clock, sleep=clock.sleep) as sim:
        provider = AnthropicProvider.create(api_key=KEY, base_url=sim.base_url, max_retries=2)
        try:
            with pytest.raises(AttemptFailed) as failed:
                await provider.send(_request(), node_id="n")
            assert len(sim.requests) == 1, "the provider itself never retries"
            reply = await provider.send(_request(), node_id="n")
        finally:
            await provider.aclose()
    error = failed.value
    assert error.status == 529 and error.error_type == "overloaded_error"
    assert {k.lower(): v for k, v in error.headers.items()}["retry-after-ms"] == "7"
    assert str(error).startswith("HTTP 529 overloaded_error") and "attempt" not in str(error)
    assert reply.message().text == "ok" and reply.attempts == 1


@pytest.mark.anyio
async def test_a_malformed_body_is_a_final_error_not_an_attempt_to_retry() -> None:
    clock = ManualClock()
    config = SimConfig(api_keys=frozenset({KEY}), faults=(FaultRule(kind="malformed", on_request=1),))
    policies = PolicyRegistry({"n": ScriptPolicy("n", [ScriptStep(text="ok")] * 3)})
    async with serve_simulator(config, policies, clock, sleep=clock.sleep) as sim:
        provider = AnthropicProvider.create(api_key=KEY, base_url=sim.base_url)
        try:
            with pytest.raises(ProviderError) as failed:
                await provider.send(_request(), node_id="n")
        finally:
            await provider.aclose()
    assert not isinstance(failed.value, AttemptFailed)
    assert "malformed response body" in str(failed.value) and failed.value.error_type == "malformed_response"
