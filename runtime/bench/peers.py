"""Compaction as the peers run it, replayed over a workload's append-only request sequence (pure).

The ``compaction`` strategy the harness runs is foldline's own summarize-and-restart
(:func:`runtime.fold.planner`'s compaction pass): small extractive summaries and a
summary request that carries only the span. The peers run compaction differently,
and the parameters that decide its price are documented (or not) as follows:

- **trigger**: Claude Code compacts at ``window - min(max_output, 20k) - 13k``
  (``AUTOCOMPACT_BUFFER_TOKENS = 13_000``, ``COMPACT_MAX_OUTPUT_TOKENS = 20_000`` in
  ``src/services/compact/autoCompact.ts``, as read in
  https://juejin.cn/post/7648915999019466761 and
  https://juejin.cn/post/7646408175775711232): 167k of a 200k window, a share of
  0.835. Codex compacts at a configurable ``model_auto_compact_token_limit``
  (0.95 of its effective window by default, https://github.com/openai/codex/issues/9429;
  the issue this module answers reads 70% to 98% across versions); opencode at
  ``context - reserved`` (reserve 20k by default,
  https://docs.rs/behest-runtime/latest/behest_runtime/compaction/overflow/constant.COMPACTION_BUFFER.html,
  ~85% of a 200k window, https://github.com/quickbeard/codev-hub/pull/171). The bench's
  ceilings (20k to 100k) are below the fixed buffers, so the formulas cannot apply
  literally; the replay uses Claude Code's share, :data:`TRIGGER_SHARE`, of the ceiling.
- **what the summary request sends, and whether it reads the cache**: Claude Code's
  summary request continues the conversation (same system, tools and messages, the
  summary instruction appended), so its prefix is read from the cache (``hit``).
  opencode's sends no system text and no tools, so it never reads the cache and writes
  the whole prompt (https://github.com/anomalyco/opencode/issues/25120,
  https://github.com/anomalyco/opencode/issues/43249,
  https://github.com/anomalyco/opencode/issues/48542: 70 compactions, 1,278,055 tokens
  written, 0 read); so does Codex's local compaction, which omits the tool specs
  (https://github.com/openai/codex/issues/37305). That is the ``miss`` variant.
- **summary length**: nobody documents it precisely. Claude Code caps it at 20k output
  tokens; opencode's measured summaries above ran 1,486 to 3,049 output tokens; seed
  004's native compactions billed $0.54-$0.58 each. The replay runs 1k, 4k and 16k.
- **what is kept**: Pi's native compaction restarts from the summary alone (seed 004:
  "369.0k to 0k"); Claude Code re-attaches up to 5 recently read files (50k tokens,
  ``POST_COMPACT_TOKEN_BUDGET``); Codex keeps recent user messages. The replay keeps the
  system text, tools and task (the workload's first request) plus the summary, plus
  ``kept_tokens`` of the newest conversation (0 by default: the cheapest choice for
  compaction, so the comparison errs on compaction's side).

The replay walks each branch's append-only requests (the ``naive`` run's: total input
and output per request, the server's counts) and keeps the compacting session's
context size ``c``: each request reads from the cache what the previous request of
the branch carried, writes the rest at the five-minute price and produces the naive
run's output; when ``c`` would pass ``trigger_share x ceiling`` it first sends the
summary request (at most ``ceiling`` tokens of input: the peers retry a too-long
summary request with the oldest messages dropped) and restarts from the kept context.
A variant whose kept context does not fit under the trigger is reported as infeasible,
never priced. What the replay leaves out is on compaction's side: the summary
instruction's own tokens, and the reads an agent repeats for facts the summary lost.
Nothing here reads a clock or does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from runtime.models.pricing import ZERO_COST, Cost, PricingTable
from runtime.values.usage import Usage

TRIGGER_SHARE = round((200_000 - 20_000 - 13_000) / 200_000, 6)
"""Claude Code's trigger as a share of its 200k window with max output >= 20k (0.835)."""

SUMMARY_LENGTHS = (1_000, 4_000, 16_000)
"""The summary lengths (output tokens) the sensitivity table runs."""

CACHE_MODES: tuple[Literal["hit", "miss"], ...] = ("hit", "miss")
"""Whether the summary request reads the conversation's cached prefix."""

HEADLINE = "hit/4k"
"""The variant the issue's targets compare against."""


@attrs.frozen
class PeerParams:
    """One compaction variant."""

    summary_tokens: int
    summary_cache: Literal["hit", "miss"]
    trigger_share: float = TRIGGER_SHARE
    kept_tokens: int = 0

    def __attrs_post_init__(self) -> None:
        if self.summary_tokens <= 0:
            raise ValueError(f"PeerParams.summary_tokens: {self.summary_tokens!r} is not positive")
        if self.summary_cache not in CACHE_MODES:
            raise ValueError(f"PeerParams.summary_cache: {self.summary_cache!r} is not one of {CACHE_MODES}")
        if not 0 < self.trigger_share <= 1:
            raise ValueError(f"PeerParams.trigger_share: {self.trigger_share!r} is not in (0, 1]")
        if self.kept_tokens < 0:
            raise ValueError(f"PeerParams.kept_tokens: {self.kept_tokens!r} is negative")

    @property
    def label(self) -> str:
        return f"{self.summary_cache}/{self.summary_tokens // 1000}k"

    def to_json(self) -> dict[str, Any]:
        return {
            "summary_tokens": self.summary_tokens,
            "summary_cache": self.summary_cache,
            "trigger_share": self.trigger_share,
            "kept_tokens": self.kept_tokens,
        }


