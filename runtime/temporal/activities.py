"""The activities: the I/O a flow workflow does, run by workers.

- ``foldline.provider_attempt``: ONE attempt of a compiled request (main or a
  fold's side summary request). A failed attempt comes back as a value, not an
  error, so the workflow's send pipeline applies the SDK's retry rules itself
  (measuring, deciding and publishing every attempt, as in process); Temporal's
  own retry policy only covers a lost worker or a timed-out attempt, and the
  result says how many such tries were lost (``lost``: the provider may have
  answered, and billed, each; the report counts them as attempts).
- ``foldline.serving`` (local) / ``foldline.serves``: whether a flow's affinity
  queue is served: by the worker running the flow (it knows the queues it
  polls), else by the probe the flow schedules on that queue, which a worker
  there starts (the flow's nodes then run there).
- ``foldline.count_tokens``: the provider's count of a compiled request's
  payload (its free count-tokens endpoint), so a flow on Temporal decides in
  the provider's tokens exactly as in process; a failed count comes back as a
  value (the send then decides on the conservative fallback, as in process).
- ``foldline.tool_call``: one call of a registry tool (never ``spawn``, which
  the workflow's scheduler handles).
- ``foldline.write_events``: a batch of events appended to a JSONL sink and/or
  inserted into a SQLite store file or a Postgres table
  (:mod:`runtime.temporal.sinks`), exactly once per ``seq`` (a retried batch
  skips what the sink already holds); with a store file, the nodes' request
  records too, exactly once per request id.
- ``foldline.put_bodies`` / ``foldline.get_bodies``: message bodies in the body
  store, each under its own SHA-256 (a spawned child's seed names them by
  digest, :mod:`runtime.temporal.seed`).

The provider attempts and tool calls heartbeat while they run, so a worker
that dies is noticed within the heartbeat timeout and the attempt moves to
another worker; the quick ones (a count, the bodies) have a short
start-to-close bound instead.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import anyio
import attrs
from temporalio import activity
from temporalio.exceptions import ApplicationError

from actors.tools import ToolContext, ToolRegistry
from actors.tools.executor import scrub_output, scrub_text
from runtime.contract.provider import AttemptFailed, ProviderError, ProviderReply, scrubber_of
from runtime.errors import FoldlineError
from runtime.temporal.bodies import BodyStore, redacted
from runtime.temporal.sinks import EventSink, SqliteEventSink, append_events, open_event_sink
from runtime.values.image_rules import MESSAGES_IMAGES, ImageRule
from runtime.values.usage import Usage

T = TypeVar("T")

HEARTBEAT_EVERY_S = 1.0


class PayloadSender(Protocol):
    """A provider that sends a compiled request's payload (``AnthropicProvider`` is one)."""

    async def send_payload(self, payload: dict[str, Any], *, node_id: str | None) -> ProviderReply: ...


@runtime_checkable
class KeyRoutedSender(Protocol):
    """A provider that routes its prompt cache by a key it is given (Anthropic's API takes none).

    On Temporal the key is the flow's root branch id, so every node of a flow
    (a spawned child shares its emitter's prefix) lands on the same cache.
    """

    async def send_keyed_payload(
        self, payload: dict[str, Any], *, node_id: str | None, cache_key: str
    ) -> ProviderReply: ...


@runtime_checkable
class PayloadCounter(Protocol):
    """A provider that counts a compiled request's payload (``AnthropicProvider``: ``messages/count_tokens``)."""

    async def count_payload_tokens(self, payload: Mapping[str, Any]) -> int: ...


def usage_to_wire(usage: Usage) -> dict[str, Any]:
    """A usage in the Anthropic shape (``Usage.from_anthropic`` reads it back exactly)."""
    return {
        "input_tokens": usage.input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": usage.cache_write_5m_tokens,
            "ephemeral_1h_input_tokens": usage.cache_write_1h_tokens,
        },
        "output_tokens": usage.output_tokens,
    }


def reply_to_wire(reply: ProviderReply) -> dict[str, Any]:
    return {
        "content": list(reply.content),
        "stop_reason": reply.stop_reason,
        "usage": usage_to_wire(reply.usage),
        "model": reply.model,
        "response_id": reply.response_id,
        "context_management": reply.context_management,
    }


