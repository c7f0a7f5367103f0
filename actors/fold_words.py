"""What a fold did and why it stopped, in words, with the line and target in force (pure).

The decision event of every request of a folding branch names the fold line and
target in force at that request: the cost model's when the ``cost`` policy chose
them (:func:`runtime.fold.cost.decide_fold`), else the profile's fixed fractions.
A fold that lands says what it took, from what size to what size, and, when it
stops short of its target, why: each pass the planner rolled back (it would not
have lowered the estimate), and that what stays in the view is what a fold never
takes (the task, the protected first round, the kept tail, calls not yet answered).
A child's first request that folds what its emitter carried fresh to fold next
(:mod:`actors.inherit_fold`) says so first, whatever else folded.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from runtime.fold.planner import FoldPlan
from signals.events import FoldCommitted


@attrs.frozen
class InForce:
    """The fold line and target in force before one request, in tokens, and who chose them."""

    line: int
    target: int
    chosen_by: str
    """``cost model`` or ``fixed fractions``."""

    def words(self) -> str:
        return f"fold line {self.line:,} and target {self.target:,} in force ({self.chosen_by})"


def stopped_short(plan: FoldPlan, target: int) -> str:
    """Why a landed fold left the context above ``target`` (empty when it reached it)."""
    if plan.target_reached or plan.estimate_after <= target:
        return ""
    rolled = [p for p in plan.passes if p.outcome == "rolled_back"]
    tried = "; ".join(
        f"{p.stage} would have left {p.estimate_after:,} (not under {p.estimate_before:,}), rolled back"
        + (f" ({p.detail})" if p.detail else "")
        for p in rolled
    )
    rest = "what stays is what a fold never takes (the task, the protected first round, the kept tail, calls not yet answered)"
    return f"it stopped at {plan.estimate_after:,}, above the target {target:,}: " + (
        f"{tried}; {rest}" if tried else rest
    )


def fold_sentence(plan: FoldPlan, target: int) -> str:
    """One landed fold in words: what it took, the sizes, and whether and why it stopped short of the target."""
    took = "+".join(plan.stages)
    text = f"fold {plan.fold_id} took {took}: {plan.estimate_before:,} -> {plan.estimate_after:,} tokens"
    short = stopped_short(plan, target)
    return f"{text}, target {target:,} reached" if not short else f"{text}; {short}"


def folds_reason(
    ceiling_reason: str,
    plans: Sequence[FoldPlan],
    in_force: InForce | None,
    why: str,
    ran: bool,
    after_read: str = "",
) -> str:
    """The decision's reason for a folding branch: the line and target in force, what the folds did, then the send.

    ``after_read`` says why rounds were folded once read (the tail choice) when that is all that ran.
    """
    if in_force is None:
        return ceiling_reason
    if not ran and after_read:
        described = "; ".join(fold_sentence(p, in_force.target) for p in plans if p.landed)
        return f"folded once read ({after_read}); {described}; then the ceiling check: {ceiling_reason}"
    if not ran:
        return f"under the {in_force.words()}; then the ceiling check: {ceiling_reason}"
    head = f"the estimate reached the {in_force.words()}" + (f": {why}" if why else "")
    landed = [p for p in plans if p.landed]
    if not landed:
        return f"{head}; the fold found nothing it may take; then the ceiling check: {ceiling_reason}"
    described = "; ".join(fold_sentence(p, in_force.target) for p in landed)
    return f"{head}; {described}; then the ceiling check: {ceiling_reason}"


def fold_committed(plan: FoldPlan) -> FoldCommitted:
    """The event of a landed ``plan``: its stages and sizes (the cost model's figures are the caller's to add)."""
    return FoldCommitted(
        stages=list(plan.stages),
        agent_marks=plan.agent_marks,
        host_stages=plan.host_stages,
        tokens_freed=max(0, plan.estimate_before - plan.estimate_after),
        target_reached=plan.target_reached,
        estimate_before=plan.estimate_before,
        estimate_after=plan.estimate_after,
    )


def inherited_sentence(plan: FoldPlan) -> str:
    """A child's fold of the round its emitter was to fold next (:mod:`actors.inherit_fold`), in words."""
    return (
        "the inherited view folded as its emitter's next request would: the emitter's last request carried its "
        "newest round fresh (no cache mark after it) to fold it once read; "
        f"fold {plan.fold_id} took {'+'.join(plan.stages)}: {plan.estimate_before:,} -> {plan.estimate_after:,} tokens"
    )


@attrs.frozen
class FoldRun:
    """What the folds before one send did (for the decision event)."""

    plans: tuple[FoldPlan, ...] = ()
    ran: bool = False
    why: str = ""
    """The cost model's reason when it chose to fold (empty under the fixed fractions)."""
    in_force: InForce | None = None
    """The fold line and target in force before the send (None: the branch does not fold)."""
    after_read: str = ""
    """Why rounds were folded once read before the send (empty: none was)."""
    inherited: FoldPlan | None = None
    """A child's fold, before its first request, of the round its emitter was to fold next (None: none landed)."""

    @property
    def _all(self) -> tuple[FoldPlan, ...]:
        return self.plans if self.inherited is None else (self.inherited, *self.plans)

    @property
    def stages(self) -> list[str]:
        return [stage for plan in self._all for stage in plan.stages]

    @property
    def folded_ids(self) -> list[str]:
        return [mid for plan in self._all for mid in plan.folded_ids]

    def reason(self, ceiling_reason: str) -> str:
        """The decision's reason: the line and target in force, what the folds did and why they stopped, the send."""
        said = folds_reason(ceiling_reason, self.plans, self.in_force, self.why, self.ran, self.after_read)
        if self.inherited is None:
            return said
        return f"{inherited_sentence(self.inherited)}; {said}"
