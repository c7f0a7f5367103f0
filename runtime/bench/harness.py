"""Running a workload under a strategy, and measuring what came of it.

:func:`run_workload` applies a strategy to a workload's scenario, gives every
node a :class:`~runtime.bench.reader.ReaderPolicy` over its script, runs the
flow against the provider the caller names (``"simulated"``: the loopback
Anthropic server through the official SDK; ``"scripted"``: the same server
in process) and returns a :class:`RunMetrics` built from three sources only:

- the run's report (:meth:`runtime.runtime.Runtime.report`, rebuilt from
  events; its usage is what the simulated server reported);
- the run's events, for what the report does not count: requests over their
  ceiling, by our estimate and by the server's count;
- the reader policies' logs, whose recalls are judged here against the
  facts' real values.

:func:`run_workload_set` runs one workload under every strategy asked for,
always running ``naive`` (the append-only sequence) to compute the
workload's lower bound from the payloads it sends.
The virtual clock does not advance, so cache lifetimes never expire; time
is not what the benchmark compares.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from actors.tools import ToolRegistry
from runtime.bench.cost_strategy import ProfileChoice, cost_strategy
from runtime.bench.facts import fact_value
from runtime.bench.floor import FloorFigures, FloorTap, FloorTrace, lossless_floor
from runtime.bench.lower_bound import BoundFigures, LowerBound
from runtime.bench.model_choice import priced_model as priced_model  # re-exported for the CLI
from runtime.bench.model_choice import with_model as with_model
from runtime.bench.ordering import OrderedSends
from runtime.bench.peers import VARIANTS, PeerFigures, PeerParams, Step, replay_all
from runtime.bench.reader import OUTCOMES, ReaderPolicy, RecallOutcome
from runtime.bench.server_view import ServerView
from runtime.bench.strategies import BASELINE, STRATEGIES, Strategy, StrategyNotBuilt
from runtime.bench.tools import BENCH_TOOLS, facts_printed
from runtime.config import Scenario
from runtime.errors import ConfigError, FoldlineError
from runtime.fold.cost import CostPrices, prices_for
from runtime.models.pricing import PricingTable
from runtime.providers.factory import open_provider
from runtime.runtime import Runtime
from runtime.scenarios.run import build_flow
from runtime.scripted.policies import Policy, PolicyRegistry, Reply
from runtime.sim.clock import ManualClock
from runtime.sim.summary_policy import FoldSummaryPolicy
from runtime.sim.tokens import SimTokenCounter
from signals.bus import Gap
from signals.envelope import Event

CLOCK_START = 1_000_000.0
"""Where every run's virtual clock stands (it does not move)."""


class EventsLost(FoldlineError):
    """The bench's subscription dropped events, so a run's figures cannot be trusted."""


