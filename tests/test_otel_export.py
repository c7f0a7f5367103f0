"""The signal stream as OpenTelemetry traces (the ``otel`` extra).

The span and attribute checks read the SDK's in-memory exporter (on asyncio and
trio); the real round trip sends OTLP/HTTP protobuf from ``foldline run --otlp``
to a receiver started here on loopback, which decodes each request with the
``opentelemetry-proto`` messages a collector uses. A collector that is absent,
or too slow for the queue, never fails the run; its drops are counted.
"""

from __future__ import annotations

import gzip
import io
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed (pip install 'foldline[otel]')")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runtime.cli.main import main
from runtime.config.loader import load_scenario
from runtime.scenarios.run import run_scenario
from runtime.scenarios.tools import run_tools
from signals.otel import OtelSink, traces_endpoint, usage_attributes
from signals.otlp import OtlpExport

ROOT = Path(__file__).resolve().parents[1]
FOLD = str(ROOT / "scenarios" / "fold.toml")
QUICKSTART = str(ROOT / "scenarios" / "quickstart.toml")
USAGE_KEYS = (
    "input_tokens",
    "cache_read_input_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
)


def _check_usage_adds_up(totals: Counter[str], usage: dict[str, int]) -> None:
    """The spans' usage attributes add up to the report's usage, field by field."""
    for key in USAGE_KEYS:
        assert totals[f"foldline.usage.{key}"] == usage[key], key
    assert totals["gen_ai.usage.output_tokens"] == usage["output_tokens"]
    assert totals["gen_ai.usage.cache_read.input_tokens"] == usage["cache_read_input_tokens"]
    written = usage["cache_write_5m_tokens"] + usage["cache_write_1h_tokens"]
    assert totals["gen_ai.usage.cache_creation.input_tokens"] == written
    every_input = usage["input_tokens"] + usage["cache_read_input_tokens"] + written
    assert totals["gen_ai.usage.input_tokens"] == every_input


# -- in memory: the spans, their attributes and events ----------------------------------------------


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_fold_run_becomes_genai_spans_whose_usage_adds_up(anyio_backend: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OtelSink(provider)
    tools = run_tools(FOLD)
    scenario = load_scenario(FOLD, tool_names=tools.names())
    run = await run_scenario(scenario, registry=tools.registry(scenario), attach=[sink.attach])
    report = run.report
    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}

    operations = Counter(span.attributes["gen_ai.operation.name"] for span in spans)
    assert operations["invoke_workflow"] == 1
    assert operations["invoke_agent"] == len(report["nodes"])
    assert operations["chat"] == report["attempts"]
    assert operations["execute_tool"] == sum(
        tool["calls"] for node in report["nodes"].values() for tool in node["tools"].values()
    )

    (root,) = [span for span in spans if span.parent is None]
    assert root.name == "invoke_workflow fold" and root.attributes["gen_ai.workflow.name"] == "fold"
    agents = {span.attributes["gen_ai.agent.name"]: span for span in spans if span.name.startswith("invoke_agent ")}
    assert by_id[agents["digest"].parent.span_id] is agents["lead"]  # a spawned child sits under its parent
    assert by_id[agents["reader"].parent.span_id] is root
    for span in spans:
        if span.attributes["gen_ai.operation.name"] in ("chat", "execute_tool"):
            assert by_id[span.parent.span_id].name.startswith("invoke_agent ")
            assert span.start_time <= span.end_time
        if span.attributes["gen_ai.operation.name"] == "chat":
            assert (
                span.name == "chat claude-haiku-5-5" and span.attributes["gen_ai.request.model"] == "claude-haiku-5-5"
            )
            assert span.attributes["gen_ai.provider.name"] == "anthropic"
            assert span.attributes["gen_ai.response.finish_reasons"] in (("tool_use",), ("end_turn",))

    totals: Counter[str] = Counter()
    for span in spans:
        for key, value in span.attributes.items():
            if key.startswith(("gen_ai.usage.", "foldline.usage.")):
                totals[key] += value
    _check_usage_adds_up(totals, report["usage"])

    events = Counter(event.name for span in spans for event in span.events)
    assert events["foldline.context_decision"] == report["decisions"]
    assert events["foldline.fold_committed"] == report["fold_commits"] > 0
    assert events["foldline.cache_rewrite"] == report["rewrites"]["explained"] + report["rewrites"]["unexplained"]
    decision = next(e for span in spans for e in span.events if e.name == "foldline.context_decision")
    assert {"foldline.action", "foldline.ceiling", "foldline.estimate_before", "foldline.sent"} <= set(
        decision.attributes
    )
    # No message content: no content attribute, no instruction or system text anywhere.
    texts = [str(v) for span in spans for v in span.attributes.values()]
    texts += [str(v) for span in spans for e in span.events for v in e.attributes.values()]
    assert not any(
        k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.system_instructions"))
        for s in spans
        for k in s.attributes
    )
    assert not any(node.instruction[:30] in text for node in scenario.nodes for text in texts)


