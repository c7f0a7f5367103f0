"""The default model's registry and simulator, for code examples and tests that do not care what the model says.

The model itself, its rules and its one choice (how many tools it calls per
instruction) are :mod:`runtime.scripted.default_model`. :func:`default_policies`
is a policy registry whose fallback is the default model calling each offered
tool once (every node without a script of its own) and whose default answers
fold summary requests (which name no node); :func:`open_simulated` opens the
simulated Anthropic server answering with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry


def default_policies() -> PolicyRegistry:
    """Every node answered by :class:`DefaultModel`; fold summary requests by the extractive summarizer."""
    from runtime.sim.summary_policy import FoldSummaryPolicy

    return PolicyRegistry(default=FoldSummaryPolicy(), fallback=DefaultModel(calls="each", request_unique_ids=False))


@asynccontextmanager
async def open_simulated(*, model: str = "claude-haiku-5-5") -> AsyncIterator[Any]:
    """The simulated Anthropic server on loopback, answering with the default model, and a provider
    (the official SDK over HTTP) talking to it; both closed on exit."""
    import time

    from runtime.config import ProviderSpec
    from runtime.providers.factory import open_provider

    async with open_provider(ProviderSpec(kind="simulated", model=model), default_policies(), clock=time.time) as p:
        yield p