def reply_from_wire(data: Mapping[str, Any]) -> ProviderReply:
    return ProviderReply(
        content=tuple(dict(block) for block in data["content"]),
        stop_reason=data.get("stop_reason"),
        usage=Usage.from_anthropic(data["usage"]),
        model=str(data.get("model", "")),
        response_id=data.get("response_id"),
        context_management=data.get("context_management"),
    )


async def _heartbeating(work: Callable[[], Awaitable[T]], *details: Any) -> T:
    """Run ``work`` while heartbeating every second (the workflow sets the timeout that notices a lost worker).

    ``details`` go with every heartbeat: the server keeps the last for the activity's next try. A local
    activity (a tool call) does not heartbeat: it runs inside its workflow task, which its worker keeps alive.
    """
    if activity.info().is_local:
        return await work()
    result: list[T] = []
    async with anyio.create_task_group() as tg:

        async def beat() -> None:
            while True:
                activity.heartbeat(*details)
                await anyio.sleep(HEARTBEAT_EVERY_S)

        tg.start_soon(beat)
        result.append(await work())
        tg.cancel_scope.cancel()
    return result[0]


def _lost_tries() -> int:
    """How many earlier tries of this provider attempt had begun sending when their worker was lost.

    A try that sends heartbeats ``{"sending": True, "lost": n}`` (n: the tries lost before it); the server
    keeps the last details for the next try, so a try that failed before sending (a worker without the
    provider) adds nothing.
    """
    if not activity.in_activity():
        return 0
    details = activity.info().heartbeat_details
    last = details[0] if details else None
    if isinstance(last, Mapping) and last.get("sending"):
        return int(last.get("lost") or 0) + 1
    return 0


