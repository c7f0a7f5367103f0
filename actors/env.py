"""The run environment: what every node of one run shares.

A :class:`RunEnv` is built once per run by :class:`runtime.runtime.Runtime`
and handed to the engine; it holds the signal bus, the provider, the pricing
table, the token counter, the tool registry, the injected clock and the ids
that scope events and cache evidence. It is configuration, never mutated
after construction, except for what it holds by identity: the run's
:class:`ModelScales`, the one calibration book every branch of the run shares.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import attrs

from actors.tools import ToolRegistry
from runtime.config.profile import Profile
from runtime.config.provider import ModelConfig
from runtime.contract.provider import Provider
from runtime.measuring.measure import TokenCounter
from runtime.measuring.model_calibration import CalibrationBook, ModelCalibration
from runtime.models.pricing import PricingTable
from runtime.values.ids import IdSource, current_ids
from signals.bus import SignalBus

if TYPE_CHECKING:
    from actors.branch import BranchJournal


DEFAULT_COUNT_TIMEOUT_S = 30.0
"""How long a send waits for the provider's count-tokens answer before it decides on the fallback."""


def _check_timeout(_instance: object, _attribute: attrs.Attribute, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
        raise ValueError(f"count_timeout_s: {value!r} is not a number of seconds in (0, 3600]")


class CalibrationKeeper(Protocol):
    """Where the run's calibration book is kept (a durable store), if anywhere."""

    def calibration_changed(self, book: CalibrationBook) -> None: ...


@attrs.define(eq=False)
class ModelScales:
    """The run's calibration books: what it started from, and what it learned for the runs after it.

    ``start`` is what every branch of the run begins from (with its own
    evidence added: ``Branch.calibrations``, kept in its state, passed to
    its clones, and given at a node's start the evidence of the nodes it
    depends on, :func:`runtime.measuring.model_calibration.shared_evidence`). It does
    not change during the run: were one branch to take another's evidence as
    it arrived, its decisions would hang on the order in which concurrent
    branches were answered, and a resumed run, or the same flow on Temporal,
    would send other requests. Each observation (an
    exact count, or a completed response) goes into ``book``; a scale never
    falls. ``keeper`` (a store) is told each change of ``book``, so a later
    run starts from it. ``count_calls`` counts the count-tokens calls of this
    run, ``count_failures`` those that failed.
    """

    book: CalibrationBook = attrs.field(factory=CalibrationBook)
    keeper: CalibrationKeeper | None = None
    count_calls: int = 0
    count_failures: int = 0
    start: CalibrationBook = attrs.field(default=attrs.Factory(lambda self: self.book, takes_self=True), kw_only=True)

    def get(self, model: str) -> ModelCalibration:
        """What every branch of the run starts from for ``model``."""
        return self.start.get(model)

    def observe(self, model: str, counted: int, provider_count: int) -> ModelCalibration:
        """Take in that the provider counted ``provider_count`` for what we counted at ``counted``."""
        book = self.book.observe(model, counted, provider_count)
        if book != self.book:
            self.book = book
            if self.keeper is not None:
                self.keeper.calibration_changed(book)
        return book.get(model)


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
    calibration: ModelScales = attrs.field(factory=ModelScales, eq=False)
    """The run's calibration books (the runtime passes the same one to every env): see :class:`ModelScales`."""
    count_timeout_s: float = attrs.field(default=DEFAULT_COUNT_TIMEOUT_S, validator=_check_timeout)
    """How long to wait for a count-tokens answer (then the fallback decides, and the decision says why)."""

    def model_name(self, profile: Profile) -> str:
        """The model a node's requests name: its profile's, else the run's."""
        return profile.model or self.model.name