@attrs.define(eq=False)
class EventTally:
    """Per-request figures the report does not keep, from a run's events (a bus handler)."""

    ceilings: dict[str, int] = attrs.field(factory=dict)
    estimates: dict[str, int] = attrs.field(factory=dict)
    reported: dict[str, int] = attrs.field(factory=dict)
    summaries: int = 0
    """Side requests sent (a fold's or a compaction's summary), retries not counted."""
    finished: bool = False
    side: set[str] = attrs.field(factory=set)
    steps: list[Step] = attrs.field(factory=list)
    """Every main request's total input and output, in the order the responses came (for the peer replay)."""
    output_bytes: dict[str, int] = attrs.field(factory=dict)
    """Each tool call's result size in bytes, by call id."""

    def feed(self, item: Event | Gap) -> None:
        """Take one item of the bench's subscription (``block``: a gap would mean lost figures)."""
        if isinstance(item, Gap):
            raise EventsLost(f"the bench's event handler lost {item.count} event(s); its figures would be wrong")
        data = item.data
        if item.type == "ContextDecision" and data.get("sent") and item.request_id is not None:
            if data.get("ceiling") is not None:
                self.ceilings[item.request_id] = int(data["ceiling"])
            self.estimates[item.request_id] = int(data.get("estimate_after") or 0)
        elif item.type == "RequestSent" and data.get("intent") == "side":
            if data.get("attempt") == 1:
                self.summaries += 1
            if item.request_id is not None:
                self.side.add(item.request_id)
        elif item.type == "ResponseReceived" and item.request_id is not None:
            usage = data["usage"]
            total = (
                int(usage["input_tokens"])
                + int(usage["cache_read_input_tokens"])
                + int(usage["cache_write_5m_tokens"])
                + int(usage["cache_write_1h_tokens"])
            )
            self.reported[item.request_id] = total
            if item.request_id not in self.side:
                branch = item.request_id.rsplit(":", 1)[0]
                self.steps.append(Step(branch, item.node_id, total, int(usage["output_tokens"])))
        elif item.type == "ToolCallFinished":
            self.output_bytes[str(data["call_id"])] = int(data["output_bytes"])
        elif item.type == "RunFinished":
            self.finished = True

    def over_ceiling(self) -> tuple[int, int]:
        """Requests sent over their ceiling: ``(by our estimate, by the server's count)``."""
        by_estimate = sum(1 for rid, c in self.ceilings.items() if self.estimates.get(rid, 0) > c)
        by_server = sum(1 for rid, c in self.ceilings.items() if self.reported.get(rid, 0) > c)
        return by_estimate, by_server


@attrs.define(eq=False)
class TappedPolicy:
    """A policy that shows every payload to ``tap`` before its inner policy answers."""

    inner: Policy
    tap: Callable[[Mapping[str, Any]], object]

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        self.tap(payload)
        return self.inner.respond(payload)


@attrs.frozen
class ProbeTally:
    """Recalls by how they were answered; ``wrong`` counts answers with a wrong value (also in ``failed``)."""

    view: int = 0
    read_result: int = 0
    rerun: int = 0
    failed: int = 0
    wrong: int = 0

    @classmethod
    def judge(cls, outcomes: Sequence[RecallOutcome]) -> ProbeTally:
        counts = dict.fromkeys(OUTCOMES, 0)
        wrong = 0
        for outcome in outcomes:
            if outcome.outcome != "failed" and outcome.value != fact_value(outcome.fact):
                wrong += 1
                counts["failed"] += 1
            else:
                counts[outcome.outcome] += 1
        return cls(counts["view"], counts["read_result"], counts["rerun"], counts["failed"], wrong)

    @property
    def total(self) -> int:
        return self.view + self.read_result + self.rerun + self.failed

    @property
    def without_rerun(self) -> float | None:
        """The share answered without re-running a tool (from view or after ``read_result``); None: no recalls."""
        return (self.view + self.read_result) / self.total if self.total else None

    def to_json(self) -> dict[str, int]:
        return attrs.asdict(self)


