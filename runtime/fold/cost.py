"""Fold by cost: when to commit a fold and how deep, from prices (pure).

A commit rewrites everything after the first folded message: the cached suffix from
there on is written again at the write price, plus the summary's output. Not
committing carries the unfolded tokens on every request at the read price. With the
context at ``a`` tokens right after a commit, growing by ``g`` tokens a request, and
the next commit at ``b``, one cycle of ``H = (b - a) / g`` requests costs

    F + w x R(a)  +  rho x (a + b) / 2 x H        (rewrite, then carrying)

where ``F`` is the commit's fixed cost (summary output at the output price), ``w`` the
write price, ``R(a)`` the tokens the commit rewrites and ``rho`` the read price; the
new tokens every request appends cost the same under every policy and drop out. Per
request that is ``J(a, b) = (F + w R(a)) g / (b - a) + rho (a + b) / 2``:

- **when**: for a given depth, ``J`` is least at ``b* = a + sqrt(2 g (F + w R(a)) / rho)``;
  the commit line is ``min(b*, hard)``, where ``hard`` is the ceiling's hard limit (the
  last size a request may have with room for the next round: ``ceiling x (1 - margin)``
  less one round's growth). Past the line, commit now; under it, wait.
- **how deep**: among the candidate depths the planner can legally reach (the lossless
  guarantees and the protected parts are the planner's; each candidate says where the
  fold would leave the context and how much it rewrites), take the one with the least
  ``J`` at its own best line; a candidate that does not bring the context under the
  hard limit is never taken while one that does exists.

Three things the cycle above leaves out, priced or bounded since (issue 19, second pass):

- **recalls**: a fold sends the model to ``read_result`` for what it needs again. Each recall is an
  extra request carrying the context at the read price, its call at the output price and its page
  written once; how often a candidate causes one comes from the branch's own recalls and how far
  back each original stood (:class:`RecallProfile`). With recalls seen, ``J`` gains
  ``rate(K, b - a) x recall cost`` and the line is searched rather than given by ``b*``.
- **the floor**: no candidate lands below the prefix a fold keeps; one assumed to land there
  rewrote nothing and looked free, and the model committed every request or two (``fits``;
  ``staged-curl`` at token factor 1.37).
- **the ceiling's need**: how long the work goes on is unknown; it is estimated as long again as it
  has gone, and under the hard limit a commit waits while ``tokens + g x elapsed`` stays under it
  (:func:`decide_fold`).

Prices are in base-input-token units (fresh input 1); :func:`prices_for` builds them
from a model's price tier. ``fold_policy = "fixed"`` keeps the fixed fractions
(:class:`runtime.fold.settings.FoldSettings`); this module is what ``"cost"`` asks.
Nothing here reads a clock or does I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs

from runtime.models.pricing import BIT_CACHE_READ, BIT_CACHE_WRITE_1H, BIT_CACHE_WRITE_5M, PriceTier
from runtime.values.usage import Usage


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}: {value!r} is not a positive finite number")


def _non_negative(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}: {value!r} is not a non-negative finite number")


@attrs.frozen
class CostPrices:
    """Prices per token relative to fresh input: cache read, five-minute write, output."""

    read: float = BIT_CACHE_READ
    write: float = BIT_CACHE_WRITE_5M
    output: float = 5.0

    def __attrs_post_init__(self) -> None:
        _positive("CostPrices.read", self.read)
        _positive("CostPrices.write", self.write)
        _non_negative("CostPrices.output", self.output)


def prices_for(tier: PriceTier) -> CostPrices:
    """The relative prices of ``tier``; ValueError naming the price that is unknown."""
    if tier.input is None or tier.input <= 0:
        raise ValueError("prices_for: the tier has no input price, so no relative price can be formed")
    missing = [name for name in ("cache_read", "cache_write_5m", "output") if getattr(tier, name) is None]
    if missing:
        raise ValueError(f"prices_for: the tier has no {', '.join(missing)} price; the cost policy needs it")
    return CostPrices(
        read=float(tier.cache_read) / tier.input,  # type: ignore[arg-type]
        write=float(tier.cache_write_5m) / tier.input,  # type: ignore[arg-type]
        output=float(tier.output) / tier.input,  # type: ignore[arg-type]
    )


def prices_or_default(tier: PriceTier | None) -> CostPrices:
    """``tier``'s relative prices, or the defaults (read 0.1, write 1.25, output 5: every Claude
    model's ratios in the pricing table) when the model is not priced or a price is unknown."""
    if tier is None:
        return CostPrices()
    try:
        return prices_for(tier)
    except ValueError:
        return CostPrices()


