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
- ``api-clear-tool-uses``: Anthropic's server-side context editing
  (``clear_tool_uses_20250919``) at its documented defaults, prompt caching
  on, and nothing of foldline's own (no ceiling, no fold, no context tool):
  what "just turn on context editing" does. Its ``api-clear-tool-uses/...``
  variants are the sensitivity table over ``trigger``, ``keep`` and
  ``clear_at_least`` (:data:`CLEAR_VARIANTS`), amounts relative to the
  workload's ceiling resolved per profile (:func:`profile_ceiling`).
- ``api-compaction``: Anthropic's server-side compaction
  (``compact_20260112``) at its default trigger, and ``api-compaction/ceiling``
  at the workload's ceiling (at least the API's minimum, 50,000).

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
from runtime.values.server_edits import CLEAR_TOOL_USES, COMPACT, DEFAULT_COMPACT_TRIGGER, MIN_COMPACT_TRIGGER


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
    edits: tuple[ServerEdit, ...] = ()
    """Anthropic server-side edits sent on every main request (``server_context_edits``), resolved per profile."""
    not_built: str = ""
    """Why this build cannot run the strategy (empty: it can)."""

    def missing_keys(self) -> tuple[str, ...]:
        """Override keys :class:`Profile` does not have in this build."""
        known = attrs.fields_dict(Profile)
        return tuple(key for key in self.override if key not in known)

    def check_built(self) -> None:
        """Raise :class:`StrategyNotBuilt` when this build cannot apply the override."""
        if self.not_built:
            raise StrategyNotBuilt(f"strategy {self.name!r} is not built yet: {self.not_built}")
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
                name: profile.evolve(
                    **{**self.override, **self._edits_for(scenario, name), **self.per_profile.get(name, {})}
                )
                for name, profile in scenario.profiles.items()
            }
        except ConfigError as exc:
            raise ConfigError(f"strategy {self.name!r} on workload {scenario.name!r}: {exc}") from exc
        return scenario.evolve(profiles=profiles)

    def _edits_for(self, scenario: Scenario, profile: str) -> dict[str, Any]:
        if not self.edits:
            return {}
        ceiling = profile_ceiling(scenario, profile)
        return {"server_context_edits": [edit.resolve(ceiling) for edit in self.edits]}


def profile_ceiling(scenario: Scenario, profile: str) -> int | None:
    """The numeric ceiling of ``profile`` in ``scenario``: its own, else the least of its nodes' (None: none)."""

    def numeric(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    own = numeric(scenario.profiles[profile].max_input_tokens)
    if own is not None:
        return own
    nodes = [numeric(node.max_input_tokens) for node in scenario.nodes if node.profile == profile]
    return min((c for c in nodes if c is not None), default=None)


@attrs.frozen
class ServerEdit:
    """One ``context_management.edits`` table; token amounts as a share of the profile's ceiling or absolute.

    ``trigger``, ``keep`` and ``clear_at_least`` None: left out (the API's
    default). A share (a float) of a profile without a numeric ceiling falls
    back to the API's default (the key is left out). ``floor`` is the least
    trigger the API takes (compaction's 50,000).
    """

    type: str
    trigger: int | float | None = None
    keep: int | None = None
    clear_at_least: int | float | None = None
    floor: int = 0

    def _tokens(self, amount: int | float | None, ceiling: int | None) -> int | None:
        if amount is None or isinstance(amount, int):
            return amount
        return None if ceiling is None else max(self.floor, int(amount * ceiling))

    def resolve(self, ceiling: int | None) -> dict[str, Any]:
        """The edit table for a profile whose ceiling is ``ceiling``."""
        edit: dict[str, Any] = {"type": self.type}
        trigger = self._tokens(self.trigger, ceiling)
        if trigger is not None:
            edit["trigger"] = {"type": "input_tokens", "value": trigger}
        if self.keep is not None:
            edit["keep"] = {"type": "tool_uses", "value": self.keep}
        least = self._tokens(self.clear_at_least, ceiling)
        if least is not None:
            edit["clear_at_least"] = {"type": "input_tokens", "value": least}
        return edit


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

API_CLEAR = "api-clear-tool-uses"
API_COMPACTION = "api-compaction"
_API_OVERRIDE = {"prompt_caching": True, "context_management": False, "max_input_tokens": "none"}


def _clear(label: str, summary: str, **edit: Any) -> Strategy:
    name = API_CLEAR if not label else f"{API_CLEAR}/{label}"
    return Strategy(name, summary, _API_OVERRIDE, edits=(ServerEdit(CLEAR_TOOL_USES, **edit),))


CLEAR_VARIANTS: tuple[Strategy, ...] = (
    _clear("", "clear_tool_uses at its documented defaults (trigger 100,000 input tokens, keep 3)"),
    _clear("ceiling", "clear_tool_uses, trigger at the ceiling, keep 3", trigger=1.0),
    _clear("half", "clear_tool_uses, trigger at half the ceiling, keep 3", trigger=0.5),
    _clear("ceiling-keep1", "clear_tool_uses, trigger at the ceiling, keep 1", trigger=1.0, keep=1),
    _clear("ceiling-keep8", "clear_tool_uses, trigger at the ceiling, keep 8", trigger=1.0, keep=8),
    _clear(
        "ceiling-least",
        "clear_tool_uses, trigger at the ceiling, keep 3, clear at least a quarter of the ceiling",
        trigger=1.0,
        clear_at_least=0.25,
    ),
)
"""``api-clear-tool-uses`` and its sensitivity variants, in table order."""

COMPACTION_VARIANTS: tuple[Strategy, ...] = (
    Strategy(
        API_COMPACTION,
        f"compact_20260112 at its default trigger ({DEFAULT_COMPACT_TRIGGER:,} input tokens)",
        _API_OVERRIDE,
        edits=(ServerEdit(COMPACT),),
    ),
    Strategy(
        f"{API_COMPACTION}/ceiling",
        f"compact_20260112 triggered at the ceiling (at least the API's minimum, {MIN_COMPACT_TRIGGER:,})",
        _API_OVERRIDE,
        edits=(ServerEdit(COMPACT, trigger=1.0, floor=MIN_COMPACT_TRIGGER),),
    ),
)
"""``api-compaction`` and its variant at the workload's ceiling."""

API_STRATEGIES: tuple[Strategy, ...] = CLEAR_VARIANTS + COMPACTION_VARIANTS

STRATEGIES: Mapping[str, Strategy] = MappingProxyType(
    {s.name: s for s in (NAIVE, CACHE_ONLY, COMPACTION, FOLD_IMMEDIATE, FOLDLINE, FOLDLINE_COST, *API_STRATEGIES)}
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