@attrs.frozen
class RunMetrics:
    """What one workload under one strategy cost and did (see the module docstring for sources)."""

    workload: str
    strategy: str
    status: str
    nodes: Mapping[str, int]
    requests: int
    usage: Mapping[str, int]
    cost_bit: float
    cost_usd: float | None
    output_priced: bool
    cached_share: float
    peak_request_tokens: int
    refusals: int
    notices: int
    folds: int
    fold_commits: int
    rewrites_explained: int
    rewrites_unexplained: int
    bytes_unrecoverable: int
    over_ceiling_estimate: int
    over_ceiling_reported: int
    probes: ProbeTally
    keys: ProbeTally
    summaries: int
    wall_s: float
    children_first_cached_share: Mapping[str, float] = attrs.field(factory=dict)
    """Each spawned child's first request: the share of its input read from the cache (its emitter's prefix)."""
    steps: tuple[Step, ...] = attrs.field(default=(), repr=False)
    """Each main request's total input and output (the peer replay's input; not in the JSON)."""
    bytes_cleared_by_server: int = 0
    """Tool-result bytes Anthropic's server-side context management took out of the model's view for good."""

    @property
    def bytes_lost(self) -> int:
        """Bytes the model can no longer see or read back: the runtime's unrecoverable plus the server's cleared."""
        return self.bytes_unrecoverable + self.bytes_cleared_by_server

    @property
    def fresh_input(self) -> int:
        """Uncached input as the API reports it (``input_tokens``: after the last cache mark)."""
        return int(self.usage["input_tokens"])

    @property
    def new_input(self) -> int:
        """Input the provider did not read from its cache: fresh input plus cache writes."""
        return self.fresh_input + int(self.usage["cache_write_5m_tokens"]) + int(self.usage["cache_write_1h_tokens"])

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "strategy": self.strategy,
            "status": self.status,
            "nodes": dict(self.nodes),
            "requests": self.requests,
            "usage": dict(self.usage),
            "cost": {"bit": round(self.cost_bit, 3), "usd": self.cost_usd, "output_priced": self.output_priced},
            "cached_share": self.cached_share,
            "fresh_input_tokens": self.fresh_input,
            "new_input_tokens": self.new_input,
            "peak_request_tokens": self.peak_request_tokens,
            "refusals": self.refusals,
            "notices": self.notices,
            "folds": self.folds,
            "fold_commits": self.fold_commits,
            "rewrites": {"explained": self.rewrites_explained, "unexplained": self.rewrites_unexplained},
            "bytes_unrecoverable": self.bytes_unrecoverable,
            "bytes_cleared_by_server": self.bytes_cleared_by_server,
            "bytes_lost": self.bytes_lost,
            "over_ceiling": {"by_estimate": self.over_ceiling_estimate, "by_server": self.over_ceiling_reported},
            "probes": self.probes.to_json(),
            "keys": self.keys.to_json(),
            "probes_without_rerun": self.probes.without_rerun,
            "summary_requests": self.summaries,
            "wall_s": round(self.wall_s, 3),
            "children_first_cached_share": dict(self.children_first_cached_share),
        }


def _node_counts(report: Mapping[str, Any]) -> dict[str, int]:
    counts = {"ok": 0, "failed": 0, "skipped": 0}
    for info in report["nodes"].values():
        counts[info["status"]] = counts.get(info["status"], 0) + 1
    return counts


def _metrics(
    scenario: Scenario,
    strategy: Strategy,
    report: Mapping[str, Any],
    tally: EventTally,
    readers: Sequence[ReaderPolicy],
    wall_s: float,
    server: ServerView | None = None,
) -> RunMetrics:
    recalls = [outcome for reader in readers for outcome in reader.log]
    over_estimate, over_reported = tally.over_ceiling()
    return RunMetrics(
        workload=scenario.name,
        strategy=strategy.name,
        status=report["status"],
        nodes=_node_counts(report),
        requests=report["requests"],
        usage=dict(report["usage"]),
        cost_bit=float(report["cost"]["bit"]),
        cost_usd=report["cost"]["usd"],
        output_priced=bool(report["cost"]["output_priced"]),
        cached_share=float(report["cached_share"]),
        children_first_cached_share={
            node: float(info["first_request_cached_share"])
            for node, info in report["nodes"].items()
            if info.get("spawned") and info.get("requests")
        },
        peak_request_tokens=report["peak_request_tokens"],
        refusals=report["refusals"],
        notices=report["notices"],
        folds=report["folds"],
        fold_commits=report["fold_commits"],
        rewrites_explained=report["rewrites"]["explained"],
        rewrites_unexplained=report["rewrites"]["unexplained"],
        bytes_unrecoverable=report["bytes_unrecoverable"],
        over_ceiling_estimate=over_estimate,
        over_ceiling_reported=over_reported,
        probes=ProbeTally.judge([r for r in recalls if r.kind == "probe"]),
        keys=ProbeTally.judge([r for r in recalls if r.kind == "key"]),
        summaries=tally.summaries,
        wall_s=wall_s,
        steps=tuple(tally.steps),
        bytes_cleared_by_server=server.bytes_lost(tally.output_bytes) if server is not None else 0,
    )