def test_a_refused_request_ends_its_span_as_an_error() -> None:
    from signals.envelope import Event
    from signals.events import ContextDecision, RunStarted

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OtelSink(provider)
    base = {"schema_version": 1, "run_id": "r", "branch_id": "b", "node_id": None, "request_id": None}
    started = RunStarted(scenario="s", provider="scripted", nodes=("n",))
    refusal = ContextDecision(
        ceiling=100, ceiling_source="profile", tier=None, method="m", estimate_before=500, estimate_after=500,
        action="refuse", stages=(), folded_ids=(), sent=False, reason="500 is above 100",
    )  # fmt: skip
    sink.handle(Event(**base, type="RunStarted", id="r:1", seq=1, time=1.0, data=started.to_data()))
    sink.handle(
        Event(
            **{**base, "request_id": "b:1"}, type="ContextDecision", id="r:2", seq=2, time=2.0, data=refusal.to_data()
        )
    )
    (span,) = exporter.get_finished_spans()
    assert span.name == "chat" and span.attributes["error.type"] == "foldline.refused"
    assert span.status.description == "500 is above 100"
    assert [e.name for e in span.events] == ["foldline.context_decision"]
    sink.close()
    assert [s.name for s in exporter.get_finished_spans()] == ["chat", "invoke_workflow s"]


@given(st.fixed_dictionaries({key: st.integers(0, 10**9) for key in USAGE_KEYS}))
def test_input_tokens_count_every_input_token_and_the_parts_are_kept(usage: dict[str, int]) -> None:
    attributes = usage_attributes(usage)
    parts = usage["input_tokens"] + usage["cache_read_input_tokens"]
    parts += usage["cache_write_5m_tokens"] + usage["cache_write_1h_tokens"]
    assert attributes["gen_ai.usage.input_tokens"] == parts
    assert {k.removeprefix("foldline.usage."): v for k, v in attributes.items() if k.startswith("foldline.")} == usage


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
        ("https://collector.example:443/custom/path", "https://collector.example:443/custom/path"),
    ],
)
def test_the_traces_endpoint_of_a_url(url: str, endpoint: str) -> None:
    assert traces_endpoint(url) == endpoint


@pytest.mark.parametrize("url", ["ftp://x", "127.0.0.1:4318", "http://user:pw@127.0.0.1:4318", "http://"])
def test_a_bad_otlp_url_exits_2_before_anything_runs(url: str) -> None:
    err = io.StringIO()
    assert main(["run", QUICKSTART, "--quiet", "--otlp", url], out=io.StringIO(), err=err) == 2
    assert err.getvalue().startswith("foldline: --otlp: ")


def test_otlp_with_store_or_temporal_is_refused_as_not_built(tmp_path: Path) -> None:
    for extra in (["--store", str(tmp_path / "s.db")], ["--engine", "temporal"]):
        err = io.StringIO()
        assert main(["run", QUICKSTART, "--otlp", "http://127.0.0.1:4318", *extra], out=io.StringIO(), err=err) == 2
        assert f"--otlp with {extra[0]}" in err.getvalue() and "is not built yet" in err.getvalue()
    assert not (tmp_path / "s.db").exists()


# -- a real OTLP/HTTP round trip --------------------------------------------------------------------


