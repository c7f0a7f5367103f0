"""foldline: signals, the versioned event stream of a run (DESIGN.md section 9).

- :mod:`signals.envelope`: :class:`Event`, the envelope every event carries.
- :mod:`signals.events`: one frozen class per event type (``RunStarted`` ...
  ``ContextDecision`` ... ``CacheRewrite``).
- :mod:`signals.bus`: :class:`SignalBus`, publishing to per-subscriber bounded
  buffers (:mod:`signals.subscription`) with ``block`` or ``drop_oldest`` and a
  visible gap count.
- :mod:`signals.sinks`: :class:`JsonlSink` and :func:`read_jsonl`.
- :mod:`signals.throughput`: the bus micro-benchmark.

The names below are loaded on first use, so ``import signals`` stays cheap
(the bus pulls in anyio and structlog only when it is used).
"""

from __future__ import annotations

from runtime.values.exports import lazy_getattr

_EXPORTS = {
    "SCHEMA_VERSION": "signals.envelope",
    "Event": "signals.envelope",
    "InvalidEventError": "signals.envelope",
    "EVENT_TYPES": "signals.events",
    "RunStarted": "signals.events",
    "RunFinished": "signals.events",
    "NodeStarted": "signals.events",
    "NodeFinished": "signals.events",
    "NodeFailed": "signals.events",
    "NodeSkipped": "signals.events",
    "ChildSpawned": "signals.events",
    "RequestSent": "signals.events",
    "ResponseReceived": "signals.events",
    "ToolCallFinished": "signals.events",
    "ContextDecision": "signals.events",
    "FoldCommitted": "signals.events",
    "CacheRewrite": "signals.events",
    "ReplyDelta": "signals.events",
    "LOW_PRIORITY_TYPES": "signals.events",
    "payload_of": "signals.events",
    "BLOCK": "signals.bus",
    "DROP_OLDEST": "signals.bus",
    "BusClosedError": "signals.bus",
    "Gap": "signals.bus",
    "SignalBus": "signals.bus",
    "Subscription": "signals.bus",
    "SubscriptionStatistics": "signals.bus",
    "JsonlSink": "signals.sinks",
    "read_jsonl": "signals.sinks",
    "measure_bus_throughput": "signals.throughput",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
