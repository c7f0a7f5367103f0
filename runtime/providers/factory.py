"""Opening the provider a scenario names.

``scripted`` answers in process; ``simulated`` starts the simulated Anthropic
server on loopback and talks to it with the official SDK; ``anthropic`` talks
to the real API with the key from the environment variable the scenario names;
``openai`` talks to a chat-completions server through the ``openai`` SDK (the
scenario's ``base_url``, or, without one, the simulator's chat-completions
face speaking the scenario's reasoning dialect, :mod:`runtime.providers.openai_factory`).
Every provider is closed when the context exits.

The anthropic SDK is imported when a provider that talks to it is opened,
never before: a command that opens none (``--help``, a bad scenario,
``inspect``) does not pay for it.
"""

from __future__ import annotations

import hashlib
import os
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from runtime.config import ProviderSpec
from runtime.contract.in_flight import in_flight_limit
from runtime.contract.provider import Provider
from runtime.errors import ConfigError
from runtime.measuring.tokenizer import load_in_background
from runtime.providers.key_destination import check_key_destination, check_key_variable
from runtime.providers.scripted import ScriptedProvider
from runtime.scripted.policies import PolicyRegistry

if TYPE_CHECKING:
    from runtime.providers.anthropic import AnthropicProvider
    from runtime.sim.server import SimConfig


def _anthropic_provider() -> type[AnthropicProvider]:
    """The SDK-backed provider class (importing the anthropic SDK on first use)."""
    from runtime.providers.anthropic import AnthropicProvider

    return AnthropicProvider


def __getattr__(name: str) -> object:
    # ``factory.AnthropicProvider`` still names the class, imported when first asked for.
    if name == "AnthropicProvider":
        return _anthropic_provider()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def sim_config_for(spec: ProviderSpec, *, api_key: str, run_id: str | None = None) -> SimConfig:
    """The simulator's configuration; with ``run_id`` its thinking key is derived from it (a resume verifies)."""
    from runtime.sim.server import SimConfig

    return SimConfig(
        thinking_key=None if run_id is None else hashlib.sha256(f"foldline sim thinking\x00{run_id}".encode()).digest(),
        token_factor=spec.token_factor,
        latency_s=spec.latency_s,
        lookback_collapse=spec.lookback_collapse,
        faults=spec.faults,
        api_keys=frozenset({api_key}),
    )


@asynccontextmanager
async def open_provider(
    spec: ProviderSpec, policies: PolicyRegistry, *, clock: Callable[[], float], run_id: str | None = None
) -> AsyncIterator[Provider]:
    """Yield a ready provider for ``spec``; close it (and any server) on exit.

    ``run_id`` names the run a simulated server answers: its thinking blocks are
    signed with a key derived from it, so a resumed run's new server accepts the
    blocks the stopped run's server signed (as the real API does).
    """
    if spec.kind == "anthropic" or (spec.kind == "openai" and spec.base_url is not None):  # a key is read
        check_key_destination(spec.kind, spec.base_url, spec.key_env, os.environ)
        check_key_variable(spec.api_key_env, spec.evolve(api_key_env=None).key_env, os.environ)
    load_in_background()  # the tokenizer builds while the provider opens (the first send counts)
    if spec.kind == "scripted":
        yield ScriptedProvider(
            policies,
            clock=clock,
            token_factor=spec.token_factor,
            lookback_collapse=spec.lookback_collapse,
        )
        return
    if spec.kind == "simulated":
        from runtime.sim.server import serve_simulator

        key = "sim-" + secrets.token_hex(16)
        async with serve_simulator(sim_config_for(spec, api_key=key, run_id=run_id), policies, clock) as sim:
            provider = _anthropic_provider().create(
                api_key=key,
                base_url=sim.base_url,
                name="simulated",
                max_retries=spec.max_retries,
                node_header=True,
                max_in_flight=in_flight_limit(spec.max_in_flight),
            )
            try:
                yield provider
            finally:
                await provider.aclose()
        return
    if spec.kind == "anthropic":
        key = os.environ.get(spec.key_env, "")
        if not key:
            raise ConfigError(
                f"provider.api_key_env: the environment variable {spec.key_env} is not set "
                "(the anthropic provider needs an API key)"
            )
        provider = _anthropic_provider().create(
            api_key=key,
            base_url=spec.base_url,
            name="anthropic",
            max_retries=spec.max_retries,
            max_in_flight=in_flight_limit(spec.max_in_flight),
        )
        try:
            yield provider
        finally:
            await provider.aclose()
        return
    if spec.kind == "openai":
        from runtime.providers.openai_factory import open_openai

        async with open_openai(spec, policies, clock=clock, sim_config=sim_config_for) as chat_provider:
            yield chat_provider
        return
    raise ConfigError(f"provider.kind: {spec.kind!r} is not one of scripted, simulated, anthropic, openai")