async def run_workload(
    scenario: Scenario,
    strategy: Strategy,
    *,
    provider_kind: str = "simulated",
    registry: ToolRegistry = BENCH_TOOLS,
    bound: LowerBound | None = None,
    floor: FloorTrace | None = None,
) -> RunMetrics:
    """Run ``scenario`` under ``strategy`` and measure it.

    Each node's model is a reader policy over its script; summary requests
    (which name no node) are answered by the fold's extractive summarizer.
    ``bound``, when given, is fed every payload the run sends (use it only
    with the baseline strategy, whose requests are the append-only sequence),
    and with it ``floor`` every main request (:mod:`runtime.bench.floor`).
    A strategy sending server-side edits has what they took out of view counted
    (:mod:`runtime.bench.server_view`).
    Raises :class:`~runtime.bench.strategies.StrategyNotBuilt` when the build
    lacks what the strategy needs.
    """
    applied = strategy.apply(scenario)
    readers = [ReaderPolicy(node.id, node.script, prints=facts_printed) for node in applied.nodes]

    server = ServerView() if strategy.edits else None

    def tapped(policy: Policy) -> Policy:
        return policy if bound is None else TappedPolicy(policy, bound.add)

    def node_policy(reader: ReaderPolicy) -> Policy:
        if bound is not None and floor is not None:
            return FloorTap(reader, floor, bound)
        return server.tap(reader) if server is not None else tapped(reader)

    policies = PolicyRegistry(
        {reader.node_id: node_policy(reader) for reader in readers}, default=tapped(FoldSummaryPolicy())
    )
    spec = applied.provider.with_kind(provider_kind)
    clock = ManualClock(CLOCK_START)
    tally = EventTally()
    started = time.perf_counter()
    async with (
        open_provider(spec, policies, clock=clock) as provider,
        Runtime(
            provider=OrderedSends(provider),
            model=spec.model_config,
            registry=registry,
            clock=clock,
            scenario=applied.name,
        ) as rt,
    ):
        rt.signals.add_handler(tally.feed, policy="block", name="bench")
        await rt.run(build_flow(applied))
        report = rt.report()
    wall_s = time.perf_counter() - started
    if not tally.finished:
        raise EventsLost(f"workload {scenario.name!r} under {strategy.name!r}: the bench saw no RunFinished event")
    return _metrics(applied, strategy, report, tally, readers, wall_s, server)


@attrs.frozen
class WorkloadResult:
    """One workload's runs by strategy, its lower bound, and strategies that could not run (with why)."""

    workload: str
    description: str
    bound: BoundFigures
    runs: Mapping[str, RunMetrics]
    not_run: Mapping[str, str]
    peers: tuple[PeerFigures, ...] = ()
    """Compaction as the peers run it (:mod:`runtime.bench.peers`), every variant of the sensitivity table."""
    peers_note: str = ""
    """Why there are no peer figures, when there are none."""
    cost_choices: tuple[ProfileChoice, ...] = ()
    """What the cost model chose for ``foldline-cost``, by profile."""
    floor: FloorFigures | None = None
    """The floor of a lossless policy that shows every result once (:func:`runtime.bench.floor.lossless_floor`)."""


def output_ratio(pricing: PricingTable, model: str) -> float | None:
    """The model's output/input price ratio from its first tier, or None when either is unknown."""
    tier = pricing.first_tier(model)
    if tier is None or tier.input is None or tier.output is None or tier.input == 0:
        return None
    return tier.output / tier.input


