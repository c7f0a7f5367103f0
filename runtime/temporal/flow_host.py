"""A flow's I/O edges inside workflows, made activities.

The flow workflow (:mod:`runtime.temporal.scheduler`) and each node's
workflow (:mod:`runtime.temporal.node_host`) run foldline's own send
pipeline and pure core, with the host's edges swapped for deterministic ones:

- the provider is :class:`ActivityProvider`: each attempt is a
  ``foldline.provider_attempt`` activity (retried by the pipeline under the
  SDK's rules; Temporal retries only a lost worker, with the SDK's backoff),
  each exact count a ``foldline.count_tokens`` local activity;
- every registry tool but ``spawn`` is a ``foldline.tool_call`` local activity
  (``spawn`` is the scheduler's own);

Where they run (:class:`ActivityRoute`): a node workflow runs on its flow's
affinity queue when a worker serves it (:func:`node_queue`), and its provider
attempts go to the node's own queue, so Temporal hands each to the worker
that scheduled it in the reply to that workflow task (eager dispatch: no
round trip through the queue) and the flow's prompt cache stays on its
workers. The short calls that need no affinity (tool calls, counts, body
reads and writes) are local activities: run by the node's worker inside the
workflow task, with no task of their own and no workflow task to resume
after them; their results are recorded in history as markers.
- the clock, the monotonic clock and the retry jitter are the workflow's, and
  the ids come from a :class:`~runtime.values.ids.CountingIds` named after the
  workflow, so a replay rebuilds every id;
- events are numbered by the flow workflow's bus (``seq``) and reach the
  sinks through ``foldline.write_events`` batches (:class:`EventPump`, local
  activities of the flow's worker), in seq order.

Only called from inside a workflow (it reads ``temporalio.workflow``); runs on
asyncio only, as every Temporal workflow does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import attrs
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType

from actors.tools import Tool, ToolContext, ToolFailed, ToolRegistry
from runtime.contract.provider import AttemptFailed, CountUnavailable, ProviderError, ProviderReply
from runtime.contract.retry import INITIAL_RETRY_DELAY, MAX_RETRY_DELAY
from runtime.providers.openai_wire import session_key
from runtime.request.compiler import Request
from runtime.temporal import DEFAULT_HEARTBEAT_S
from runtime.temporal.activities import reply_from_wire
from runtime.temporal.settle import settled
from runtime.values.image_rules import CHAT_IMAGES, MESSAGES_IMAGES, ImageRule
from signals.bus import Gap
from signals.envelope import Event

IN_WORKFLOW_TOOLS = frozenset({"spawn"})
"""Tools the workflow runs itself (they act on the flow, not the world)."""
EVENT_BATCH = 500
ATTEMPT_TIMEOUT = timedelta(minutes=10)
QUICK_TIMEOUT = timedelta(seconds=15)
"""The whole time of one try of a quick local activity (a count, body reads and writes). A worker lost while it runs
one loses the workflow task with it: the task, and the local activity, run again on another worker after the
workflow task timeout."""
HEARTBEAT_TIMEOUT = timedelta(seconds=DEFAULT_HEARTBEAT_S)
"""A worker that stops heartbeating this long is taken as lost; its attempt moves to another worker (a flow's
``heartbeat_s`` sets another, ``--heartbeat-timeout``)."""
AFFINITY_WAIT = timedelta(seconds=5)
"""How long a flow waits for a worker on its affinity queue (:func:`node_queue`) before its nodes run on the shared one."""
AFFINITY_SLOTS = 4
"""How many affinity task queues a deployment has (``QUEUE@0`` .. ``QUEUE@3``); a flow prefers one."""
COUNTING_KINDS = frozenset({"anthropic", "simulated"})
"""Provider kinds whose workers count tokens (``AnthropicProvider``: the Messages API's ``messages/count_tokens``)."""
NO_RETRY = RetryPolicy(maximum_attempts=1)
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
    """The task queue a flow's nodes run on when served: a consistent hash of the flow id over the deployment's slots."""
    import hashlib

    key = int.from_bytes(hashlib.sha256(flow_id.encode("utf-8")).digest()[:8], "big")
    return f"{task_queue}@{jump_hash(key, slots)}"


async def node_queue(affinity: str | None, wait: timedelta) -> str:
    """Where a flow's node workflows run: its affinity queue when a worker serves it.

    The worker running the flow answers first (``foldline.serving``, a local
    activity: whether it polls that queue itself, as a worker serving every
    slot does); else a probe (``foldline.serves``) is scheduled on the queue.
    A probe that no worker starts within ``wait``, or that fails, leaves the
    nodes on the flow's own (shared) queue, with a warning naming the queue:
    the flow runs, without eager dispatch or cache affinity. Both answers are
    recorded in history (a replay takes the same queue). Once the nodes run
    there, a node whose queue loses every worker waits for one, as a flow
    waits for a worker on its own queue.
    """
    own = workflow.info().task_queue
    if affinity is None or affinity == own:
        return own
    with contextlib.suppress(ActivityError):  # a worker without the local check: the probe decides
        if await settled(
            workflow.start_local_activity(
                "foldline.serving", affinity, start_to_close_timeout=QUICK_TIMEOUT, retry_policy=NO_RETRY
            )
        ):
            return affinity
    try:
        probe = workflow.start_activity(
            "foldline.serves",
            affinity,
            task_queue=affinity,
            schedule_to_start_timeout=wait,
            start_to_close_timeout=QUICK_TIMEOUT,
            retry_policy=NO_RETRY,
        )
        await settled(probe)
    except ActivityError as error:
        cause = error.cause
        if isinstance(cause, TimeoutError) and cause.type == TimeoutType.SCHEDULE_TO_START:
            workflow.logger.warning("no worker on %s within %s: the nodes run on %s", affinity, wait, own)
        else:
            workflow.logger.warning("the probe of %s failed (%s): the nodes run on %s", affinity, cause or error, own)
        return own
    return affinity


@attrs.define(eq=False)
class ActivityRoute:
    """How a node's activities run: provider attempts on the node's own queue (eager), the rest as local activities.

    ``cache_key``: the flow's root branch, which the provider sees.
    """

    cache_key: str
    heartbeat: timedelta = HEARTBEAT_TIMEOUT
    on_lost: Callable[[int], None] | None = None
    """Told how many tries of a provider attempt were lost with their worker (the node's outbox, to the flow)."""

    async def execute(self, name: str, arg: dict[str, Any], retry_policy: RetryPolicy) -> Any:
        """Run activity ``name`` (one that heartbeats) on the node workflow's own task queue."""
        return await settled(
            workflow.start_activity(
                name,
                arg,
                start_to_close_timeout=ATTEMPT_TIMEOUT,
                heartbeat_timeout=self.heartbeat,
                retry_policy=retry_policy,
            )
        )

    async def local(
        self, name: str, arg: dict[str, Any], retry_policy: RetryPolicy, timeout: timedelta = QUICK_TIMEOUT
    ) -> Any:
        """Run activity ``name`` as a local activity of the node's worker (each try bounded by ``timeout``)."""
        return await settled(
            workflow.start_local_activity(name, arg, start_to_close_timeout=timeout, retry_policy=retry_policy)
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
            result = await self.route.local("foldline.count_tokens", arg, COUNT_RETRIES)
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
        if result.get("lost") and self.route.on_lost is not None:  # sent (and maybe billed) by a worker that died
            self.route.on_lost(int(result["lost"]))
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
        result = await route.local("foldline.tool_call", arg, sdk_retry_policy(2), ATTEMPT_TIMEOUT)
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
            write = workflow.start_local_activity(  # by the flow's worker, in its workflow task
                "foldline.write_events",
                {"path": self.path, "events_db": self.events_db, "events": batch, "requests": requests},
                start_to_close_timeout=timedelta(minutes=1),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=0.5), maximum_interval=timedelta(seconds=8)
                ),
                result_type=int,
            )
            self.written += await settled(write)  # a failing flow cancels a write it waits on (retried meanwhile)
            self.writing = False