@attrs.frozen
class Candidate:
    """One legal fold depth: the context after it, the tokens it rewrites, its summary output."""

    label: str
    tokens_after: int
    rewrite_tokens: int
    summary_output_tokens: int = 0
    target: float | None = None
    """The share of the ceiling the planner is asked to fold to (None: a depth named otherwise)."""
    tail_tokens: int | None = None
    """What the fold keeps after its kept prefix (what a recall may still find in view); None: the rewrite."""

    @property
    def tail(self) -> int:
        return self.rewrite_tokens if self.tail_tokens is None else self.tail_tokens

    def __attrs_post_init__(self) -> None:
        _non_negative("Candidate.tokens_after", self.tokens_after)
        _non_negative("Candidate.rewrite_tokens", self.rewrite_tokens)
        _non_negative("Candidate.summary_output_tokens", self.summary_output_tokens)
        if self.rewrite_tokens > self.tokens_after:
            raise ValueError(
                f"Candidate {self.label!r}: rewrites {self.rewrite_tokens} tokens of a context of {self.tokens_after}"
            )


RECALL_CALL_TOKENS = 60
"""Output tokens a recall's own call is expected to take (a ``read_result`` call and its framing)."""


@attrs.frozen
class RecallProfile:
    """What reading folded material back has cost this branch: the recalls it made, and how far back.

    ``distances`` are, for each ``read_result`` the branch sent, the tokens of content that had
    entered the view after the original and before the recall; ``requests`` the main requests over
    which they were seen; ``page_tokens`` the mean page a recall brought back. A fold that keeps a
    verbatim tail of ``K`` tokens and runs ``span`` tokens to its next commit leaves a recall at
    distance ``d`` out of view for the share ``clamp((d - K) / span, 0, 1)`` of its cycle (the
    original was folded if it was more than ``K`` back at the commit, which came uniformly ``0`` to
    ``span`` tokens before): the expected recalls per request are the sum of those shares over
    ``requests``. Only recalls that missed the view are seen (one served from view leaves no trace), so
    a shallow policy under-counts what a deeper one would cause; the count rises once it goes deeper.
    """

    requests: int
    distances: tuple[float, ...] = ()
    page_tokens: float = 0.0
    call_tokens: float = RECALL_CALL_TOKENS

    def __attrs_post_init__(self) -> None:
        if isinstance(self.requests, bool) or not isinstance(self.requests, int) or self.requests < 1:
            raise ValueError(f"RecallProfile.requests: {self.requests!r} is not a positive integer")
        for distance in self.distances:
            _non_negative("RecallProfile.distances", distance)
        _non_negative("RecallProfile.page_tokens", self.page_tokens)
        _non_negative("RecallProfile.call_tokens", self.call_tokens)

    def rate(self, tail: float, span: float) -> float:
        """Expected recalls per request for a fold keeping ``tail`` tokens and running ``span`` tokens."""
        if span <= 0:
            return float(len(self.distances)) / self.requests
        missed = sum(min(1.0, max(0.0, (d - tail) / span)) for d in self.distances)
        return missed / self.requests

    def cost(self, carried: float, prices: CostPrices) -> float:
        """One recall, in BIT: an extra request carrying ``carried`` tokens at the read price, its call
        at the output price, and its page written once."""
        return prices.read * carried + prices.output * self.call_tokens + prices.write * self.page_tokens


