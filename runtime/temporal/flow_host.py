"""The flow inside a workflow: foldline's own runtime, with its I/O edges made activities.

:func:`run_flow_workflow` runs a scenario's flow the way
:func:`runtime.scenario_run.run_scenario` does in process (the same
:class:`~runtime.runtime.Runtime`, scheduler, send pipeline and pure core),
with the host's edges swapped for deterministic ones:

- the provider is :class:`ActivityProvider`: each attempt is a
  ``foldline.provider_attempt`` activity (retried by the pipeline under the
  SDK's rules; Temporal retries only a lost worker, with the SDK's backoff);
- every registry tool but ``spawn`` is a ``foldline.tool_call`` activity
  (``spawn`` is the scheduler's own);
- the clock, the monotonic clock and the retry jitter are the workflow's, and
  the ids come from a :class:`~runtime.ids.CountingIds` named after the
  workflow, so a replay rebuilds every id;
- events are numbered by the in-workflow bus (``seq``) and reach the JSONL
  sink through ``foldline.write_events`` batches, in seq order.

Only called from inside a workflow (it reads ``temporalio.workflow``); runs on
asyncio only, as every Temporal workflow does.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import anyio
import attrs
from temporalio import workflow
from temporalio.common import RetryPolicy

from actors.tools import BUILTIN_TOOLS, Tool, ToolContext, ToolFailed, ToolRegistry
from runtime.compiler import Request
from runtime.config.loader import loads_scenario
from runtime.ids import CountingIds
from runtime.providers.base import AttemptFailed, CountUnavailable, ProviderError, ProviderReply
from runtime.providers.retry import INITIAL_RETRY_DELAY, MAX_RETRY_DELAY
from runtime.runtime import Runtime
from runtime.scenario_run import build_flow
from runtime.temporal.activities import reply_from_wire
from signals.bus import Gap
from signals.envelope import Event

IN_WORKFLOW_TOOLS = frozenset({"spawn"})
"""Tools the workflow runs itself (they act on the flow, not the world)."""
EVENT_BATCH = 500
ATTEMPT_TIMEOUT = timedelta(minutes=10)
HEARTBEAT_TIMEOUT = timedelta(seconds=5)
"""A worker that stops heartbeating this long is taken as lost; its attempt moves to another worker."""


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
    caches_by_prefix: bool = True
    counts_tokens: bool = False
    """No count-tokens activity is built: an uncalibrated model decides on its family's prior."""

    async def count_tokens(self, request: Request) -> int:
        raise CountUnavailable("the Temporal activity provider has no count-tokens activity (not built)")

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        result = await workflow.execute_activity(
            "foldline.provider_attempt",
            {"provider": self.kind, "payload": request.payload_text(), "node_id": node_id},
            start_to_close_timeout=ATTEMPT_TIMEOUT,
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=sdk_retry_policy(self.max_retries),
            result_type=dict,
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


def _activity_tool(tool: Tool) -> Tool:
    name = tool.name

    async def call(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        result = await workflow.execute_activity(
            "foldline.tool_call",
            {"name": name, "arguments": dict(arguments), "node_id": context.node_id, "branch_id": context.branch_id},
            start_to_close_timeout=ATTEMPT_TIMEOUT,
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=sdk_retry_policy(2),
            result_type=dict,
        )
        if "failed" in result:
            raise ToolFailed(result["failed"]["message"])
        return result["value"]

    return Tool(tool.spec, call)


def activity_registry(registry: ToolRegistry) -> ToolRegistry:
    """The registry a workflow uses: the same specs; calls go to the workers (``spawn`` stays in the workflow)."""
    return ToolRegistry(
        {name: tool if name in IN_WORKFLOW_TOOLS else _activity_tool(tool) for name, tool in registry.tools.items()}
    )


@attrs.define(eq=False)
class EventPump:
    """Collects the bus's events and writes them to the sinks (JSONL, SQLite) through activities, in seq order."""

    path: str | None
    sqlite: str | None
    pending: list[dict[str, Any]] = attrs.field(factory=list)
    closing: bool = False
    written: int = 0

    def take(self, item: Event | Gap) -> None:
        if isinstance(item, Gap):
            raise TypeError("the event pump's blocking subscription lost events")
        self.pending.append(item.to_json())

    async def run(self) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self.pending) or self.closing)
            if not self.pending:
                return
            batch, self.pending = self.pending[:EVENT_BATCH], self.pending[EVENT_BATCH:]
            self.written += await workflow.execute_activity(
                "foldline.write_events",
                {"path": self.path, "sqlite": self.sqlite, "events": batch},
                start_to_close_timeout=timedelta(minutes=1),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=0.5), maximum_interval=timedelta(seconds=8)
                ),
                result_type=int,
            )


async def run_flow_workflow(arg: Mapping[str, Any]) -> dict[str, Any]:
    """Run the scenario ``arg`` describes inside the current workflow; return its report."""
    scenario = loads_scenario(arg["scenario_text"], path_label=arg["scenario_label"], tool_names=BUILTIN_TOOLS.names())
    spec = scenario.provider if not arg.get("provider") else scenario.provider.with_kind(arg["provider"])
    flow = build_flow(scenario)
    info = workflow.info()
    provider = ActivityProvider(spec.kind, spec.kind, spec.max_retries)
    sinks = (arg.get("signals_path"), arg.get("events_db"))
    pump = EventPump(*sinks) if any(sinks) else None
    rt = Runtime(
        provider=provider,
        model=spec.model_config,
        registry=activity_registry(BUILTIN_TOOLS),
        clock=lambda: workflow.now().timestamp(),
        monotonic=workflow.time,
        ids=CountingIds(prefix=info.workflow_id),
        run_id=str(arg["run_id"]),
        scenario=scenario.name,
        jitter=workflow.random().random,
    )
    async with anyio.create_task_group() as tg:
        if pump is not None:
            tg.start_soon(pump.run)
        async with rt:
            if pump is not None:
                rt.signals.add_handler(pump.take, policy="block", maxsize=4096, name="temporal-sink")
            await rt.run(flow)
            report = rt.report()
        if pump is not None:
            pump.closing = True
    return {"report": report, "events_written": pump.written if pump is not None else 0}
