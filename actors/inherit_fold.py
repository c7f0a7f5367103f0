"""A child inherits the fold its emitter was to make next (fold after read).

Under fold after read (:mod:`runtime.fold.after_read`) a request that carries a round's
results places no cache mark after them: the next request folds the round into a note, so
writing it to the cache would be waste (:meth:`runtime.cache.TailSkip.fold_next`). The
branch keeps those results as pending (``ContextState.fold_next``, set when the request
completes from :func:`fresh_results`). When the reply to that request spawns a child, or is
the last before a dependent inherits the view, the child's clone starts with that round
uncached: its first request would read the emitter's prefix up to the newest note and send
the round fresh (a bounded checker of the bench's emitter workload read 0.339 of its input).

So a child that took its emitter's cache (``inherited_setup = "instruction"``, the clone
keeps the emitter's ledger and the pending ids it sees) folds, before its first request,
the rounds its emitter was to fold next: the planner's ``read`` mode over the inherited
view, as the emitter's next request runs it, so the note is the one the emitter writes.
The emitter's model read those rounds; the originals stay in the record and
``read_result`` reaches them (lossless). The fold lands only when it lowers the estimate
(the planner's rule), is committed and published as any fold (``FoldCommitted``, the
decision's stages, folded ids and reason) and reads nothing but the branch's record and
state (the clone's ``fold_next``, view, delivered and protected ids), so a resumed or
replayed run folds the same bytes, on either engine (a Temporal seed carries the state).
The child then sends the prefix its emitter cached, one note, its setup and instruction.

Nothing is folded for a clone with its own stable segment (``"own"``: no ledger, it reads
nothing its emitter cached), when the child's requests are not cached, or once the child
has completed a request of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.branch import Branch, Turn
from actors.fold_words import fold_committed
from actors.inherit import inherited_cached_ids, setup_ids
from actors.publisher import Publisher
from actors.shape import RequestShape
from runtime.cache import Placement
from runtime.fold.planner import FoldInput, FoldPlan, FoldPlanner
from runtime.fold.protected import protected_ids
from runtime.fold.settings import FoldSettings
from runtime.request.compiler import Intent
from runtime.values.messages import Message, Note, ToolResult

INHERITED_CAUSE = "the emitter's pending fold once read"
"""The rewrite cause the child's fold records (its first request has no earlier prefix of its own)."""


def fresh_results(placement: Placement | None, carried: Sequence[Message]) -> frozenset[str]:
    """The tool results a request carried fresh for the next to fold: those after the newest note when
    its turn mark was skipped for ``fold_next``; empty otherwise."""
    skip = None if placement is None else placement.tail_skip
    if skip is None or skip.reason != "fold_next":
        return frozenset()
    fresh: list[str] = []
    for message in reversed(carried):
        if isinstance(message, Note):
            break
        if isinstance(message, ToolResult):
            fresh.append(message.id)
    return frozenset(fresh)


def pending_inherited(branch: Branch) -> frozenset[str]:
    """The delivered results ``branch`` inherited for its emitter's next fold, before its own first request."""
    state = branch.state
    # Cheap first (every main request asks): nothing pending, or the pending results are the branch's own
    # (past its fork), needs no walk of the view.
    if not state.fold_next or any((branch.index_of(i) or 0) >= branch.fork_length for i in state.fold_next):
        return frozenset()
    return state.fold_next & state.delivered & inherited_cached_ids(branch)


async def fold_inherited(
    turn: Turn, shape: RequestShape, intent: Intent, publish: Publisher, ceiling: int | None, caching: bool
) -> FoldPlan | None:
    """Fold what the child inherited for its emitter's next fold (see the module docstring); the landed plan, or None.

    ``ceiling`` is the operation's (only the recorded ``target_reached`` reads it:
    the read mode takes every read round whatever the target); None folds nothing.
    """
    branch = turn.branch
    if not caching or ceiling is None or not pending_inherited(branch):
        return None
    state, view = branch.state, branch.view()
    fold_input = FoldInput(
        record=branch,
        view=view,
        delivered=state.delivered,
        recovered=state.recovered,
        protected=protected_ids(state.protected_round, view) | setup_ids(branch),
        marks=(),
        settings=FoldSettings(ceiling=ceiling, caching=True),
        mode="read",
    )
    plan = FoldPlanner(fold_input, shape.measurer(intent)).start()
    if not isinstance(plan, FoldPlan):  # the read mode runs no summarized pass
        raise RuntimeError(f"the inherited fold of branch {branch.id} asked for a summary in the read mode")
    if not plan.landed:
        return None
    turn.commit_fold(plan.added, plan.view_ids, (), f"fold {plan.fold_id} ({'+'.join(plan.stages)}): {INHERITED_CAUSE}")
    await publish(fold_committed(plan))
    return plan
