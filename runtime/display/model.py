"""A run as the report draws it, rebuilt from its events only (pure: no I/O, no clock).

:func:`picture_events` reads a run's events (a store's or a signals file's, in
``seq`` order) into a :class:`RunPicture`: per node every request in order
(its ceiling decision, usage, cost, the folds that landed before it and the
cache rewrites it caused), and the spans of the flow's timeline. A request is
a ``request_id`` that got a ceiling decision: a refused one was never sent and
has no usage; a retried one counts its attempts.

A ``FoldCommitted`` event carries no request id: it is the fold the branch's
next ceiling decision sends (that decision's action is ``fold``), so it is
attached to that request; a fold after a node's last request is kept apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from runtime.decision.ceiling import DEFAULT_FOLD_AT, DEFAULT_NOTICE_AT
from runtime.models.pricing import PricingTable
from runtime.values.usage import Usage
from signals.envelope import Event

ACTION_RANK = {"pass": 0, "notice": 1, "fold": 2, "refuse": 3}


@attrs.frozen
class FoldMark:
    """One committed fold: its stages and what it freed."""

    stages: tuple[str, ...]
    agent_marks: int
    host_stages: int
    tokens_freed: int
    estimate_before: int
    estimate_after: int
    target_reached: bool
    time: float
    policy: str | None = None
    target_tokens: int | None = None
    predicted_bit: float | None = None
    predicted_requests: float | None = None
    realised_bit: float | None = None
    realised_requests: int | None = None
    fold_line_tokens: int | None = None
    """The fold line in force when the commit was chosen (None: the event predates it)."""
    stopped: str | None = None
    """Why the fold stopped above its target, in words (None: it reached it, or the event predates it)."""


@attrs.frozen
class RewriteMark:
    """A cache rewrite a request caused: its cause (None: unexplained) and the first changed message."""

    cause: str | None
    first_changed_message: int


@attrs.define(eq=False)
class RequestPoint:
    """One request of a node, in order (``number`` from 1)."""

    request_id: str
    node_id: str
    branch_id: str | None
    number: int
    action: str = "pass"
    reasons: list[str] = attrs.field(factory=list)
    ceiling: int | None = None
    fold_line: int | None = None
    """The fold line in force at this request, in tokens (a folding node's; None: not known)."""
    fold_target: int | None = None
    estimate_before: int = 0
    estimate_after: int = 0
    sent: bool = False
    attempts: int = 0
    intent: str | None = None
    model: str | None = None
    usage: Usage | None = None
    stop_reason: str | None = None
    cost_bit: float | None = None
    folds: list[FoldMark] = attrs.field(factory=list)
    rewrites: list[RewriteMark] = attrs.field(factory=list)
    decided_at: float = 0.0
    sent_at: float | None = None
    received_at: float | None = None

    @property
    def refused(self) -> bool:
        return self.action == "refuse"

    @property
    def tokens_freed(self) -> int:
        return sum(f.tokens_freed for f in self.folds)


@attrs.frozen
class Spawn:
    parent: str
    child: str
    inherit: str
    view_length: int
    time: float


@attrs.define(eq=False)
class NodePicture:
    """One node: its requests, outcome and times."""

    node_id: str
    status: str = "pending"
    reason: str | None = None
    operation: str | None = None
    parent: str | None = None
    branch_id: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    requests: list[RequestPoint] = attrs.field(factory=list)
    trailing_folds: list[FoldMark] = attrs.field(factory=list)
    fold_at: float | None = None
    can_fold: bool | None = None
    """Whether the node folds (its profile has context management with the fold strategy); None: not known."""
    depends_on: tuple[str, ...] = ()
    """The nodes this one waited for (from a store's scenario; empty when the source does not say)."""

    def dashed_line(self) -> tuple[str, float, str]:
        """The dashed line drawn under the ceiling: (name, fraction of the ceiling, how it is known)."""
        if self.can_fold is False:
            return "notice line", DEFAULT_NOTICE_AT, "this node does not fold"
        if self.fold_at is None:
            return "fold line", DEFAULT_FOLD_AT, "the default; the source does not name the profile's"
        return "fold line", self.fold_at, "its profile's"

    def ceilings(self) -> list[int]:
        return [r.ceiling for r in self.requests if r.ceiling is not None]


@attrs.define(eq=False)
class RunPicture:
    """Everything the report draws about one run."""

    run_id: str | None = None
    scenario: str | None = None
    provider: str | None = None
    status: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    nodes: dict[str, NodePicture] = attrs.field(factory=dict)
    spawns: list[Spawn] = attrs.field(factory=list)
    events: int = 0

    def all_requests(self) -> list[RequestPoint]:
        return [r for node in self.nodes.values() for r in node.requests]

    def models(self) -> list[str]:
        return sorted({r.model for r in self.all_requests() if r.model})


@attrs.define(eq=False)
class _Builder:
    pricing: PricingTable
    default_model: str | None
    run: RunPicture = attrs.field(factory=RunPicture)
    by_request: dict[str, RequestPoint] = attrs.field(factory=dict)
    pending_folds: dict[str, list[FoldMark]] = attrs.field(factory=dict)

    def feed(self, event: Event) -> None:
        run = self.run
        run.events += 1
        run.run_id = run.run_id or event.run_id
        run.started_at = event.time if run.started_at is None else min(run.started_at, event.time)
        run.ended_at = event.time if run.ended_at is None else max(run.ended_at, event.time)
        handler = getattr(self, "_on_" + event.type, None)
        if handler is not None:
            handler(event, event.data)

    def _node(self, event: Event) -> NodePicture:
        node_id = event.node_id or "-"
        node = self.run.nodes.setdefault(node_id, NodePicture(node_id))
        if node.branch_id is None and event.branch_id is not None:
            node.branch_id = event.branch_id
        return node

    def _request(self, event: Event) -> RequestPoint:
        assert event.request_id is not None
        point = self.by_request.get(event.request_id)
        if point is None:
            node = self._node(event)
            point = RequestPoint(event.request_id, node.node_id, event.branch_id, len(node.requests) + 1)
            point.decided_at = event.time
            node.requests.append(point)
            self.by_request[event.request_id] = point
        return point

    def _on_RunStarted(self, event: Event, data: Mapping[str, Any]) -> None:
        self.run.scenario = data.get("scenario")
        self.run.provider = data.get("provider")
        for node_id in data.get("nodes", ()):
            self.run.nodes.setdefault(node_id, NodePicture(node_id))

    def _on_RunFinished(self, event: Event, data: Mapping[str, Any]) -> None:
        self.run.status = data.get("status")

    def _on_NodeStarted(self, event: Event, data: Mapping[str, Any]) -> None:
        node = self._node(event)
        node.status, node.started_at = "running", event.time
        node.operation, node.parent = data.get("operation"), data.get("parent")

    def _ended(self, event: Event, status: str, reason: str | None) -> None:
        node = self._node(event)
        node.status, node.reason, node.ended_at = status, reason, event.time
        if event.branch_id is not None:
            node.trailing_folds.extend(self.pending_folds.pop(event.branch_id, []))

    def _on_NodeFinished(self, event: Event, data: Mapping[str, Any]) -> None:
        self._ended(event, "ok", None)

    def _on_NodeFailed(self, event: Event, data: Mapping[str, Any]) -> None:
        self._ended(event, "failed", f"{data.get('error_type')}: {data.get('message')}")

    def _on_NodeSkipped(self, event: Event, data: Mapping[str, Any]) -> None:
        self._ended(event, "skipped", data.get("reason"))

    def _on_ChildSpawned(self, event: Event, data: Mapping[str, Any]) -> None:
        parent = self._node(event).node_id
        self.run.spawns.append(
            Spawn(parent, str(data.get("child")), str(data.get("inherit")), int(data.get("view_length", 0)), event.time)
        )

    def _on_ContextDecision(self, event: Event, data: Mapping[str, Any]) -> None:
        if event.request_id is None:
            return
        point = self._request(event)
        action = str(data.get("action", "pass"))
        if ACTION_RANK.get(action, 0) >= ACTION_RANK.get(point.action, 0):
            point.action = action
        point.reasons.append(str(data.get("reason", "")))
        point.ceiling = data.get("ceiling")
        point.fold_line = data.get("fold_line")
        point.fold_target = data.get("fold_target")
        point.estimate_before = int(data.get("estimate_before") or 0)
        point.estimate_after = int(data.get("estimate_after") or 0)
        point.sent = point.sent or bool(data.get("sent"))
        if event.branch_id is not None:
            point.folds.extend(self.pending_folds.pop(event.branch_id, []))

    def _on_RequestSent(self, event: Event, data: Mapping[str, Any]) -> None:
        if event.request_id is None:
            return
        point = self._request(event)
        point.attempts += 1
        point.sent = True
        point.intent = data.get("intent")
        point.model = data.get("model") or point.model
        point.sent_at = event.time if point.sent_at is None else point.sent_at

    def _on_ResponseReceived(self, event: Event, data: Mapping[str, Any]) -> None:
        if event.request_id is None:
            return
        point = self._request(event)
        usage = Usage(**{k: int(v) for k, v in data["usage"].items() if k in Usage.__annotations__})
        point.usage = usage if point.usage is None else point.usage + usage
        point.stop_reason = data.get("stop_reason")
        point.received_at = event.time
        model = point.model or self.default_model
        if model is not None:
            point.cost_bit = (point.cost_bit or 0.0) + self.pricing.cost(usage, model).bit

    def _on_FoldCommitted(self, event: Event, data: Mapping[str, Any]) -> None:
        fold = FoldMark(
            stages=tuple(data.get("stages", ())),
            agent_marks=int(data.get("agent_marks", 0)),
            host_stages=int(data.get("host_stages", 0)),
            tokens_freed=int(data.get("tokens_freed", 0)),
            estimate_before=int(data.get("estimate_before", 0)),
            estimate_after=int(data.get("estimate_after", 0)),
            target_reached=bool(data.get("target_reached")),
            time=event.time,
            policy=data.get("policy"),
            target_tokens=data.get("target_tokens"),
            predicted_bit=data.get("predicted_bit"),
            predicted_requests=data.get("predicted_requests"),
            realised_bit=data.get("realised_bit"),
            realised_requests=data.get("realised_requests"),
            fold_line_tokens=data.get("fold_line_tokens"),
            stopped=data.get("stopped"),
        )
        self._node(event)
        key = event.branch_id or f"node:{event.node_id}"
        self.pending_folds.setdefault(key, []).append(fold)

    def _on_CacheRewrite(self, event: Event, data: Mapping[str, Any]) -> None:
        if event.request_id is None:
            return
        self._request(event).rewrites.append(RewriteMark(data.get("cause"), int(data.get("first_changed_message", 0))))


def picture_events(
    events: Iterable[Event],
    *,
    pricing: PricingTable,
    default_model: str | None,
    fold_at: Mapping[str, float | None] | None = None,
    depends_on: Mapping[str, tuple[str, ...]] | None = None,
) -> RunPicture:
    """The run the events tell of. ``fold_at`` gives each node's fold fraction when it is known (None: the node
    does not fold); ``depends_on`` each node's dependencies (a store's scenario says)."""
    builder = _Builder(pricing, default_model)
    for event in events:
        builder.feed(event)
    for branch_key, folds in builder.pending_folds.items():
        owner = next((n for n in builder.run.nodes.values() if n.branch_id == branch_key), None)
        if owner is not None:
            owner.trailing_folds.extend(folds)
    for node_id, fraction in (fold_at or {}).items():
        if node_id in builder.run.nodes:
            builder.run.nodes[node_id].fold_at = fraction
            builder.run.nodes[node_id].can_fold = fraction is not None
    for node_id, needs in (depends_on or {}).items():
        if node_id in builder.run.nodes:
            builder.run.nodes[node_id].depends_on = tuple(needs)
    return builder.run


def first_model(events: Iterable[Event]) -> str | None:
    """The model of the first request that names one (a signals file's default model)."""
    for event in events:
        if event.type == "RequestSent" and event.data.get("model"):
            return str(event.data["model"])
    return None
