"""A flow's I/O edges inside workflows, made activities.

The flow workflow (:mod:`runtime.temporal.scheduler`) and each node's
workflow (:mod:`runtime.temporal.node_host`) run foldline's own send
pipeline and pure core, with the host's edges swapped for deterministic ones:

- the provider is :class:`ActivityProvider`: each attempt is a
  ``foldline.provider_attempt`` activity (retried by the pipeline under the
  SDK's rules; Temporal retries only a lost worker, with the SDK's backoff),
  each exact count a ``foldline.count_tokens`` activity;
- every registry tool but ``spawn`` is a ``foldline.tool_call`` activity
  (``spawn`` is the scheduler's own);
- the clock, the monotonic clock and the retry jitter are the workflow's, and
  the ids come from a :class:`~runtime.ids.CountingIds` named after the
  workflow, so a replay rebuilds every id;
- events are numbered by the flow workflow's bus (``seq``) and reach the
  sinks through ``foldline.write_events`` batches (:class:`EventPump`), in seq order.

Only called from inside a workflow (it reads ``temporalio.workflow``); runs on
asyncio only, as every Temporal workflow does.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import attrs
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType

from actors.tools import Tool, ToolContext, ToolFailed, ToolRegistry
from runtime.compiler import Request
from runtime.image_rules import CHAT_IMAGES, MESSAGES_IMAGES, ImageRule
from runtime.providers.base import AttemptFailed, CountUnavailable, ProviderError, ProviderReply
from runtime.providers.openai_wire import session_key
from runtime.providers.retry import INITIAL_RETRY_DELAY, MAX_RETRY_DELAY
from runtime.temporal.activities import reply_from_wire
from signals.bus import Gap
from signals.envelope import Event

IN_WORKFLOW_TOOLS = frozenset({"spawn"})
"""Tools the workflow runs itself (they act on the flow, not the world)."""
EVENT_BATCH = 500
ATTEMPT_TIMEOUT = timedelta(minutes=10)
QUICK_TIMEOUT = timedelta(seconds=15)
"""The whole time of an activity that does not heartbeat (body reads and writes): a lost worker's attempt of one
is retried after this, where a heartbeating one is retried after :data:`HEARTBEAT_TIMEOUT`."""
HEARTBEAT_TIMEOUT = timedelta(seconds=5)
"""A worker that stops heartbeating this long is taken as lost; its attempt moves to another worker."""
AFFINITY_WAIT = timedelta(seconds=5)
"""How long an activity waits for a worker on the flow's own task queue before it goes to the shared one."""
AFFINITY_SLOTS = 4
"""How many affinity task queues a deployment has (``QUEUE@0`` .. ``QUEUE@3``); a flow prefers one."""
COUNTING_KINDS = frozenset({"anthropic", "simulated"})
"""Provider kinds whose workers count tokens (``AnthropicProvider``: the Messages API's ``messages/count_tokens``)."""
COUNT_RETRIES = RetryPolicy(
    initial_interval=timedelta(seconds=0.5), maximum_interval=timedelta(seconds=8), maximum_attempts=3
)
"""A count lost with its worker, or outlasting :data:`QUICK_TIMEOUT`, is tried again; a count the provider
refused is not (it comes back as a value). The send's own bound (``RunEnv.count_timeout_s``) is over all tries."""


def jump_hash(key: int, buckets: int) -> int:
    """Jump consistent hash (Lamping and Veach, 2014): a bucket in [0, buckets) that moves for 1/n of keys when n grows."""
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) % (1 << 64)
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b


def affinity_queue(task_queue: str, flow_id: str, slots: int = AFFINITY_SLOTS) -> str:
    """The task queue a flow's activities prefer: a consistent hash of the flow id over the deployment's slots."""
    import hashlib

    key = int.from_bytes(hashlib.sha256(flow_id.encode("utf-8")).digest()[:8], "big")
    return f"{task_queue}@{jump_hash(key, slots)}"