VARIANTS: tuple[PeerParams, ...] = tuple(
    PeerParams(summary_tokens=n, summary_cache=mode) for mode in CACHE_MODES for n in SUMMARY_LENGTHS
)
"""The sensitivity table's variants, in table order."""


@attrs.frozen
class Step:
    """One append-only request of a branch (of node ``node``): its total input and output (the server's counts)."""

    branch: str
    node: str | None
    input_tokens: int
    output_tokens: int


@attrs.frozen
class PeerFigures:
    """What a compaction variant cost on one workload (``feasible`` False: not priced, ``note`` says why)."""

    params: PeerParams
    feasible: bool
    note: str = ""
    requests: int = 0
    summaries: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0
    bit: float = 0.0
    usd: float | None = None
    peak_request_tokens: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.params.label,
            "params": self.params.to_json(),
            "feasible": self.feasible,
            "note": self.note,
            "requests": self.requests,
            "summary_requests": self.summaries,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
            "output_tokens": self.output,
            "bit": round(self.bit, 3),
            "usd": None if self.usd is None else round(self.usd, 6),
            "peak_request_tokens": self.peak_request_tokens,
        }


class Infeasible(Exception):
    """The variant cannot run under this ceiling (the kept context crosses the trigger)."""


@attrs.define(eq=False)
class _Ledger:
    pricing: PricingTable
    model: str
    cost: Cost = ZERO_COST
    requests: int = 0
    summaries: int = 0
    read: int = 0
    write: int = 0
    output: int = 0
    peak: int = 0

    def charge(self, read: int, write: int, output: int, *, summary: bool = False) -> None:
        self.cost = self.cost + self.pricing.cost(
            Usage(cache_read_input_tokens=read, cache_write_5m_tokens=write, output_tokens=output), self.model
        )
        self.requests += 1
        self.summaries += int(summary)
        self.read += read
        self.write += write
        self.output += output
        self.peak = max(self.peak, read + write)


def _replay_branch(
    steps: Sequence[Step], base: int, ceiling: int | None, params: PeerParams, ledger: _Ledger, cached: int
) -> None:
    trigger = float("inf") if ceiling is None else params.trigger_share * ceiling
    size = 0
    previous = 0
    for i, step in enumerate(steps):
        size = step.input_tokens if i == 0 else size + (step.input_tokens - previous)
        previous = step.input_tokens
        if ceiling is not None and size > trigger:
            carried = min(size, ceiling)
            read = min(cached, carried) if params.summary_cache == "hit" else 0
            ledger.charge(read, carried - read, params.summary_tokens, summary=True)
            size = min(base, size) + params.summary_tokens + min(params.kept_tokens, max(0, size - base))
            cached = min(base, cached)
            if size > trigger:
                raise Infeasible(
                    f"the kept context ({size:,} tokens: system, tools and task, the "
                    f"{params.summary_tokens:,}-token summary) crosses the trigger ({trigger:,.0f} tokens)"
                )
        read = min(cached, size)
        ledger.charge(read, size - read, step.output_tokens)
        cached = size


def replay(
    steps: Sequence[Step],
    ceilings: Mapping[str | None, int | None],
    params: PeerParams,
    pricing: PricingTable,
    model: str,
) -> PeerFigures:
    """Price ``params``' compaction over ``steps`` (every branch's requests, in order).

    ``ceilings`` maps each node to its ceiling (None: it never compacts); a step of a
    node not in it raises ValueError.
    """
    for node, ceiling in ceilings.items():
        if ceiling is not None and ceiling <= 0:
            raise ValueError(f"replay: node {node!r}'s ceiling {ceiling!r} is not positive")
    if not steps:
        return PeerFigures(params, feasible=False, note="the workload sent no requests")
    unknown = sorted({str(s.node) for s in steps if s.node not in ceilings})
    if unknown:
        raise ValueError(f"replay: no ceiling given for node(s) {', '.join(unknown)}")
    by_branch: dict[str, list[Step]] = {}
    for step in steps:
        by_branch.setdefault(step.branch, []).append(step)
    base = min(branch_steps[0].input_tokens for branch_steps in by_branch.values())
    ledger = _Ledger(pricing, model)
    try:
        for n, branch_steps in enumerate(by_branch.values()):
            # A later branch reads the shared system, tools and task from the cache the first one wrote.
            ceiling = ceilings[branch_steps[0].node]
            _replay_branch(branch_steps, base, ceiling, params, ledger, cached=0 if n == 0 else base)
    except Infeasible as exc:
        return PeerFigures(params, feasible=False, note=str(exc))
    return PeerFigures(
        params,
        feasible=True,
        requests=ledger.requests,
        summaries=ledger.summaries,
        cache_read=ledger.read,
        cache_write=ledger.write,
        output=ledger.output,
        bit=ledger.cost.bit,
        usd=ledger.cost.usd,
        peak_request_tokens=ledger.peak,
    )


def replay_all(
    steps: Sequence[Step],
    ceilings: Mapping[str | None, int | None],
    pricing: PricingTable,
    model: str,
    variants: Sequence[PeerParams] = VARIANTS,
) -> tuple[PeerFigures, ...]:
    """Every variant of the sensitivity table over ``steps``."""
    return tuple(replay(steps, ceilings, params, pricing, model) for params in variants)
