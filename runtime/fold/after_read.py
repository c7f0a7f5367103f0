"""Fold a round once the model has read it, or keep a verbatim tail: the cost model's choice (pure).

Two ways to carry a branch's tool results (the profile's ``fold_tail``):

- **verbatim**: the newest rounds stay in the view as they came until the cost line
  (:func:`runtime.fold.cost.decide_fold`); each request's new tokens are written to the cache at
  the write price and carried at the read price until a commit rewrites what follows the kept
  prefix. Per request: the decision's ``J`` (carrying, the commit spread over its cycle, the recalls
  it causes) plus ``w x g`` for the new tokens written.
- **after-read** (observation masking, lossless): the request after the one that delivered a round
  folds it into a note (its calls, and each result's salient line,
  :func:`runtime.fold.notes.salient_line_of`); the originals stay in the record and ``read_result``
  reaches them. The request that carries a round fresh places no mark after it (the last mark
  stands at the newest note, :meth:`runtime.cache.TailSkip.fold_next`), so its tokens are sent once
  at the fresh price and never written. Per request: ``g`` fresh, one note written
  (:data:`NOTE_TOKENS`), the kept prefix and the notes carried at the read price, and a recall
  for every one the branch has made, each priced as :meth:`RecallProfile.cost` prices it.

Every carried token of after-read stays in the cache untouched (a fold only replaces what no mark
reached), so it has no commit to spread. What it leaves out: the notes grow a note a round, and a
reset folds them once they pass their share of the ceiling (the planner's), which is priced as
the verbatim policy's commits are not (rare: a note is about :data:`NOTE_TOKENS`). Recalls seen under
a verbatim tail are those beyond the tail, so they under-count what after-read causes by the rounds
the tail held; the salient line answers some, and the profile counts what after-read really caused
once it runs, so the choice corrects itself from the record.
"""

from __future__ import annotations

from typing import Literal

import attrs

from runtime.fold.cost import CostDecision, CostPrices, RecallProfile

FoldTail = Literal["cost", "verbatim", "after-read"]
FOLD_TAILS: tuple[FoldTail, ...] = ("cost", "verbatim", "after-read")
"""The profile's ``fold_tail`` values: the cost model chooses (default), always verbatim, always after-read."""

NOTE_TOKENS = 93
"""Tokens a one-round note is expected to take: its header (the fold id), the call line and a salient
line of at most 160 characters. Measured, not fitted: the one-round notes of the bench's runs average
68 tokens on reading-40k and 93 on staged-64 (o200k); the larger is taken."""


@attrs.frozen
class TailChoice:
    """Which tail the cost model chose, with both per-request figures (BIT, output left out)."""

    tail: Literal["verbatim", "after-read"]
    verbatim_bit: float | None
    after_read_bit: float

    def to_json(self) -> dict[str, object]:
        return {
            "tail": self.tail,
            "verbatim_bit": None if self.verbatim_bit is None else round(self.verbatim_bit, 3),
            "after_read_bit": round(self.after_read_bit, 3),
        }


def after_read_per_request(
    *, growth: float, carried: float, prices: CostPrices, caching: bool, recalls: RecallProfile | None
) -> float:
    """One after-read request, in BIT: ``growth`` fresh, a note written, ``carried`` read, its recalls.

    Without caching the note and the carried tokens are fresh input too.
    """
    read, write = (prices.read, prices.write) if caching else (1.0, 1.0)
    cost = growth + write * NOTE_TOKENS + read * carried
    if recalls is not None and recalls.distances:
        every = len(recalls.distances) / recalls.requests
        cost += every * recalls.cost(carried, attrs.evolve(prices, read=read, write=write))
    return cost


def choose_tail(
    decision: CostDecision,
    *,
    growth: float,
    kept_tokens: float,
    prices: CostPrices,
    caching: bool,
    recalls: RecallProfile | None,
) -> TailChoice:
    """After-read when it costs less per request than the verbatim tail the decision priced.

    ``kept_tokens`` is what after-read carries: the prefix a fold keeps (the protected first round,
    the notes). The verbatim figure is the decision's ``J`` plus ``growth`` written; a decision with
    no figure (no candidate leaves room) leaves after-read the only one priced, and it is taken.
    """
    after = after_read_per_request(growth=growth, carried=kept_tokens, prices=prices, caching=caching, recalls=recalls)
    if decision.predicted_per_request is None:
        return TailChoice("after-read", None, after)
    write = prices.write if caching else 1.0
    verbatim = decision.predicted_per_request + write * growth
    return TailChoice("after-read" if after < verbatim else "verbatim", verbatim, after)


def release_first_round(*, size: float, rewritten: float, elapsed_requests: int, prices: CostPrices) -> bool:
    """Whether after-read should release the protected first round (fold it as any round).

    Kept, the round's ``size`` tokens are read on every request; how long the work goes on is not
    known, so as long again as it has gone (``elapsed_requests``, the median estimate the ceiling's
    need uses, :func:`runtime.fold.cost.decide_fold`). Released, the cache from the round on is lost
    once: what follows it (``rewritten``: the notes after it) is written again, with the round's
    own note. Release when carrying costs more: ``read x size x elapsed > write x (rewritten + note)``.
    """
    return prices.read * size * elapsed_requests > prices.write * (rewritten + NOTE_TOKENS)
