"""The streaming provider: a stream cut mid-way is a failed attempt, measured again and counted once."""

from __future__ import annotations

import pytest

from actors.tools import BUILTIN_TOOLS
from runtime.config.loader import loads_scenario
from runtime.scenarios.run import run_scenario
from signals.sinks import read_jsonl

BASE = """
schema = "foldline.scenario/v1"
[provider]
kind = "simulated"
faults = [{ kind = "stream_error", on_request = 1 }]
[profiles.default]
system = "s"
tools = ["synthetic_read"]
[[nodes]]
id = "n"
instruction = "read"
script = [{ tool_calls = [{ name = "synthetic_read", arguments = { path = "a", size = 500 } }] }, { text = "done" }]
"""


@pytest.mark.anyio
async def test_a_stream_cut_mid_way_is_retried_measured_again_and_counted_once(tmp_path) -> None:
    signals = tmp_path / "s.jsonl"
    scenario = loads_scenario(BASE, path_label="stream.toml", tool_names=BUILTIN_TOOLS.names())
    run = await run_scenario(scenario, signals_path=signals)
    assert run.report["status"] == "ok", run.report["nodes"]["n"]["reason"]
    events = read_jsonl(signals)
    first = [e for e in events if e.request_id and e.request_id.endswith(":1")]
    assert [e.data["attempt"] for e in first if e.type == "RequestSent"] == [1, 2]
    assert sum(e.type == "ContextDecision" for e in first) == 2  # measured before each attempt
    received = [e for e in first if e.type == "ResponseReceived"]
    assert len(received) == 1 and received[0].data["stop_reason"] == "tool_use"
    assert run.report["requests"] == 2 and run.report["attempts"] == 3
    totals = run.report["usage"]
    assert totals["output_tokens"] == sum(
        e.data["usage"]["output_tokens"] for e in events if e.type == "ResponseReceived"
    )


@pytest.mark.anyio
async def test_the_provider_reports_a_mid_stream_error_as_a_retryable_failed_attempt() -> None:
    from runtime.contract.provider import AttemptFailed
    from runtime.contract.retry import should_retry
    from runtime.providers.anthropic import AnthropicProvider
    from runtime.request.compiler import RequestSettings, compile_request
    from runtime.scripted.default_model import DefaultModel
    from runtime.scripted.faults import FaultRule
    from runtime.scripted.policies import PolicyRegistry
    from runtime.sim.clock import ManualClock
    from runtime.sim.config import SimConfig
    from runtime.sim.server import serve_simulator
    from runtime.values.messages import Instruction

    config = SimConfig(faults=(FaultRule.from_obj({"kind": "stream_error", "on_request": 1}, "f"),))
    request = compile_request(
        system="s",
        tools=(),
        view=(Instruction("say something long enough to stream"),),
        settings=RequestSettings(model="claude-haiku-5-5"),
    )
    async with serve_simulator(config, PolicyRegistry(default=DefaultModel()), ManualClock(0.0)) as sim:
        provider = AnthropicProvider.create(api_key="k", base_url=sim.base_url)
        try:
            with pytest.raises(AttemptFailed) as failed:
                await provider.send(request, node_id=None)
            reply = await provider.send(request, node_id=None)
        finally:
            await provider.aclose()
    assert failed.value.status == 529 and failed.value.error_type == "overloaded_error"
    assert "mid-stream" in str(failed.value) and should_retry(failed.value.status, failed.value.headers)
    assert reply.stop_reason == "end_turn" and reply.usage.output_tokens > 0
    assert [r.fault for r in sim.app.requests] == ["stream_error", None]