async def run_workload_set(
    scenario: Scenario,
    strategies: Sequence[Strategy],
    *,
    provider_kind: str = "simulated",
    registry: ToolRegistry = BENCH_TOOLS,
    pricing: PricingTable | None = None,
    progress: Callable[[str], None] | None = None,
    peer_variants: Sequence[PeerParams] = VARIANTS,
) -> WorkloadResult:
    """Run one workload under each strategy (the baseline always, for the bound)."""
    pricing = pricing or scenario.prices()
    spec = scenario.provider
    counter = SimTokenCounter(token_factor=spec.token_factor)
    bound = LowerBound(counter, lookback_collapse=spec.lookback_collapse)
    trace = FloorTrace(counter)
    runs: dict[str, RunMetrics] = {}
    not_run: dict[str, str] = {}
    baseline = STRATEGIES[BASELINE]
    runs[baseline.name] = await run_workload(
        scenario, baseline, provider_kind=provider_kind, registry=registry, bound=bound, floor=trace
    )
    if progress is not None:
        progress(f"{scenario.name}: {baseline.name} done in {runs[baseline.name].wall_s:.1f}s")
    choices: list[ProfileChoice] = []
    for strategy in strategies:
        if strategy.name in runs:
            continue
        if strategy.edits and provider_kind == "openai":
            not_run[strategy.name] = f"Anthropic's server-side context management is not on the {provider_kind} face"
            continue
        if strategy.derived:
            prices = prices_for_model(pricing, spec.model)
            strategy, choices = cost_strategy(scenario, runs[baseline.name].steps, prices)
        try:
            runs[strategy.name] = await run_workload(scenario, strategy, provider_kind=provider_kind, registry=registry)
        except StrategyNotBuilt as exc:
            not_run[strategy.name] = str(exc)
            continue
        if progress is not None:
            progress(f"{scenario.name}: {strategy.name} done in {runs[strategy.name].wall_s:.1f}s")
    output_tokens = int(runs[baseline.name].usage["output_tokens"])
    ratio = output_ratio(pricing, spec.model)
    figures = bound.figures(output_tokens=output_tokens, output_ratio=ratio)
    floor = lossless_floor(trace.requests(), output_tokens=output_tokens, output_ratio=ratio)
    ordered = {s.name: runs[s.name] for s in strategies if s.name in runs}
    if baseline.name not in ordered:
        ordered = {baseline.name: runs[baseline.name], **ordered}
    peers, note = peer_figures(scenario, runs[baseline.name], pricing, peer_variants)
    return WorkloadResult(
        scenario.name, scenario.description, figures, ordered, not_run, peers, note, tuple(choices), floor
    )


def prices_for_model(pricing: PricingTable, model: str) -> CostPrices:
    """The cost model's relative prices for ``model`` (the bench's models have every price)."""
    tier = pricing.first_tier(model)
    if tier is None:
        raise ConfigError(f"model {model!r} is not in the pricing table; the cost strategy needs its prices")
    try:
        return prices_for(tier)
    except ValueError as exc:
        raise ConfigError(f"model {model!r}: {exc}") from None


def peer_figures(
    scenario: Scenario, baseline: RunMetrics, pricing: PricingTable, variants: Sequence[PeerParams] = VARIANTS
) -> tuple[tuple[PeerFigures, ...], str]:
    """The peer compaction replay over the baseline's requests, each node under its own ceiling.

    Returns the figures, or none and why (no node has a numeric ceiling to compact under).
    """
    ceilings = node_ceilings(scenario)
    if not any(c is not None for c in ceilings.values()):
        return (), "no node has a numeric ceiling: nothing to compact under"
    return replay_all(baseline.steps, ceilings, pricing, scenario.provider.model, variants), ""


def node_ceilings(scenario: Scenario) -> dict[str | None, int | None]:
    """Each node's numeric ceiling (its own per-call value, else its profile's; None when not a number)."""

    def numeric(value: object) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    out: dict[str | None, int | None] = {}
    for node in scenario.nodes:
        own = numeric(node.max_input_tokens)
        profile = scenario.profiles.get(node.profile)
        out[node.id] = own if own is not None else numeric(profile.max_input_tokens if profile else None)
    return out


def strategies_named(names: Sequence[str] | None) -> list[Strategy]:
    """The strategies called ``names`` (all of them for None), in table order."""
    if names is None:
        return list(STRATEGIES.values())
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise ConfigError(f"unknown strategy {unknown[0]!r}; strategies: {', '.join(STRATEGIES)}")
    return [s for s in STRATEGIES.values() if s.name in names]