@attrs.frozen
class CostState:
    """Where the branch stands: its context, its expected growth per request, its ceiling."""

    tokens: int
    growth: float
    ceiling: int
    margin: float = 0.045

    def __attrs_post_init__(self) -> None:
        _non_negative("CostState.tokens", self.tokens)
        _positive("CostState.growth", self.growth)
        _positive("CostState.ceiling", self.ceiling)
        if not 0 <= self.margin < 1:
            raise ValueError(f"CostState.margin: {self.margin!r} is not in [0, 1)")

    @property
    def hard(self) -> float:
        """The largest context that still leaves one round of growth under the ceiling's margin."""
        return self.ceiling * (1 - self.margin) - self.growth


@attrs.frozen
class CostDecision:
    """What the cost model decided, with the figures it decided on (recorded in FoldCommitted)."""

    commit: bool
    reason: str
    choice: Candidate | None = None
    line: float | None = None
    predicted_per_request: float | None = None
    predicted_commit_cost: float | None = None
    horizon_requests: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "reason": self.reason,
            "choice": None if self.choice is None else self.choice.label,
            "line": None if self.line is None else round(self.line, 3),
            "predicted_per_request_bit": _round(self.predicted_per_request),
            "predicted_commit_bit": _round(self.predicted_commit_cost),
            "horizon_requests": _round(self.horizon_requests),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def commit_cost(candidate: Candidate, prices: CostPrices) -> float:
    """What landing ``candidate`` costs once: its rewrite at the write price and its summary's output."""
    return prices.write * candidate.rewrite_tokens + prices.output * candidate.summary_output_tokens


def best_line(
    candidate: Candidate, state: CostState, prices: CostPrices, recalls: RecallProfile | None = None
) -> float:
    """Where the next commit should come after landing ``candidate``: ``min(b*, hard)``.

    With recalls seen (``recalls`` has distances) the line is the least ``J`` over
    :data:`LINE_POINTS` evenly spaced lines from one round after the fold to the hard limit
    (recalls make ``J`` lose its closed form), ``b*`` among them.
    """
    room = math.sqrt(2 * state.growth * commit_cost(candidate, prices) / prices.read)
    # At least one request between commits: a free commit would otherwise have no cycle to spread over.
    closed = min(candidate.tokens_after + max(room, state.growth), state.hard)
    if recalls is None or not recalls.distances:
        return closed
    low, high = candidate.tokens_after + state.growth, state.hard
    lines = [closed] + [low + (high - low) * i / (LINE_POINTS - 1) for i in range(LINE_POINTS) if high > low]
    scored = [
        (cost, line) for line in lines if (cost := per_request(candidate, line, state, prices, recalls)) is not None
    ]
    return min(scored)[1] if scored else closed


LINE_POINTS = 33
"""How many commit lines :func:`best_line` tries when recalls are priced."""


def per_request(
    candidate: Candidate, line: float, state: CostState, prices: CostPrices, recalls: RecallProfile | None = None
) -> float | None:
    """``J(a, b)`` for landing ``candidate`` and committing again at ``line``, recalls included.

    None when the span leaves no room for one request's growth: such a commit frees too
    little to run on (the lesson of commits that free nothing) and is never chosen.
    """
    span = line - candidate.tokens_after
    if span < state.growth - 1e-9 * max(1.0, state.growth):  # tolerance: line = after + growth rounds
        return None
    horizon = span / state.growth
    carried = (candidate.tokens_after + line) / 2
    cost = commit_cost(candidate, prices) / horizon + prices.read * carried
    if recalls is not None and recalls.distances:
        cost += recalls.rate(candidate.tail, span) * recalls.cost(carried, prices)
    return cost


