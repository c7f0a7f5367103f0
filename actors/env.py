"""The run environment: what every node of one run shares.

A :class:`RunEnv` is built once per run by :class:`runtime.runtime.Runtime`
and handed to the engine; it holds the signal bus, the provider, the pricing
table, the token counter, the tool registry, the injected clock and the ids
that scope events and cache evidence. It is configuration, never mutated
after construction.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from actors.tools import ToolRegistry
from runtime.config import ModelConfig, Profile
from runtime.ids import IdSource, current_ids
from runtime.measure import TokenCounter
from runtime.pricing import PricingTable
from runtime.providers.base import Provider
from signals.bus import SignalBus

if TYPE_CHECKING:
    from actors.branch import BranchJournal


@attrs.frozen
class RunEnv:
    run_id: str
    bus: SignalBus
    provider: Provider
    model: ModelConfig
    pricing: PricingTable
    counter: TokenCounter = attrs.field(eq=False)
    registry: ToolRegistry
    clock: Callable[[], float] = attrs.field(eq=False)
    monotonic: Callable[[], float] = attrs.field(eq=False)
    process_id: str
    route: str = "direct"
    journal: BranchJournal | None = attrs.field(default=None, eq=False)
    """Where new branches report their changes (a durable store), if anywhere."""
    ids: IdSource = attrs.field(factory=current_ids, eq=False)
    """Where request ids (and, through the run's scope, message and branch ids) come from."""
    jitter: Callable[[], float] = attrs.field(default=random.random, eq=False)
    """A uniform number in [0, 1) for each retry's wait (a deterministic host supplies its own)."""

    def model_name(self, profile: Profile) -> str:
        """The model a node's requests name: its profile's, else the run's."""
        return profile.model or self.model.name
