"""The ``foldline-cost`` strategy: fixed fractions the cost model chose once per profile (pure).

Since issue 19 the runtime asks :mod:`runtime.fold.cost` before every request
(``fold_policy = "cost"``, the default, which the ``foldline`` strategy runs). This
strategy is kept as the comparison it was before the model was wired: the cost model
applied once per profile, offline, as fixed settings (``fold_policy = "fixed"``):

- **growth** ``g``: the mean increment between consecutive requests of the nodes on
  that profile in the workload's ``naive`` run;
- **candidates**: the target rule at :data:`TARGETS` of the ceiling, each keeping the
  first request (system, tools, task) and producing :data:`SUMMARY_TOKENS` of summary;
- **prices**: the model's, from the pricing table.

The chosen candidate's target becomes ``context_fold_target`` and its commit line
``min(b*, hard)`` becomes ``context_fold_at``. These parameters were fixed before the
figures were read, with one exception stated in the issue's notes: the deepest target
(0.3) was tried on reading-20k before the menu was written down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import attrs

from runtime.bench.peers import Step
from runtime.bench.strategies import FOLDLINE_COST, Strategy
from runtime.config import Scenario
from runtime.fold.cost import CostPrices, CostState, choose, target_candidate

TARGETS = (0.6, 0.45, 0.3)
"""The fold depths offered to the cost model, as shares of the ceiling."""

SUMMARY_TOKENS = 300
"""The summary output a commit is expected to produce (the summarizer asks for at most 300 words)."""


@attrs.frozen
class ProfileChoice:
    """What the cost model chose for one profile, and the figures it chose from."""

    profile: str
    ceiling: int
    growth: float
    fold_at: float
    target: float
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "ceiling": self.ceiling,
            "growth": round(self.growth, 1),
            "fold_at": self.fold_at,
            "target": self.target,
            "reason": self.reason,
        }


def _growth(steps: Sequence[Step], nodes: set[str]) -> tuple[float | None, int | None]:
    by_branch: dict[str, list[int]] = {}
    for step in steps:
        if step.node in nodes:
            by_branch.setdefault(step.branch, []).append(step.input_tokens)
    increments = [b - a for sizes in by_branch.values() for a, b in pairwise(sizes) if b > a]
    firsts = [sizes[0] for sizes in by_branch.values()]
    if not increments:
        return None, min(firsts) if firsts else None
    return sum(increments) / len(increments), min(firsts)


def choose_profile(profile: str, ceiling: int, growth: float, base: int, prices: CostPrices) -> ProfileChoice | None:
    """The cost model's fold line and target for one profile (None: no candidate leaves room to run)."""
    candidates = [target_candidate(ceiling, t, base, SUMMARY_TOKENS) for t in TARGETS]
    state = CostState(tokens=0, growth=growth, ceiling=ceiling)
    decision = choose(candidates, state, prices)
    if decision.choice is None or decision.line is None:
        return None
    target = TARGETS[candidates.index(decision.choice)]
    fold_at = round(min(1.0, decision.line / ceiling), 3)
    if fold_at <= target:
        return None
    where = (
        "the line is the ceiling's hard limit: b* is past it"
        if decision.line >= state.hard - 1e-6
        else "the line is b*, under the hard limit"
    )
    return ProfileChoice(profile, ceiling, growth, fold_at, target, where)


def cost_strategy(
    scenario: Scenario, steps: Sequence[Step], prices: CostPrices
) -> tuple[Strategy, list[ProfileChoice]]:
    """``foldline-cost`` for ``scenario``: per-profile settings from the cost model over the naive ``steps``.

    A profile without a numeric ceiling, without growth to measure, or where no
    candidate leaves room keeps foldline's fixed fractions.
    """
    per_profile: dict[str, Mapping[str, Any]] = {}
    choices: list[ProfileChoice] = []
    for name, profile in scenario.profiles.items():
        ceiling = profile.max_input_tokens
        if isinstance(ceiling, bool) or not isinstance(ceiling, int):
            continue
        nodes = {node.id for node in scenario.nodes if node.profile == name}
        growth, base = _growth(steps, nodes)
        if growth is None or base is None:
            continue
        choice = choose_profile(name, ceiling, growth, base, prices)
        if choice is None:
            continue
        choices.append(choice)
        per_profile[name] = {"context_fold_at": choice.fold_at, "context_fold_target": choice.target}
    return attrs.evolve(FOLDLINE_COST, per_profile=per_profile), choices
