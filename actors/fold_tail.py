"""Fold after read on the send path: what the read mode folds, why, and the protected round's release.

The pure choice of tail is :func:`runtime.fold.after_read.choose_tail`; :class:`actors.folding.Folding`
asks it before each send and, under after-read, uses these: whether a read round waits to be folded
(:func:`read_round_waiting`), the words a decision's reason gives (:func:`after_read_words`), and the
release of the protected first round when carrying it costs more than folding it
(:func:`release_protected_round`). Every input comes from the branch's record and view.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from actors.branch import Turn
from runtime.fold.after_read import FoldTail, TailChoice, release_first_round
from runtime.fold.cost import CostPrices
from runtime.fold.measurer import Measurer
from runtime.fold.protected import round_end_in_view
from runtime.values.messages import Message, Note, ToolResult


def read_round_waiting(view: Sequence[Message], delivered: frozenset[str] | set[str]) -> bool:
    """Whether a delivered round stands after the newest note (what the planner's ``read`` mode folds)."""
    for message in reversed(view):
        if isinstance(message, Note):
            return False
        if isinstance(message, ToolResult) and message.clipped_from is None and message.id in delivered:
            return True
    return False


def after_read_words(tail: TailChoice | None, setting: FoldTail) -> str:
    """Why rounds fold once read: the setting, or the cost model's two per-request figures."""
    if tail is None or setting == "after-read":
        return 'fold_tail = "after-read"'
    return f"cost model: {tail.after_read_bit:,.0f} BIT a request against {tail.verbatim_bit or 0:,.0f} verbatim"


def release_protected_round(
    turn: Turn, view: Sequence[Message], measurer: Measurer, *, kept: int, elapsed: int, prices: CostPrices, now: float
) -> None:
    """Under after-read, release the protected first round when carrying it costs more than folding it
    (:func:`runtime.fold.after_read.release_first_round`); recorded with its rewrite cause, as a
    ceiling's release is (:func:`runtime.fold.protected.revisit`).

    ``kept`` is the estimate of the prefix a fold keeps (up to the newest note); what follows the round
    in it is what the release rewrites.
    """
    current = turn.branch.state.protected_round
    if current is None or not current.included:
        return
    ids = [m.id for m in view]
    end = round_end_in_view(current, ids)
    if end is None:
        return
    rewritten = max(0, kept - measurer.estimate(view[: ids.index(end) + 1]))
    if not release_first_round(size=current.size, rewritten=rewritten, elapsed_requests=elapsed, prices=prices):
        return
    released = attrs.evolve(current, included=False, decided_at=float(now))
    with turn.batch():
        turn.protect_first_round(released)
        turn.explain_rewrite(
            f"protected first round released: folded once read, its {current.size} tokens carried for "
            f"another {elapsed} requests cost more than rewriting the {rewritten} tokens after it"
        )
