"""Requests in flight per provider: the bound every sender shares, and the SDK's pool sized to it.

Over real HTTP against the simulator (the official SDK): the server never sees
more connections than the bound, however many sends are waiting; the setting
is checked with its key path; nodes at once stay the flow's own setting.
"""

from __future__ import annotations

import secrets

import anyio
import pytest

from runtime.config import ProviderSpec
from runtime.contract.in_flight import DEFAULT_MAX_IN_FLIGHT, InFlight
from runtime.errors import ConfigError
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.factory import open_provider
from runtime.request.compiler import RequestSettings, compile_request
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.server import serve_simulator
from runtime.values.messages import Instruction

SENDS = 8

pytestmark = pytest.mark.anyio


def _request(i: int):
    view = [Instruction(f"Say hello ({i}).")]
    return compile_request(system="s", tools=(), view=view, settings=RequestSettings(model="claude-haiku-5-5"))


def _policies() -> PolicyRegistry:
    return PolicyRegistry(
        {f"n{i}": ScriptPolicy(f"n{i}", [ScriptStep.from_obj({"text": f"hello {i}"}, f"n{i}")]) for i in range(SENDS)}
    )


async def test_sends_beyond_the_bound_wait_and_the_server_never_sees_more_connections() -> None:
    key = "sim-" + secrets.token_hex(8)
    config = SimConfig(latency_s=0.05, api_keys=frozenset({key}))
    peak = {"out": 0, "connections": 0}
    async with serve_simulator(config, _policies(), ManualClock(1_000.0)) as sim:
        provider = AnthropicProvider.create(api_key=key, base_url=sim.base_url, max_in_flight=2)
        replies: dict[int, str] = {}

        async def send(i: int) -> None:
            reply = await provider.send(_request(i), node_id=f"n{i}")
            replies[i] = reply.content[0]["text"]

        async def watch() -> None:
            while True:
                peak["out"] = max(peak["out"], provider.in_flight.out)
                peak["connections"] = max(peak["connections"], sim.connections.open_count)
                await anyio.sleep(0.005)

        try:
            async with anyio.create_task_group() as watching:
                watching.start_soon(watch)
                async with anyio.create_task_group() as tg:
                    for i in range(SENDS):
                        tg.start_soon(send, i)
                watching.cancel_scope.cancel()
            counted = await provider.count_tokens(_request(0))
        finally:
            await provider.aclose()
    assert replies == {i: f"hello {i}" for i in range(SENDS)}
    assert counted > 0 and provider.in_flight.out == 0
    assert peak["out"] == 2  # the bound was reached, never passed
    assert 1 <= peak["connections"] <= 2  # the pool is sized to the bound: no idle third connection


async def test_a_count_never_waits_behind_the_messages_out() -> None:
    key = "sim-" + secrets.token_hex(8)
    async with serve_simulator(SimConfig(api_keys=frozenset({key})), _policies(), ManualClock(1_000.0)) as sim:
        provider = AnthropicProvider.create(api_key=key, base_url=sim.base_url, max_in_flight=1)
        try:
            async with provider.in_flight:  # the one message slot is taken (a long generation, say)
                with anyio.fail_after(20):
                    counted = await provider.count_tokens(_request(0))
                with anyio.move_on_after(0.2) as waited:
                    await provider.send(_request(1), node_id="n1")
            assert waited.cancelled_caught  # a message does wait for its slot
            assert counted > 0 and provider.counting.out == 0
        finally:
            await provider.aclose()


async def test_open_provider_takes_the_setting_and_its_default() -> None:
    for setting, expected in ((3, 3), (None, DEFAULT_MAX_IN_FLIGHT)):
        spec = ProviderSpec(kind="simulated", max_in_flight=setting)
        async with open_provider(spec, _policies(), clock=lambda: 0.0) as provider:
            assert isinstance(provider, AnthropicProvider) and provider.in_flight.limit == expected
            reply = await provider.send(_request(1), node_id="n1")
            assert reply.content[0]["text"] == "hello 1"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "provider.max_in_flight: 0"),
        (1_025, "provider.max_in_flight: 1025 is above the upper bound 1024"),
        ("8", "provider.max_in_flight: '8'"),
        (True, "provider.max_in_flight: true"),
    ],
)
def test_a_bad_max_in_flight_is_refused_with_its_key_path(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("'", ".")):
        ProviderSpec.from_obj({"kind": "simulated", "max_in_flight": value}, "provider")


def test_max_in_flight_applies_only_to_the_sdk_providers_and_a_kind_override_drops_it() -> None:
    for kind in ("scripted", "openai"):
        with pytest.raises(ConfigError, match=f'provider.max_in_flight: set for provider kind "{kind}"'):
            ProviderSpec.from_obj({"kind": kind, "max_in_flight": 8}, "provider")
    spec = ProviderSpec(kind="simulated", max_in_flight=8)
    assert spec.with_kind("scripted").max_in_flight is None
    assert spec.with_kind("anthropic").max_in_flight == 8


def test_an_in_flight_bound_out_of_range_is_refused_in_code() -> None:
    with pytest.raises(ConfigError, match="InFlight.limit: 0"):
        InFlight(0)


async def test_the_bound_is_no_task_lock_one_task_may_hold_several_slots() -> None:
    slots = InFlight(2)
    async with slots, slots:
        assert slots.out == 2
        with anyio.move_on_after(0.05) as waited:
            async with slots:
                pass
        assert waited.cancelled_caught  # a third waits
    assert slots.out == 0
