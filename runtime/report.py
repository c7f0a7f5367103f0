"""The run report, rebuilt from the signal stream.

:class:`ReportBuilder` consumes the events of a run (live, as a bus handler,
or replayed from a JSONL file) and folds them into the counters the report
shows. Because the report is computed only from events, replaying a run's
events rebuilds every counter in its report.

The JSON form (:meth:`Report.to_json`) is a contract users script against:
keys are added, never renamed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from runtime.models.pricing import PricingTable
from runtime.values.usage import Usage
from signals.envelope import Event


@attrs.define(eq=False)
class ReportBuilder:
    """Accumulates a run's counters from its events (an identity object)."""

    pricing: PricingTable
    default_model: str
    run_id: str | None = None
    scenario: str | None = None
    status: str | None = None
    nodes: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    requests: int = 0
    attempts: int = 0
    usage: Usage = attrs.field(factory=Usage)
    cost_bit: float = 0.0
    cost_usd: float | None = 0.0
    output_priced: bool = True
    peak_request_tokens: int = 0
    notices: int = 0
    refusals: int = 0
    folds: int = 0
    fold_commits: int = 0
    tokens_freed: int = 0
    rewrites_explained: int = 0
    rewrites_unexplained: int = 0
    decisions: int = 0
    count_tokens_calls: int = 0
    """Calls to the provider's count-tokens endpoint (ContextDecision.count_calls summed)."""
    bytes_unrecoverable: int = 0
    summary_requests: int = 0
    summary_cost_bit: float = 0.0
    missing_prices: list[str] = attrs.field(factory=list)
    """The prices the run's dollars needed that the pricing table lacks, each named (model, price, tier)."""
    _request_models: dict[str, str] = attrs.field(factory=dict)
    _request_intents: dict[str, str] = attrs.field(factory=dict)
    _node_usage: dict[str, Usage] = attrs.field(factory=dict)
    _node_requests: dict[str, int] = attrs.field(factory=dict)
    _node_tools: dict[str, dict[str, dict[str, int]]] = attrs.field(factory=dict)
    _node_first: dict[str, Usage] = attrs.field(factory=dict)
    """Each node's first main request's usage (what a child read of its emitter's cache)."""
    _children: list[str] = attrs.field(factory=list)

    def feed(self, event: Event) -> None:
        """Fold one event into the counters. Unknown event types are ignored."""
        handler = getattr(self, "_on_" + event.type, None)
        if self.run_id is None:
            self.run_id = event.run_id
        if handler is not None:
            handler(event, event.data)

    def feed_all(self, events: Iterable[Event]) -> ReportBuilder:
        for event in events:
            self.feed(event)
        return self

    # -- handlers ---------------------------------------------------------------------

    def _on_RunStarted(self, event: Event, data: Mapping[str, Any]) -> None:
        self.scenario = data.get("scenario")
        for node in data.get("nodes", []):
            self.nodes.setdefault(node, {"status": "pending", "reason": None})

    def _on_RunFinished(self, event: Event, data: Mapping[str, Any]) -> None:
        self.status = data.get("status")
        self.bytes_unrecoverable = int(data.get("bytes_unrecoverable", 0))

    def _node(self, event: Event) -> dict[str, Any]:
        assert event.node_id is not None
        return self.nodes.setdefault(event.node_id, {"status": "pending", "reason": None})

    def _on_NodeStarted(self, event: Event, data: Mapping[str, Any]) -> None:
        self._node(event)["status"] = "running"

    def _on_NodeFinished(self, event: Event, data: Mapping[str, Any]) -> None:
        self._node(event).update(status="ok", reason=None)

    def _on_NodeFailed(self, event: Event, data: Mapping[str, Any]) -> None:
        self._node(event).update(status="failed", reason=f"{data.get('error_type')}: {data.get('message')}")

    def _on_NodeSkipped(self, event: Event, data: Mapping[str, Any]) -> None:
        self._node(event).update(status="skipped", reason=data.get("reason"))

    def _on_ContextDecision(self, event: Event, data: Mapping[str, Any]) -> None:
        self.decisions += 1
        self.count_tokens_calls += int(data.get("count_calls") or 0)
        action = data.get("action")
        if action == "notice":
            self.notices += 1
        elif action == "refuse":
            self.refusals += 1
        elif action == "fold":
            self.folds += 1
        if data.get("sent"):
            self.peak_request_tokens = max(self.peak_request_tokens, int(data.get("estimate_after") or 0))

    def _on_RequestSent(self, event: Event, data: Mapping[str, Any]) -> None:
        self.attempts += 1
        if event.request_id is not None:
            if data.get("model"):
                self._request_models[event.request_id] = data["model"]
            self._request_intents[event.request_id] = data.get("intent", "")

    def _on_ResponseReceived(self, event: Event, data: Mapping[str, Any]) -> None:
        self.requests += 1
        usage = Usage(**{k: int(v) for k, v in data["usage"].items() if k in Usage.__annotations__})
        self.usage = self.usage + usage
        # A request has one response: its model and intent are let go here (a run keeps no per-request entry).
        model = self._request_models.pop(event.request_id or "", self.default_model)
        side = self._request_intents.pop(event.request_id or "", "") == "side"
        cost = self.pricing.cost(usage, model)
        if cost.usd is None:
            missing = self.pricing.missing_prices(usage, model)
            self.missing_prices.extend(name for name in missing if name not in self.missing_prices)
        self.cost_bit += cost.bit
        if side:
            self.summary_requests += 1
            self.summary_cost_bit += cost.bit
        if event.node_id is not None:
            self._node_usage[event.node_id] = self._node_usage.get(event.node_id, Usage()) + usage
            self._node_requests[event.node_id] = self._node_requests.get(event.node_id, 0) + 1
            if not side:
                self._node_first.setdefault(event.node_id, usage)
        self.output_priced = self.output_priced and cost.output_priced
        if cost.usd is None or self.cost_usd is None:
            self.cost_usd = None
        else:
            self.cost_usd += cost.usd

    def _on_ChildSpawned(self, event: Event, data: Mapping[str, Any]) -> None:
        if data.get("child") is not None:
            self._children.append(str(data["child"]))

    def _on_ToolCallFinished(self, event: Event, data: Mapping[str, Any]) -> None:
        tools = self._node_tools.setdefault(event.node_id or "", {})
        figures = tools.setdefault(str(data.get("name")), {"calls": 0, "errors": 0, "result_bytes": 0})
        figures["calls"] += 1
        figures["errors"] += 1 if data.get("is_error") else 0
        figures["result_bytes"] += int(data.get("output_bytes") or 0)

    def _tool_totals(self) -> dict[str, int]:
        totals = {"calls": 0, "errors": 0, "result_bytes": 0}
        for tools in self._node_tools.values():
            for figures in tools.values():
                for key in totals:
                    totals[key] += figures[key]
        return totals

    def _on_FoldCommitted(self, event: Event, data: Mapping[str, Any]) -> None:
        self.fold_commits += 1
        self.tokens_freed += int(data.get("tokens_freed") or 0)

    def _on_CacheRewrite(self, event: Event, data: Mapping[str, Any]) -> None:
        if data.get("cause"):
            self.rewrites_explained += 1
        else:
            self.rewrites_unexplained += 1

    # -- output -----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        u = self.usage
        all_input = u.total_input
        return {
            "run_id": self.run_id,
            "scenario": self.scenario,
            "status": self.status,
            "nodes": {k: {**v, **self._node_figures(k)} for k, v in self.nodes.items()},
            "requests": self.requests,
            "attempts": self.attempts,
            "usage": {
                "input_tokens": u.input_tokens,
                "cache_read_input_tokens": u.cache_read_input_tokens,
                "cache_write_5m_tokens": u.cache_write_5m_tokens,
                "cache_write_1h_tokens": u.cache_write_1h_tokens,
                "output_tokens": u.output_tokens,
            },
            "cached_share": round(u.cache_read_input_tokens / all_input, 6) if all_input else 0.0,
            "cost": {
                "bit": round(self.cost_bit, 3),
                "usd": round(self.cost_usd, 6) if self.cost_usd is not None else None,
                "output_priced": self.output_priced,
                "missing_prices": sorted(self.missing_prices),
            },
            "peak_request_tokens": self.peak_request_tokens,
            "decisions": self.decisions,
            "count_tokens_calls": self.count_tokens_calls,
            "notices": self.notices,
            "refusals": self.refusals,
            "folds": self.folds,
            "fold_commits": self.fold_commits,
            "tokens_freed": self.tokens_freed,
            "rewrites": {"explained": self.rewrites_explained, "unexplained": self.rewrites_unexplained},
            "bytes_unrecoverable": self.bytes_unrecoverable,
            "summaries": {"requests": self.summary_requests, "cost_bit": round(self.summary_cost_bit, 3)},
            "tools": self._tool_totals(),
        }

    def _node_figures(self, node_id: str) -> dict[str, Any]:
        """A node's own requests, usage and cached share (its fold summaries included)."""
        u = self._node_usage.get(node_id, Usage())
        return {
            "requests": self._node_requests.get(node_id, 0),
            "tools": {name: dict(f) for name, f in sorted(self._node_tools.get(node_id, {}).items())},
            "usage": u.to_dict(),
            "cached_share": _share(u),
            "first_request_cached_share": _share(self._node_first.get(node_id, Usage())),
            "spawned": node_id in self._children,
        }


