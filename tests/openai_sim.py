"""The official ``openai`` SDK against the simulator's chat face, for tests: a capturing provider and a runner."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
from support import ProviderWrapper, node

from runtime.config.operation import Operation
from runtime.flows.flow import Flow
from runtime.providers.openai import OpenAIProvider
from runtime.providers.openai_wire import ChatDialect
from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import Policy, PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.server import SimServer, serve_simulator
from runtime.sim.summary_policy import FoldSummaryPolicy


@attrs.define(eq=False)
class ChatCapture(ProviderWrapper):
    """Wraps the provider: keeps the body, headers and intent of each attempt it sends."""

    inner: OpenAIProvider
    bodies: list[dict[str, Any]] = attrs.field(factory=list)
    headers: list[dict[str, str]] = attrs.field(factory=list)
    intents: list[str] = attrs.field(factory=list)

    async def send(self, request, *, node_id):
        body, headers = self.inner.wire(request)
        self.bodies.append(body)
        self.headers.append(headers)
        self.intents.append(request.settings.intent)
        return await self.inner.send(request, node_id=node_id)


@asynccontextmanager
async def chat_simulated(
    scripts: dict[str, Sequence[ScriptStep]],
    *,
    dialect: ChatDialect | None = None,
    faults: Sequence[FaultRule] = (),
    key: str | None = None,
    fallback: Policy | None = None,
) -> AsyncIterator[tuple[SimServer, ChatCapture, ManualClock]]:
    """The simulator answering ``scripts`` on its chat face (in ``dialect``'s reasoning field)."""
    clock = ManualClock(1_000.0)
    key = key or "sk-sim-" + secrets.token_hex(8)
    dialect = dialect or ChatDialect()
    # A fold's summary request names no node: it is answered by the summary policy, as a scenario run's is.
    scripted = {n: ScriptPolicy(n, steps) for n, steps in scripts.items()}
    policies = PolicyRegistry(scripted, default=FoldSummaryPolicy(), fallback=fallback)
    async with serve_simulator(SimConfig(faults=tuple(faults), api_keys=frozenset({key})), policies, clock) as sim:
        sim.app.chat.dialect = dialect.reasoning
        provider = OpenAIProvider.create(api_key=key, base_url=sim.base_url + "/v1", dialect=dialect, max_retries=2)
        capture = ChatCapture(provider)
        try:
            yield sim, capture, clock
        finally:
            await provider.aclose()


async def run_chat_node(capture: ChatCapture, clock: ManualClock, profile, operation: Operation, **kw: Any):
    from runtime.runtime import Runtime

    async with Runtime(provider=capture, clock=clock, monotonic=clock, model="gpt-sim", **kw) as rt:  # type: ignore[arg-type]
        result = await rt.run(Flow([node("n", operation, profile=profile)]))
        return result, rt.report()
