"""Opening the ``openai`` provider kind: a chat-completions server, or the simulator's chat face.

With ``base_url`` the provider talks to that server with the key from the
environment variable the scenario names. Without it, the simulator starts on
loopback (as kind ``simulated`` does) and the provider talks to its
``/v1/chat/completions`` face, which answers reasoning in the scenario's
dialect, with a fresh random key of its own. The ``openai`` SDK is imported
here, when such a provider is opened, never before; without the ``openai``
extra the error says how to install it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from runtime.config import ProviderSpec
from runtime.errors import ConfigError
from runtime.providers.openai_wire import ChatDialect
from runtime.scripted.policies import PolicyRegistry

if TYPE_CHECKING:
    from runtime.providers.openai import OpenAIProvider
    from runtime.sim.server import SimConfig


def dialect_of(spec: ProviderSpec) -> ChatDialect:
    """The model's dialect as the scenario sets it."""
    return ChatDialect(
        reasoning=spec.reasoning,  # type: ignore[arg-type]
        cache_key=spec.cache_key,  # type: ignore[arg-type]
        cache_control=spec.cache_control,  # type: ignore[arg-type]
        reasoning_effort=spec.reasoning_effort,
    )


def _provider_class() -> type[OpenAIProvider]:
    try:
        from runtime.providers.openai import OpenAIProvider
    except ImportError as exc:  # the optional extra is missing
        raise ConfigError(f'provider.kind: "openai": {exc}') from None
    return OpenAIProvider


@asynccontextmanager
async def open_openai(
    spec: ProviderSpec,
    policies: PolicyRegistry,
    *,
    clock: Callable[[], float],
    sim_config: Callable[..., SimConfig],
) -> AsyncIterator[OpenAIProvider]:
    """Yield the provider ``spec`` names (see the module docstring); close it (and any server) on exit."""
    cls = _provider_class()
    dialect = dialect_of(spec)
    if spec.base_url is None:
        from runtime.sim.server import serve_simulator

        key = "sim-" + secrets.token_hex(16)
        async with serve_simulator(sim_config(spec, api_key=key), policies, clock) as sim:
            sim.app.chat.dialect = spec.reasoning
            provider = cls.create(
                api_key=key,
                base_url=sim.base_url + "/v1",
                dialect=dialect,
                max_retries=spec.max_retries,
                node_header=True,  # the simulator's face: it picks a node's script by the header
            )
            try:
                yield provider
            finally:
                await provider.aclose()
        return
    key = os.environ.get(spec.key_env, "")
    if not key:
        raise ConfigError(
            f"provider.api_key_env: the environment variable {spec.key_env} is not set "
            "(the openai provider needs an API key)"
        )
    provider = cls.create(api_key=key, base_url=spec.base_url, dialect=dialect, max_retries=spec.max_retries)
    try:
        yield provider
    finally:
        await provider.aclose()