def _share(u: Usage) -> float:
    """The share of ``u``'s input read from the cache (0 with no input)."""
    return round(u.cache_read_input_tokens / u.total_input, 6) if u.total_input else 0.0


def _unknown_dollars(missing: Sequence[str]) -> str:
    """Why a run's dollars are unknown, and how to give the missing prices."""
    if not missing:
        return "dollars unknown (prices not in the table)"
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    return (
        f'dollars unknown: no price for {shown}; give it in the scenario\'s [pricing.models."MODEL"] table '
        "(the shape of runtime/data/pricing.toml; see the README's Prices section)"
    )


def format_report(report: Mapping[str, Any]) -> str:
    """The human-readable report printed at the end of ``foldline run``."""
    u = report["usage"]
    cost = report["cost"]
    usd = f"${cost['usd']:.6f}" if cost["usd"] is not None else _unknown_dollars(cost.get("missing_prices") or [])
    lines = [
        f"run {report['run_id']}: {report['status']}",
        "nodes:",
    ]
    width = max((len(n) for n in report["nodes"]), default=4)
    for node, info in report["nodes"].items():
        reason = f"  ({info['reason']})" if info.get("reason") else ""
        figures = ""
        if info.get("requests"):
            figures = f"  {info['requests']} requests, cached share {info['cached_share']:.3f}"
            if info.get("spawned"):
                figures += f" (first request {info['first_request_cached_share']:.3f})"
        lines.append(f"  {node:<{width}}  {info['status']}{figures}{reason}")
        for name, f in info.get("tools", {}).items():
            errors = f", {f['errors']} error{'s' if f['errors'] != 1 else ''}" if f["errors"] else ""
            calls = f"{f['calls']} call{'s' if f['calls'] != 1 else ''}"
            lines.append(f"  {'':<{width}}    {name}: {calls}{errors}, {f['result_bytes']:,} bytes of results")
    lines += [
        f"requests: {report['requests']} ({report['attempts']} attempts)",
        f"input: fresh {u['input_tokens']:,} | cache read {u['cache_read_input_tokens']:,} | "
        f"cache write 5m {u['cache_write_5m_tokens']:,} 1h {u['cache_write_1h_tokens']:,} | output {u['output_tokens']:,}",
        f"cached share: {report['cached_share']:.3f}",
        f"cost: {cost['bit']:,.1f} base-input-token units"
        + ("" if cost["output_priced"] else " (output not priced)")
        + f"; {usd}",
        f"peak request: {report['peak_request_tokens']:,} tokens",
        f"notices: {report['notices']}  refusals: {report['refusals']}  folds: {report['folds']}  "
        f"rewrites: {report['rewrites']['explained']} explained, {report['rewrites']['unexplained']} unexplained",
        f"bytes unrecoverable: {report['bytes_unrecoverable']}",
    ]
    if report["summaries"]["requests"]:
        lines.insert(
            -1,
            f"fold summaries: {report['summaries']['requests']} requests, "
            f"{report['summaries']['cost_bit']:,.1f} base-input-token units (included in the cost above)",
        )
    return "\n".join(lines)