@attrs.define(eq=False)
class ActivityRoute:
    """Where a node's activities go: the flow's affinity queue first, the shared queue when no worker takes it.

    An activity no worker starts on the affinity queue within ``wait`` (a
    schedule-to-start timeout: it never ran) is sent again on the workflow's
    own queue, and so is every later activity of this node workflow.
    ``cache_key``: the flow's root branch, which the provider sees.
    """

    queue: str | None
    cache_key: str
    wait: timedelta = AFFINITY_WAIT
    heartbeat: timedelta = HEARTBEAT_TIMEOUT
    fell_back: bool = False

    async def execute(
        self, name: str, arg: dict[str, Any], retry_policy: RetryPolicy, *, heartbeats: bool = True
    ) -> Any:
        """Run activity ``name`` (one that heartbeats unless told) on the preferred queue, else the shared one."""
        if self.queue is not None and not self.fell_back:
            try:
                return await self._execute(name, arg, retry_policy, self.queue, heartbeats)
            except ActivityError as error:
                cause = error.cause
                if not (isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START):
                    raise
                self.fell_back = True
                workflow.logger.warning("no worker on %s within %s: the shared queue takes over", self.queue, self.wait)
        return await self._execute(name, arg, retry_policy, None, heartbeats)

    async def _execute(
        self, name: str, arg: dict[str, Any], retry_policy: RetryPolicy, queue: str | None, heartbeats: bool
    ) -> Any:
        return await workflow.execute_activity(
            name,
            arg,
            task_queue=queue,
            schedule_to_start_timeout=self.wait if queue is not None else None,
            start_to_close_timeout=ATTEMPT_TIMEOUT if heartbeats else QUICK_TIMEOUT,
            heartbeat_timeout=self.heartbeat if heartbeats else None,
            retry_policy=retry_policy,
        )


def sdk_retry_policy(max_retries: int) -> RetryPolicy:
    """Temporal's retries of a lost attempt, by the SDK's backoff: 0.5 s doubling to 8 s, max_retries + 1 tries."""
    return RetryPolicy(
        initial_interval=timedelta(seconds=INITIAL_RETRY_DELAY),
        backoff_coefficient=2.0,
        maximum_interval=timedelta(seconds=MAX_RETRY_DELAY),
        maximum_attempts=max_retries + 1,
    )


@attrs.define(eq=False)
class ActivityProvider:
    """A provider whose every attempt is a ``foldline.provider_attempt`` activity."""

    kind: str
    name: str
    max_retries: int
    route: ActivityRoute
    caches_by_prefix: bool = True
    counts_tokens: bool = attrs.field(default=attrs.Factory(lambda self: self.kind in COUNTING_KINDS, takes_self=True))
    """Whether its workers' provider has a count-tokens endpoint (:data:`COUNTING_KINDS`): as in process."""
    image_rule: ImageRule = MESSAGES_IMAGES
    """The rule the worker's wire counts images by (the chat-completions tiles for kind ``openai``)."""
    session_keys: bool = False
    """Kind ``openai``: each attempt names its request's session (the key the in-process provider derives)."""

    @classmethod
    def for_kind(cls, kind: str, max_retries: int, route: ActivityRoute) -> ActivityProvider:
        """The activity provider of a scenario's provider kind: ``openai`` caches by prefix, not by marks."""
        if kind == "openai":
            return cls(
                kind, kind, max_retries, route, caches_by_prefix=False, image_rule=CHAT_IMAGES, session_keys=True
            )
        return cls(kind, kind, max_retries, route)

    async def count_tokens(self, request: Request) -> int:
        """The provider's count of ``request`` by a ``foldline.count_tokens`` activity; any failure a ProviderError."""
        if not self.counts_tokens:
            raise CountUnavailable(f"provider {self.name} has no count-tokens endpoint")
        arg = {"provider": self.kind, "payload": request.payload_text()}
        try:
            result = await self.route.execute("foldline.count_tokens", arg, COUNT_RETRIES, heartbeats=False)
        except ActivityError as error:  # no worker answered within the retries: the send decides on the fallback
            raise ProviderError(f"count_tokens: the activity failed: {error.cause or error}") from None
        if "error" in result:
            failure = result["error"]
            raise ProviderError(failure["message"], status=failure.get("status"), error_type=failure.get("error_type"))
        return int(result["tokens"])

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        arg = {"provider": self.kind, "payload": request.payload_text(), "node_id": node_id}
        key = session_key(request) if self.session_keys else self.route.cache_key
        result = await self.route.execute(
            "foldline.provider_attempt", arg | {"cache_key": key}, sdk_retry_policy(self.max_retries)
        )
        if "ok" in result:
            return reply_from_wire(result["ok"])
        failure = result.get("failed") or result["error"]
        if "failed" in result:
            raise AttemptFailed(
                failure["message"],
                status=failure.get("status"),
                error_type=failure.get("error_type"),
                headers=failure.get("headers") or {},
            )
        raise ProviderError(failure["message"], status=failure.get("status"), error_type=failure.get("error_type"))

    async def aclose(self) -> None:
        return None