@attrs.define(eq=False)
class ActivityHost:
    """What a worker's activities use: its providers by kind, its tool registry, and where sinks may write."""

    providers: Mapping[str, PayloadSender]
    registry: ToolRegistry
    on_response: Callable[[], None] | None = None
    """Called after each completed provider response (a test's crash point)."""
    sinks: dict[str, EventSink] = attrs.field(factory=dict)
    """The events sinks this worker has opened, by location (a Postgres sink keeps its connection)."""

    def _provider(self, kind: str) -> PayloadSender:
        """This worker's provider of ``kind``; a ProviderError naming the kinds it has when it has none."""
        provider = self.providers.get(kind)
        if provider is None:
            raise ProviderError(
                f"this worker has no {kind!r} provider (it has: {', '.join(sorted(self.providers)) or 'none'})"
            )
        return provider

    @activity.defn(name="foldline.provider_attempt")
    async def provider_attempt(self, arg: dict[str, Any]) -> dict[str, Any]:
        kind = str(arg["provider"])
        provider = self._provider(kind)
        payload = json.loads(arg["payload"])
        node_id, key = arg.get("node_id"), arg.get("cache_key")
        if isinstance(provider, KeyRoutedSender) and key:
            keyed = provider

            def send() -> Awaitable[ProviderReply]:
                return keyed.send_keyed_payload(payload, node_id=node_id, cache_key=str(key))

        else:

            def send() -> Awaitable[ProviderReply]:
                return provider.send_payload(payload, node_id=node_id)

        lost_before = _lost_tries()
        lost = {"lost": lost_before} if lost_before else {}
        try:
            reply = await _heartbeating(send, {"sending": True, "lost": lost_before})
        except AttemptFailed as failed:
            return {"failed": _failure(failed) | {"headers": dict(failed.headers)}} | lost
        except ProviderError as error:
            return {"error": _failure(error)} | lost
        if self.on_response is not None:
            self.on_response()
        return {"ok": reply_to_wire(reply)} | lost

    @activity.defn(name="foldline.count_tokens")
    async def count_tokens(self, arg: dict[str, Any]) -> dict[str, Any]:
        """The provider's input-token count of a compiled request's payload: ``{"tokens": n}`` or ``{"error": ...}``."""
        kind = str(arg["provider"])
        provider = self._provider(kind)
        if not isinstance(provider, PayloadCounter):
            message = f"count_tokens: this worker's {kind!r} provider has no count-tokens endpoint"
            return {"error": {"message": message, "status": None, "error_type": "count_unavailable"}}
        try:
            tokens = await provider.count_payload_tokens(json.loads(arg["payload"]))
        except ProviderError as error:
            return {"error": _failure(error)}
        return {"tokens": tokens}

    @activity.defn(name="foldline.tool_call")
    async def tool_call(self, arg: dict[str, Any]) -> dict[str, Any]:
        tool = self.registry.get(str(arg["name"]))
        context = ToolContext(
            node_id=arg.get("node_id"),
            branch_id=str(arg["branch_id"]),
            image_rule=ImageRule(arg.get("image_rule", MESSAGES_IMAGES.name)),
            scrub=self._scrub,
        )
        try:
            value = await _heartbeating(lambda: tool.func(arg["arguments"], context))
        except FoldlineError as error:
            message = scrub_text(str(error), self._scrub)
            return {"failed": {"type": type(error).__name__, "message": message}}
        return {"value": scrub_output(value, self._scrub)}

    def _scrub(self, text: str) -> str:
        """``text`` without any of this worker's providers' keys (a tool's text leaves through the workflow)."""
        for provider in self.providers.values():
            scrub = scrubber_of(provider)
            if scrub is not None:
                text = scrub(text)
        return text

    @activity.defn(name="foldline.write_events")
    async def write_events(self, arg: dict[str, Any]) -> int:
        """Write a batch to the run's sinks (a JSONL file; a SQLite store file or Postgres); return the JSONL lines written.

        Request records (``requests``) go only into a SQLite store file, the one sink that stores branches.
        """
        written = 0
        if arg.get("path"):
            written = append_events(Path(arg["path"]), arg["events"])
        location = arg.get("events_db")
        if location:
            sink = self.sinks.get(location)
            if sink is None:
                sink = self.sinks[location] = open_event_sink(location)
            if arg["events"]:
                sink.write(arg["events"])
            if arg.get("requests"):
                if not isinstance(sink, SqliteEventSink):
                    raise ApplicationError(
                        f"write_events: request records go into a SQLite store, not {redacted(location)}",
                        non_retryable=True,
                    )
                sink.write_requests(arg["requests"])
        return written


@attrs.define(eq=False)
class BodyActivities:
    """Message bodies in the deployment's body store, each under the SHA-256 of its canonical content."""

    store: BodyStore

    @activity.defn(name="foldline.put_bodies")
    async def put_bodies(self, arg: dict[str, Any]) -> int:
        """Store each body under its digest (refusing one that does not hash to it); return how many."""
        bodies: dict[str, str] = arg["bodies"]
        for digest, body in bodies.items():
            data = body.encode("utf-8")
            if hashlib.sha256(data).hexdigest() != digest:
                raise ApplicationError(
                    f"put_bodies: the body given for {digest} does not hash to it", non_retryable=True
                )
            self.store.put(digest, data)
        return len(bodies)

    @activity.defn(name="foldline.get_bodies")
    async def get_bodies(self, arg: dict[str, Any]) -> dict[str, str]:
        """The bodies of the given digests (the store checks each against its digest)."""
        return {digest: self.store.get(digest).decode("utf-8") for digest in arg["digests"]}


@attrs.frozen
class ServedQueues:
    """The task queues this worker process polls (the ones :func:`~runtime.temporal.worker.build_worker` started)."""

    queues: frozenset[str]

    @activity.defn(name="foldline.serving")
    async def serving(self, queue: str) -> bool:
        """Whether this worker process polls ``queue`` (a local activity of the flow: its own worker answers)."""
        return queue in self.queues


@activity.defn(name="foldline.serves")
async def serves(queue: str) -> str:
    """The probe of an affinity queue (:func:`runtime.temporal.flow_host.node_queue`): starting it is the answer."""
    return queue


def _failure(error: ProviderError) -> dict[str, Any]:
    return {"message": str(error), "status": error.status, "error_type": error.error_type}
