"""The signal stream as OpenTelemetry traces, through the OpenTelemetry SDK (the ``otel`` extra).

:class:`OtelSink` subscribes to a run's bus and turns its events into spans
on a tracer from the SDK's ``TracerProvider`` you give it (an in-memory
exporter in tests, the OTLP/HTTP exporter of :mod:`signals.otlp` for
``foldline run --otlp URL``). It follows the OpenTelemetry semantic
conventions for generative AI as published in semantic conventions v1.38.0
(``gen-ai-spans.md`` and ``gen-ai-agent-spans.md``; the attribute names as the
``opentelemetry-semantic-conventions`` 0.66b2 package ships them):

- the run: ``invoke_workflow {scenario}`` (``gen_ai.operation.name`` =
  ``invoke_workflow``, ``gen_ai.workflow.name``);
- each node: ``invoke_agent {node}`` (``gen_ai.agent.name``, and
  ``gen_ai.conversation.id`` = its branch), under the run or under the node
  that spawned it;
- each request: ``chat {model}`` with ``gen_ai.request.model``,
  ``gen_ai.provider.name``, ``gen_ai.usage.input_tokens`` (every input token,
  cached ones included, as the conventions ask: Anthropic's ``input_tokens``
  plus the cache reads and writes), ``gen_ai.usage.output_tokens``,
  ``gen_ai.usage.cache_read.input_tokens``,
  ``gen_ai.usage.cache_creation.input_tokens`` and
  ``gen_ai.response.finish_reasons``; foldline's own usage split under
  ``foldline.usage.*`` so the report's figures add up exactly;
- each tool call: ``execute_tool {tool}`` (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``, ``gen_ai.tool.type``), from the response that asked
  for it to its result;
- each ``ContextDecision``, fold commit and cache rewrite: an event on its
  request's span (``foldline.context_decision``, ``foldline.fold_committed``,
  ``foldline.cache_rewrite``) with the event's fields as ``foldline.*``
  attributes. A fold is committed before the request it makes room for, so it
  lands on the branch's next request.

No message content is exported: the signal stream carries none (the
conventions' opt-in content attributes are not built), and never a key.
The sink's handler builds spans in memory and never does I/O; the exporter
behind the provider runs on its own thread with a bounded queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import attrs

from signals.bus import Gap, SignalBus, Subscription
from signals.envelope import Event
from signals.events import payload_of

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

SEMCONV_VERSION = "1.38.0"
"""The version of the OpenTelemetry semantic conventions (GenAI spans) this export follows."""
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
PREFIX = "foldline."
TRACES_PATH = "/v1/traces"


def traces_endpoint(url: str) -> str:
    """The traces URL of an OTLP/HTTP endpoint: ``http://host:port`` gets ``/v1/traces`` (as OTEL_EXPORTER_OTLP_ENDPOINT does)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--otlp: {url!r} is not an http:// or https:// URL of an OTLP/HTTP collector")
    if parts.username or parts.password:
        raise ValueError("--otlp: the URL must not carry a user name or password")
    path = parts.path if parts.path not in ("", "/") else TRACES_PATH
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def _attributes(data: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """An event's fields as span attributes: scalars as they are, lists of scalars as lists, the rest as text."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if value is None:
            continue
        if isinstance(value, (str, bool, int, float)):
            out[name] = value
        elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            out[name] = list(value)
        else:
            from runtime.values.canonical import canonical_json

            out[name] = canonical_json(value)
    return out


def usage_attributes(usage: Mapping[str, int]) -> dict[str, int]:
    """The GenAI usage attributes of one response, and foldline's exact split of it."""
    read = usage.get("cache_read_input_tokens", 0)
    written = usage.get("cache_write_5m_tokens", 0) + usage.get("cache_write_1h_tokens", 0)
    attributes = {
        "gen_ai.usage.input_tokens": usage.get("input_tokens", 0) + read + written,
        "gen_ai.usage.output_tokens": usage.get("output_tokens", 0),
        "gen_ai.usage.cache_read.input_tokens": read,
        "gen_ai.usage.cache_creation.input_tokens": written,
    }
    attributes |= {f"{PREFIX}usage.{key}": value for key, value in usage.items()}
    return attributes


@attrs.define(eq=False)
class _Trace:
    """The spans of one run being built: the run, each node, each open request, what waits for a request."""

    tracer: Tracer
    provider_name: str
    run: Span | None = None
    nodes: dict[str, Span] = attrs.field(factory=dict)
    requests: dict[str, Span] = attrs.field(factory=dict)
    pending: dict[str, list[tuple[str, dict[str, Any], int]]] = attrs.field(factory=dict)
    last_response: dict[str, int] = attrs.field(factory=dict)
    models: dict[str, str] = attrs.field(factory=dict)
    spans_started: int = 0

    def start(self, name: str, parent: Span | None, at: int, attributes: Mapping[str, Any]) -> Span:
        from opentelemetry import trace

        context = trace.set_span_in_context(parent) if parent is not None else None
        self.spans_started += 1
        return self.tracer.start_span(name, context=context, start_time=at, attributes=dict(attributes))

    def node_span(self, event: Event) -> Span | None:
        return self.nodes.get(event.node_id or "", self.run)

    def request_span(self, event: Event, at: int) -> Span:
        """The span of the event's request, opened (with the branch's waiting events) on first sight."""
        key = event.request_id or f"{event.branch_id}:?"
        span = self.requests.get(key)
        if span is None:
            attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": self.provider_name}
            attributes[f"{PREFIX}request_id"] = key
            span = self.start("chat", self.node_span(event), at, attributes)
            self.requests[key] = span
            for name, attrs_, when in self.pending.pop(event.branch_id or "", []):
                span.add_event(name, attrs_, timestamp=when)
        return span


class OtelSink:
    """Turns a bus's events into spans on ``tracer_provider`` (see the module doc).

    ``sink.attach(bus)`` subscribes with a ``block`` handler: it only builds
    spans in memory, so it never waits on a collector; a span is handed to the
    provider's processors when it ends. A sink serves one bus, once.
    """

    def __init__(self, tracer_provider: TracerProvider) -> None:
        from opentelemetry.sdk.trace import TracerProvider as SdkProvider  # the SDK, not only the API

        if not isinstance(tracer_provider, SdkProvider):
            raise TypeError(f"OtelSink: {tracer_provider!r} is not an opentelemetry.sdk.trace.TracerProvider")
        tracer = tracer_provider.get_tracer("foldline", schema_url=SCHEMA_URL)
        self._trace = _Trace(tracer, "anthropic")
        self._subscription: Subscription | None = None
        self.gaps = 0

    @property
    def spans_started(self) -> int:
        return self._trace.spans_started

    def attach(self, bus: SignalBus) -> Subscription:
        if self._subscription is not None:
            raise RuntimeError("OtelSink is already attached; make a new sink for another bus")
        self._subscription = bus.add_handler(self.handle, policy="block", name="otel", on_close=self.close)
        return self._subscription

    def handle(self, item: Event | Gap) -> None:
        """One event (or a gap) of the stream into the spans."""
        if isinstance(item, Gap):
            self.gaps += item.count
            return
        handler = _HANDLERS.get(item.type)
        if handler is not None:
            handler(self._trace, item, payload_of(item).to_data(), _ns(item.time))

    def close(self) -> None:
        """End every span still open (a run that stopped without RunFinished)."""
        _end_all(self._trace, None)


def _run_started(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    # gen_ai.provider.name names the API's family: the simulated and scripted providers speak Anthropic's.
    t.provider_name = "openai" if data["provider"] == "openai" else "anthropic"
    name = data.get("scenario") or "run"
    attributes = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": name}
    attributes |= {f"{PREFIX}run_id": event.run_id, f"{PREFIX}provider": data["provider"]}
    t.run = t.start(f"invoke_workflow {name}", None, at, attributes)


def _node_started(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    node = event.node_id or "?"
    parent = t.nodes.get(data["parent"]) if data.get("parent") else t.run
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": node,
        "gen_ai.provider.name": t.provider_name,
        f"{PREFIX}operation": data["operation"],
    }
    if event.branch_id:
        attributes["gen_ai.conversation.id"] = event.branch_id
    t.nodes[node] = t.start(f"invoke_agent {node}", parent or t.run, at, attributes)


def _node_ended(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    from opentelemetry.trace import Status, StatusCode

    span = t.nodes.get(event.node_id or "")
    if span is None:
        return
    for name, attributes, when in t.pending.pop(event.branch_id or "", []):
        span.add_event(name, attributes, timestamp=when)
    span.set_attributes(_attributes(data, f"{PREFIX}node."))
    if event.type == "NodeFailed":
        span.set_attribute("error.type", data["error_type"])
        span.set_status(Status(StatusCode.ERROR, data["message"][:500]))
    span.end(end_time=at)


def _node_skipped(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    node = event.node_id or "?"
    attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": node, f"{PREFIX}skipped": True}
    t.start(f"invoke_agent {node}", t.run, at, attributes | _attributes(data, f"{PREFIX}node.")).end(end_time=at)


def _on_request(name: str) -> Any:
    def handler(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
        span = t.request_span(event, at)
        span.add_event(name, _attributes(data, PREFIX), timestamp=at)
        if event.type == "ContextDecision" and data["action"] == "refuse":
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", "foldline.refused")
            span.set_status(Status(StatusCode.ERROR, data["reason"][:500]))
            span.end(end_time=at)
            t.requests.pop(event.request_id or "", None)

    return handler


def _request_sent(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    span = t.request_span(event, at)
    model = data.get("model")
    if model:
        span.update_name(f"chat {model}")
        span.set_attribute("gen_ai.request.model", model)
    span.set_attributes(
        {
            f"{PREFIX}request.digest": data["digest"],
            f"{PREFIX}request.bytes": data["bytes"],
            f"{PREFIX}request.attempt": data["attempt"],
            f"{PREFIX}request.intent": data["intent"],
        }
    )
    if data["attempt"] > 1:
        span.add_event(f"{PREFIX}retry", {f"{PREFIX}attempt": data["attempt"]}, timestamp=at)


def _response_received(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    span = t.request_span(event, at)
    span.set_attributes(usage_attributes(data["usage"]))
    if data.get("stop_reason"):
        span.set_attribute("gen_ai.response.finish_reasons", [data["stop_reason"]])
    span.set_attribute(f"{PREFIX}duration_s", data["duration_s"])
    cache = data.get("cache")
    if cache is not None:
        span.set_attributes(_attributes({"hit": cache.get("hit"), "g1": cache.get("g1")}, f"{PREFIX}cache."))
    span.end(end_time=at)
    t.requests.pop(event.request_id or f"{event.branch_id}:?", None)
    t.last_response[event.branch_id or ""] = at


def _fold_committed(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    t.pending.setdefault(event.branch_id or "", []).append((f"{PREFIX}fold_committed", _attributes(data, PREFIX), at))


def _tool_call(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    from opentelemetry.trace import Status, StatusCode

    start = min(t.last_response.get(event.branch_id or "", at), at)
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": data["name"],
        "gen_ai.tool.call.id": data["call_id"],
        "gen_ai.tool.type": "function",
        f"{PREFIX}tool.output_bytes": data["output_bytes"],
    }
    span = t.start(f"execute_tool {data['name']}", t.node_span(event), start, attributes)
    if data["is_error"]:
        span.set_attribute("error.type", "foldline.tool_error")
        span.set_status(Status(StatusCode.ERROR))
    span.end(end_time=at)


def _child_spawned(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    span = t.node_span(event)
    if span is not None:
        span.add_event(f"{PREFIX}child_spawned", _attributes(data, PREFIX), timestamp=at)


def _run_finished(t: _Trace, event: Event, data: dict[str, Any], at: int) -> None:
    _end_all(t, at, data)


def _end_all(t: _Trace, at: int | None, data: Mapping[str, Any] | None = None) -> None:
    from opentelemetry.trace import Status, StatusCode

    for span in [*t.requests.values(), *t.nodes.values()]:
        if span.is_recording():
            span.end(end_time=at)
    t.requests.clear()
    if t.run is not None and t.run.is_recording():
        if data is not None:
            t.run.set_attribute(f"{PREFIX}status", data["status"])
            t.run.set_attribute(f"{PREFIX}bytes_unrecoverable", data.get("bytes_unrecoverable", 0))
            if data["status"] != "ok":
                t.run.set_status(Status(StatusCode.ERROR, "a node failed"))
        t.run.end(end_time=at)


_HANDLERS = {
    "RunStarted": _run_started,
    "NodeStarted": _node_started,
    "NodeFinished": _node_ended,
    "NodeFailed": _node_ended,
    "NodeSkipped": _node_skipped,
    "ContextDecision": _on_request(f"{PREFIX}context_decision"),
    "CacheRewrite": _on_request(f"{PREFIX}cache_rewrite"),
    "RequestSent": _request_sent,
    "ResponseReceived": _response_received,
    "FoldCommitted": _fold_committed,
    "ToolCallFinished": _tool_call,
    "ChildSpawned": _child_spawned,
    "RunFinished": _run_finished,
}