def _activity_tool(tool: Tool, route: ActivityRoute) -> Tool:
    name = tool.name

    async def call(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        arg = {"name": name, "arguments": dict(arguments), "node_id": context.node_id, "branch_id": context.branch_id}
        arg["image_rule"] = context.image_rule.name  # read_image states an image's tokens by the run's wire
        result = await route.execute("foldline.tool_call", arg, sdk_retry_policy(2))
        if "failed" in result:
            raise ToolFailed(result["failed"]["message"])
        return result["value"]

    return Tool(tool.spec, call)


def activity_registry(registry: ToolRegistry, route: ActivityRoute) -> ToolRegistry:
    """The registry a workflow uses: the same specs; calls go to the workers (``spawn`` stays in the workflow)."""
    return ToolRegistry(
        {
            name: tool if name in IN_WORKFLOW_TOOLS else _activity_tool(tool, route)
            for name, tool in registry.tools.items()
        }
    )


@attrs.define(eq=False)
class EventPump:
    """Collects the bus's events and writes them to the sinks (JSONL, SQLite, Postgres) through activities, in seq order.

    With a SQLite store it also writes the nodes' request records (``requests``), in the order they arrived.
    """

    path: str | None
    events_db: str | None
    """A SQLite store file or a ``postgresql://`` URL (:func:`runtime.temporal.sinks.open_event_sink`)."""
    pending: list[dict[str, Any]] = attrs.field(factory=list)
    requests: list[dict[str, Any]] = attrs.field(factory=list)
    """Request records of the nodes' branches (``{"branch_id", "record"}``), for the SQLite store's ``requests``."""
    closing: bool = False
    written: int = 0
    taken_seq: int = 0
    writing: bool = False

    def take(self, item: Event | Gap) -> None:
        if isinstance(item, Gap):
            raise TypeError("the event pump's blocking subscription lost events")
        self.pending.append(item.to_json())
        self.taken_seq = item.seq

    def idle(self, last_seq: int) -> bool:
        """Every event up to ``last_seq`` taken and written, no batch being written."""
        return self.taken_seq >= last_seq and not (self.pending or self.requests or self.writing)

    def take_request(self, item: dict[str, Any]) -> None:
        """A node's request record (the pump writes it only into a SQLite store)."""
        if self.events_db and not self.events_db.startswith(("postgres://", "postgresql://")):
            self.requests.append(item)

    async def run(self) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self.pending or self.requests) or self.closing)
            if not (self.pending or self.requests):
                return
            batch, self.pending = self.pending[:EVENT_BATCH], self.pending[EVENT_BATCH:]
            requests, self.requests = self.requests[:EVENT_BATCH], self.requests[EVENT_BATCH:]
            self.writing = True
            self.written += await workflow.execute_activity(
                "foldline.write_events",
                {"path": self.path, "events_db": self.events_db, "events": batch, "requests": requests},
                start_to_close_timeout=timedelta(minutes=1),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=0.5), maximum_interval=timedelta(seconds=8)
                ),
                result_type=int,
            )
            self.writing = False
