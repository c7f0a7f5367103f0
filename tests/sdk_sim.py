"""The official SDK against the simulator on loopback, for tests: a capturing provider and a runner."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import attrs
from support import ProviderWrapper, node

from runtime.config.operation import Operation
from runtime.flows.flow import Flow
from runtime.providers.anthropic import AnthropicProvider
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import Policy, PolicyRegistry, Reply, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.server import SimServer, serve_simulator


@attrs.define(eq=False)
class Capture(ProviderWrapper):
    """Wraps the SDK provider: keeps each payload; ``tamper`` may change a payload before it is sent."""

    inner: AnthropicProvider
    payloads: list[dict[str, Any]] = attrs.field(factory=list)
    tamper_on: int | None = None

    async def send(self, request, *, node_id):
        payload = request.payload()
        self.payloads.append(payload)
        if self.tamper_on is not None and len(self.payloads) >= self.tamper_on:
            return await self._send_tampered(payload, node_id)
        return await self.inner.send(request, node_id=node_id)

    async def _send_tampered(self, payload: dict[str, Any], node_id):

        for message in payload["messages"]:
            for block in message["content"] if message["role"] == "assistant" else ():
                if block.get("type") == "thinking":
                    block["thinking"] += " (edited)"
                    break
        fake = _PayloadRequest(payload)
        return await self.inner.send(fake, node_id=node_id)  # type: ignore[arg-type]


@attrs.frozen
class _PayloadRequest:
    body: dict[str, Any]

    def payload(self) -> dict[str, Any]:
        return self.body


@attrs.define(eq=False)
class Generated:
    """A script's steps answered as a model's generation: cut at ``max_tokens`` like any generated reply.

    The simulator answers a :class:`ScriptPolicy`'s step whole past ``max_tokens``;
    a test of the ``max_tokens`` stop needs the cut, so it wraps its steps in this.
    """

    script: ScriptPolicy

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        return self.script.respond(payload)


@asynccontextmanager
async def default_model_client() -> AsyncIterator[tuple[SimServer, anthropic.AsyncAnthropic]]:
    """The simulator answered by its default model on a virtual clock, and a raw SDK client for it."""
    clock = ManualClock()
    async with serve_simulator(
        SimConfig(), PolicyRegistry(default=DefaultModel(calls="one")), clock, sleep=clock.sleep
    ) as sim:
        client = anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="sk-sim", max_retries=0)
        try:
            yield sim, client
        finally:
            await client.close()


@asynccontextmanager
async def simulated(
    scripts: dict[str, Sequence[ScriptStep]], *, whole: bool = True, config: SimConfig | None = None
) -> AsyncIterator[tuple[SimServer, Capture, ManualClock]]:
    """The simulator answering ``scripts``; with ``whole`` False the steps are cut at ``max_tokens``;
    ``config`` (faults, say) replaces the default configuration."""
    clock = ManualClock(1_000.0)
    key = "sim-" + secrets.token_hex(8)
    policy: dict[str, Policy] = {
        n: ScriptPolicy(n, steps) if whole else Generated(ScriptPolicy(n, steps)) for n, steps in scripts.items()
    }
    policies = PolicyRegistry(policy)
    async with serve_simulator(config or SimConfig(), policies, clock) as sim:
        provider = AnthropicProvider.create(api_key=key, base_url=sim.base_url, max_retries=2)
        capture = Capture(provider)
        try:
            yield sim, capture, clock
        finally:
            await provider.aclose()


async def run_node(capture: Capture, clock: ManualClock, profile, operation: Operation):
    from runtime.runtime import Runtime

    async with Runtime(provider=capture, clock=clock, monotonic=clock) as rt:  # type: ignore[arg-type]
        return await rt.run(Flow([node("n", operation, profile=profile)]))