class _Receiver:
    """An OTLP/HTTP (protobuf) traces receiver on loopback; ``delay_s`` makes it a slow collector."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                time.sleep(delay_s)
                message = ExportTraceServiceRequest()
                message.ParseFromString(body)
                assert self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
                receiver.requests.append(message)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: Any, client_address: Any) -> None:
                return None  # a client that gave up on a slow reply: nothing to report

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[Any]:
        return [s for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    made = _Receiver()
    thread = threading.Thread(target=made.server.serve_forever, daemon=True)
    thread.start()
    yield made
    made.server.shutdown()
    made.server.server_close()


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind)


@pytest.mark.slow
def test_foldline_run_otlp_sends_the_fold_run_to_a_real_receiver(receiver: _Receiver, tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    report_path = tmp_path / "report.json"
    argv = ["run", FOLD, "--quiet", "--otlp", receiver.url, "--report", str(report_path)]
    assert main(argv, out=out, err=err) == 0, err.getvalue()
    report = json.loads(report_path.read_text())
    spans = receiver.spans()
    assert (
        f"foldline: --otlp {receiver.url}/v1/traces: {len(spans)} of {len(spans)} spans exported, 0 dropped"
        in err.getvalue()
    )
    resource = receiver.requests[0].resource_spans[0].resource
    assert {kv.key: _value(kv.value) for kv in resource.attributes}["service.name"] == "foldline"
    totals: Counter[str] = Counter()
    events: Counter[str] = Counter()
    for span in spans:
        for kv in span.attributes:
            if kv.key.startswith(("gen_ai.usage.", "foldline.usage.")):
                totals[kv.key] += _value(kv.value)
        events.update(event.name for event in span.events)
    _check_usage_adds_up(totals, report["usage"])
    assert events["foldline.context_decision"] == report["decisions"]
    assert len({span.trace_id for span in spans}) == 1  # one trace per run
    # The README quotes this run's closing line (twice: the collector's port and Phoenix's); its count is this one.
    readme = " ".join((ROOT / "README.md").read_text().split())
    for port in ("4318", "6006"):
        line = f"foldline: --otlp http://127.0.0.1:{port}/v1/traces: {len(spans)} of {len(spans)} spans exported"
        assert line in readme, f"README.md's --otlp line for port {port} no longer gives {len(spans)} spans"
    usage = report["usage"]
    fresh, read, written = usage["input_tokens"], usage["cache_read_input_tokens"], usage["cache_write_5m_tokens"]
    figures = (
        f"`gen_ai.usage.input_tokens` {totals['gen_ai.usage.input_tokens']:,} (fresh {fresh:,} + cache read {read:,}"
        f" + cache write {written:,}), `gen_ai.usage.output_tokens` {usage['output_tokens']:,}, and"
        f" {events['foldline.context_decision']} `foldline.context_decision` events"
    )
    assert figures in readme, f"README.md's Phoenix figures are not this run's: {figures}"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_with_no_collector_the_run_finishes_and_says_what_was_dropped() -> None:
    out, err = io.StringIO(), io.StringIO()
    url = f"http://127.0.0.1:{_closed_port()}"
    assert main(["run", QUICKSTART, "--quiet", "--otlp", url], out=out, err=err) == 0, err.getvalue()
    said = [line for line in err.getvalue().splitlines() if line.startswith("foldline: --otlp ")]
    assert len(said) == 1, err.getvalue()
    exported, ended = (int(n) for n in said[0].split(": ")[2].split(" spans")[0].split(" of "))
    assert exported == 0 and ended > 0
    assert f"{ended} dropped" in said[0]
    assert "run run-" in out.getvalue()


@pytest.mark.anyio
async def test_a_slow_collector_drops_past_the_bounded_queue_and_counts_it(anyio_backend: str) -> None:
    slow = _Receiver(delay_s=1.0)
    thread = threading.Thread(target=slow.server.serve_forever, daemon=True)
    thread.start()
    try:
        export = OtlpExport(slow.url, max_queue_size=4, flush_s=0.5)
        tools = run_tools(QUICKSTART)
        scenario = load_scenario(QUICKSTART, tool_names=tools.names())
        run = await run_scenario(scenario, registry=tools.registry(scenario), attach=[export.sink.attach])
        counts = export.finish()
    finally:
        slow.server.shutdown()
        slow.server.server_close()
    assert run.report["status"] == "ok"
    assert counts.ended == export.sink.spans_started > 4
    assert counts.dropped == counts.ended - counts.exported > 0
    assert counts.exported <= len(slow.spans())  # the collector saw at least what it confirmed
