"""The strategies the benchmark compares, each a profile override (pure).

Every strategy is applied the same way to the same workload: its override is
applied to every profile of the scenario (:meth:`runtime.config.Profile.evolve`),
so nodes, scripts, tools and per-node ceilings stay the workload's own.

- ``naive``: no prompt caching, no ceiling, no context tool.
- ``cache-only``: prompt caching, no ceiling, no context tool (nothing folds).
- ``compaction``: prompt caching; the workload's ceiling; at 0.8 x ceiling one
  summary request, then the conversation continues from the system text, the
  summary and the latest instruction, originals dropped.
- ``fold-immediate``: the full fold, each fold committed as soon as it is decided.
- ``foldline``: the full design: caching, epoch-scheduled folds, protected
  first round, tail skip.
- ``foldline-cost``: ``foldline`` with each profile's fold line and target
  chosen by the cost model (:mod:`runtime.bench.cost_strategy`), derived per
  workload from its naive run.

A strategy that needs a profile key this build does not have (folding lands
separately) raises :class:`StrategyNotBuilt`, naming the missing keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from runtime.config import Profile, Scenario
from runtime.errors import ConfigError, FoldlineError


class StrategyNotBuilt(FoldlineError):
    """A strategy needs something this build does not have yet."""


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


@attrs.frozen
class Strategy:
    """A named profile override; ``summary`` says what it is in one line."""

    name: str
    summary: str
    override: Mapping[str, Any] = attrs.field(converter=_frozen, hash=False)
    per_profile: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, converter=_frozen, hash=False)
    """Further overrides by profile name, applied after ``override``."""
    derived: bool = False
    """The strategy's settings are derived from the workload's baseline run (the harness does it)."""

    def missing_keys(self) -> tuple[str, ...]:
        """Override keys :class:`Profile` does not have in this build."""
        known = attrs.fields_dict(Profile)
        return tuple(key for key in self.override if key not in known)

    def check_built(self) -> None:
        """Raise :class:`StrategyNotBuilt` when this build cannot apply the override."""
        missing = self.missing_keys()
        if missing:
            raise StrategyNotBuilt(
                f"strategy {self.name!r} is not built yet: it needs the profile key(s) {', '.join(missing)}, "
                f"which folding (issue 5) adds and this build does not have"
            )

    def apply(self, scenario: Scenario) -> Scenario:
        """``scenario`` with the override applied to every profile."""
        self.check_built()
        try:
            profiles = {
                name: profile.evolve(**{**self.override, **self.per_profile.get(name, {})})
                for name, profile in scenario.profiles.items()
            }
        except ConfigError as exc:
            raise ConfigError(f"strategy {self.name!r} on workload {scenario.name!r}: {exc}") from exc
        return scenario.evolve(profiles=profiles)


NAIVE = Strategy(
    "naive",
    "no caching, no ceiling",
    {"prompt_caching": False, "context_management": False, "max_input_tokens": "none"},
)
CACHE_ONLY = Strategy(
    "cache-only",
    "prompt caching, no ceiling, no fold",
    {"prompt_caching": True, "context_management": False, "max_input_tokens": "none"},
)
COMPACTION = Strategy(
    "compaction",
    "summarize and restart at 0.8 x ceiling; originals dropped",
    {"prompt_caching": True, "context_management": True, "context_strategy": "compaction"},
)
FOLD_IMMEDIATE = Strategy(
    "fold-immediate",
    "fold, each commit as soon as it is decided",
    # A verbatim tail: fold after read would make it foldline's twin (the comparison is epoch against immediate).
    {
        "prompt_caching": True,
        "context_management": True,
        "context_strategy": "fold",
        "fold_scheduling": "immediate",
        "fold_tail": "verbatim",
    },
)
FOLDLINE = Strategy(
    "foldline",
    "caching, epoch-scheduled folds, protected first round, tail skip",
    {"prompt_caching": True, "context_management": True, "context_strategy": "fold", "fold_scheduling": "epoch"},
)

FOLDLINE_COST = Strategy(
    "foldline-cost",
    "foldline with fixed fractions the cost model chose once per profile from the naive run",
    {**FOLDLINE.override, "fold_policy": "fixed"},
    derived=True,
)

STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {s.name: s for s in (NAIVE, CACHE_ONLY, COMPACTION, FOLD_IMMEDIATE, FOLDLINE, FOLDLINE_COST)}
)
"""Every strategy, in table order."""

BASELINE = NAIVE.name
"""The strategy whose run is the workload's append-only request sequence (the lower bound's input)."""


def strategy_named(name: str) -> Strategy:
    """The strategy called ``name``; ConfigError listing the known ones otherwise."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ConfigError(f"strategy {name!r} is not one of {', '.join(STRATEGIES)}") from None
