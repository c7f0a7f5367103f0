"""Caching through the real SDK against the simulated server, on asyncio and trio."""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.tools import BUILTIN_TOOLS
from runtime.config.loader import load_scenario
from runtime.scenarios.run import run_scenario
from signals.sinks import read_jsonl

CACHE_SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "cache.toml"


@pytest.mark.anyio
async def test_cache_scenario_reads_what_each_request_marked(tmp_path: Path) -> None:
    signals = tmp_path / "s.jsonl"
    scenario = load_scenario(CACHE_SCENARIO, tool_names=BUILTIN_TOOLS.names())
    assert scenario.provider.kind == "simulated"  # the official SDK over loopback HTTP
    run = await run_scenario(scenario, signals_path=signals)
    report = run.report
    assert report["status"] == "ok"
    cached, uncached = report["nodes"]["cached-reader"], report["nodes"]["uncached-reader"]
    assert cached["requests"] >= 13 and uncached["requests"] == cached["requests"]
    assert cached["cached_share"] >= 0.85
    assert uncached["cached_share"] == 0.0
    received = [e for e in read_jsonl(signals) if e.type == "ResponseReceived" and e.node_id == "cached-reader"]
    first, second = received[0].data, received[1].data
    written_first = first["usage"]["cache_write_5m_tokens"] + first["usage"]["cache_write_1h_tokens"]
    marked_first = written_first + first["usage"]["cache_read_input_tokens"]
    assert second["usage"]["cache_read_input_tokens"] >= marked_first > 0
    assert second["cache"]["g1"] == "met" and second["cache"]["read"] == "at_or_above"
    # with caching off the requests carry no marks at all
    assert all(
        e.data["cache"] is None
        for e in read_jsonl(signals)
        if e.type == "ResponseReceived" and e.node_id == "uncached-reader"
    )