def choose(
    candidates: Sequence[Candidate], state: CostState, prices: CostPrices, recalls: RecallProfile | None = None
) -> CostDecision:
    """Whether to commit now and which candidate to land (see the module docstring)."""
    scored: list[tuple[float, int, Candidate, float]] = []
    for index, candidate in enumerate(candidates):
        line = best_line(candidate, state, prices, recalls)
        cost = per_request(candidate, line, state, prices, recalls)
        if cost is not None:
            scored.append((cost, index, candidate, line))
    if not scored:
        if state.tokens > state.hard:
            return CostDecision(True, "over the hard limit and no candidate leaves room to run: the deepest fold")
        return CostDecision(False, "no candidate leaves room under the hard limit")
    cost, _, best, line = min(scored)
    horizon = (line - best.tokens_after) / state.growth
    figures: dict[str, Any] = {
        "choice": best,
        "predicted_per_request": cost,
        "predicted_commit_cost": commit_cost(best, prices),
        "horizon_requests": horizon,
    }
    if state.tokens > state.hard:
        return CostDecision(True, "the next round would cross the ceiling's hard limit", line=line, **figures)
    if state.tokens >= line:
        return CostDecision(True, "past the cost line: carrying costs more than the rewrite", line=line, **figures)
    return CostDecision(False, "under the cost line: carrying is cheaper than the rewrite", line=line, **figures)


def realised(read_tokens: int, write_tokens: int, output_tokens: int, prices: CostPrices) -> float:
    """What a commit's rewrite request actually cost in the same units (from its usage)."""
    for name, value in (("read_tokens", read_tokens), ("write_tokens", write_tokens), ("output_tokens", output_tokens)):
        _non_negative(name, value)
    return prices.read * read_tokens + prices.write * write_tokens + prices.output * output_tokens


def fixed_fraction_line(ceiling: int, fold_at: float) -> float:
    """The fixed policy's commit line (``fold_policy = "fixed"``), for comparison in the decision."""
    _positive("ceiling", ceiling)
    if not 0 < fold_at <= 1:
        raise ValueError(f"fold_at: {fold_at!r} is not in (0, 1]")
    return ceiling * fold_at


GROWTH_WINDOW = 8
"""How many recent request-to-request increments :class:`GrowthMeter` averages."""


@attrs.frozen
class GrowthMeter:
    """The expected growth per request: the mean of the last :data:`GROWTH_WINDOW` increments.

    A fall in size (a commit landed) starts no increment: it is a new cycle, not
    negative growth. Immutable: :meth:`observe` returns the next meter.
    """

    last: int | None = None
    increments: tuple[int, ...] = ()

    def observe(self, estimate: int) -> GrowthMeter:
        _non_negative("GrowthMeter.observe estimate", estimate)
        if self.last is None or estimate < self.last:
            return GrowthMeter(estimate, self.increments)
        return GrowthMeter(estimate, (*self.increments, estimate - self.last)[-GROWTH_WINDOW:])

    @property
    def mean(self) -> float | None:
        """The expected growth per request, or None before two requests of one cycle were seen."""
        positive = [i for i in self.increments if i > 0]
        return sum(positive) / len(positive) if positive else None


def target_candidate(
    ceiling: int, target: float, kept_prefix_tokens: int, summary_output_tokens: int, floor_tokens: int = 0
) -> Candidate:
    """The candidate the target rule describes: the context left at ``target x ceiling`` (or at
    ``floor_tokens`` when that is higher: the runtime passes the kept prefix, below which no fold lands),
    everything after the kept prefix (protected head, earlier notes) rewritten and kept as the tail,
    one summary produced."""
    _positive("ceiling", ceiling)
    _non_negative("floor_tokens", floor_tokens)
    if not 0 < target < 1:
        raise ValueError(f"target: {target!r} is not in (0, 1)")
    after = max(int(ceiling * target), int(floor_tokens))
    kept = after - min(kept_prefix_tokens, after)
    return Candidate(
        f"target {target:g}",
        tokens_after=after,
        rewrite_tokens=max(0, kept),
        summary_output_tokens=summary_output_tokens,
        target=target,
        tail_tokens=max(0, kept),
    )


COST_TARGETS = (0.6, 0.45, 0.3, 0.2, 0.1)
"""The fold depths the runtime offers the cost model, as shares of the ceiling.

Chosen on the bench's reading-20k, reading-40k, staged-64 and staged-curl (docs/bench.md):
a menu ending at 0.3 left staged-64 at 1.04x peer compaction, one ending at 0.1 at 0.67x;
0.05 made the staged workloads clip the stage result the next stage needs, re-read it
and fail. A deeper fold both rewrites and carries less, so the model takes the deepest
target that leaves room whenever one does; the menu's end is the real decision."""

