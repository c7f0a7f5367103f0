"""Exporting a run's spans over OTLP/HTTP (protobuf), bounded so a collector never slows the run.

:func:`otlp_export` builds an SDK ``TracerProvider`` whose spans go through a
``BatchSpanProcessor`` (its own thread, a bounded queue: a span that finds it
full is dropped) to the SDK's ``OTLPSpanExporter``, wrapped to count what the
collector accepted. :meth:`OtlpExport.finish` flushes what is left for at most
``flush_s`` seconds (not at all when the collector already failed an export
this run) and returns the counts: every span not accepted by the collector is
reported as dropped, as the bus reports gaps.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import attrs
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from signals.otel import OtelSink, traces_endpoint

DEFAULT_QUEUE = 2_048
DEFAULT_FLUSH_S = 2.0


@attrs.frozen
class ExportCounts:
    """What became of a run's spans: ``ended`` by the sink, ``exported`` (the collector said yes), ``dropped``."""

    ended: int
    exported: int
    failed_exports: int

    @property
    def dropped(self) -> int:
        return max(0, self.ended - self.exported)


class _Counting(SpanExporter):
    """An exporter that counts the spans the wrapped one exported, and the exports that failed."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported = 0
        self.failures = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        with self._lock:
            if result == SpanExportResult.SUCCESS:
                self.exported += len(spans)
            else:
                self.failures += 1
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class _Ended(SpanProcessor):
    """A span processor that counts the spans that ended (each ended span is offered to the queue once)."""

    def __init__(self) -> None:
        self.count = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def on_end(self, span: Any) -> None:
        self.count += 1

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class OtlpExport:
    """A run's OTLP/HTTP export: ``sink`` to attach to the bus, :meth:`finish` at the end (see the module doc)."""

    def __init__(
        self,
        url: str,
        *,
        max_queue_size: int = DEFAULT_QUEUE,
        flush_s: float = DEFAULT_FLUSH_S,
        exporter: SpanExporter | None = None,
    ) -> None:
        self.endpoint = traces_endpoint(url)
        self.flush_s = flush_s
        # The exporter logs each failed export; foldline counts them and says so once, at the end.
        logging.getLogger("opentelemetry.exporter.otlp.proto.http").setLevel(logging.CRITICAL)
        logging.getLogger("opentelemetry.sdk._shared_internal").setLevel(logging.CRITICAL)
        inner = exporter if exporter is not None else OTLPSpanExporter(endpoint=self.endpoint, timeout=flush_s)
        self._counting = _Counting(inner)
        self._ended = _Ended()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "foldline"}), shutdown_on_exit=False)
        self._batch = BatchSpanProcessor(
            self._counting,
            max_queue_size=max_queue_size,
            max_export_batch_size=min(512, max_queue_size),
            schedule_delay_millis=500,
            export_timeout_millis=flush_s * 1000,
        )
        self.provider.add_span_processor(self._ended)
        self.provider.add_span_processor(self._batch)
        self.sink = OtelSink(self.provider)

    def finish(self) -> ExportCounts:
        """Flush for at most ``flush_s`` (none if the collector failed already), then count; never raises."""
        failed_already = self._counting.failures > 0
        worker = threading.Thread(target=self._batch.shutdown, name="foldline-otlp-flush", daemon=True)
        worker.start()
        if not failed_already:
            worker.join(self.flush_s)
        return ExportCounts(self._ended.count, self._counting.exported, self._counting.failures)