SUMMARY_OUTPUT_TOKENS = 300
"""The summary output a commit is expected to produce (the summarizer asks for at most 300 words)."""

UNCACHED = CostPrices(read=1.0, write=1.0)
"""Relative prices without prompt caching: every token carried costs fresh input, nothing is rewritten."""


def decide_fold(
    *,
    tokens: int,
    growth: float,
    ceiling: int,
    margin: float,
    kept_prefix_tokens: int,
    prices: CostPrices,
    caching: bool,
    targets: Sequence[float] = COST_TARGETS,
    recalls: RecallProfile | None = None,
    elapsed_requests: int | None = None,
) -> CostDecision:
    """The cost policy's decision before one request: commit now or wait, and to which target.

    Each of ``targets`` is a candidate by :func:`target_candidate` (the context left at the target, or
    at the kept prefix when that is higher; everything after the kept prefix rewritten, one summary). Without caching
    nothing is rewritten and every carried token costs fresh input (:data:`UNCACHED`, output at
    ``prices.output``). ``recalls`` prices reading folded material back (:class:`RecallProfile`).

    **The ceiling's need** (``elapsed_requests``, the main requests of the work so far): how long the
    work will go on is not known, so it is estimated as long again as it has gone (the median of the
    remaining length when nothing else is known, Gott's delta-t argument). Under the hard limit a fold
    is committed only when the ceiling is expected to be reached within that estimate
    (``tokens + growth x elapsed >= hard``): a fold the ceiling never requires costs a summary request,
    a rewrite and the recalls it causes, and changes what the model reads, for a saving in carrying
    that the work may not last to collect.
    """
    if not caching:
        prices = attrs.evolve(UNCACHED, output=prices.output)
    # No candidate lands below the prefix a fold keeps: one assumed to land there would see a commit
    # rewriting nothing, as free.
    candidates = []
    for target in targets:
        candidate = target_candidate(
            ceiling, target, kept_prefix_tokens, SUMMARY_OUTPUT_TOKENS, floor_tokens=kept_prefix_tokens
        )
        candidates.append(candidate if caching else attrs.evolve(candidate, rewrite_tokens=0))
    state = CostState(tokens=tokens, growth=growth, ceiling=ceiling, margin=margin)
    decision = choose(candidates, state, prices, recalls)
    if decision.commit and tokens <= state.hard and elapsed_requests is not None:
        expected = tokens + growth * elapsed_requests
        if expected < state.hard:
            return attrs.evolve(
                decision,
                commit=False,
                reason=(
                    f"the ceiling is not expected to be needed: {tokens} tokens growing {growth:.0f} a request "
                    f"reach {expected:.0f} in another {elapsed_requests} requests, under the hard limit "
                    f"{state.hard:.0f}"
                ),
            )
    return decision


def predicted_cycle(decision: CostDecision, growth: float, prices: CostPrices) -> float | None:
    """What the cycle a commit starts is predicted to cost, in BIT: the commit, then each request's
    carrying, its expected recalls and its new tokens at the write price, until the next commit (None
    without a choice). The per-request figure is the decision's own (recalls included when priced)."""
    choice, line, horizon = decision.choice, decision.line, decision.horizon_requests
    if choice is None or line is None or horizon is None:
        return None
    if decision.predicted_per_request is not None:
        return horizon * (decision.predicted_per_request + prices.write * growth)
    carrying = prices.read * (choice.tokens_after + line) / 2
    return commit_cost(choice, prices) + horizon * (carrying + prices.write * growth)


def usage_cost(usage: Usage, prices: CostPrices) -> float:
    """What ``usage`` cost in BIT at ``prices``: fresh input, cache reads and writes, output."""
    return (
        usage.input_tokens
        + prices.read * usage.cache_read_input_tokens
        + prices.write * usage.cache_write_5m_tokens
        + BIT_CACHE_WRITE_1H * usage.cache_write_1h_tokens
        + prices.output * usage.output_tokens
    )
