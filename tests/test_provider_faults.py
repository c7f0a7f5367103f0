"""The Anthropic provider against the simulated server: retries, faults, secrecy."""

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
{faults}
[profiles.default]
system = "s"
tools = ["synthetic_read"]
[[nodes]]
id = "n"
instruction = "read"
script = [{{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "a", size = 500 }} }}] }}, {{ text = "done" }}]
"""


def scenario(faults: str):
    return loads_scenario(BASE.format(faults=faults), path_label="faults.toml", tool_names=BUILTIN_TOOLS.names())


@pytest.mark.anyio
async def test_529_then_success_completes_measured_twice_usage_once(tmp_path) -> None:
    signals = tmp_path / "s.jsonl"
    run = await run_scenario(
        scenario('faults = [{ kind = "529", on_request = 1, retry_after_ms = 5 }]'), signals_path=signals
    )
    assert run.report["status"] == "ok"
    events = read_jsonl(signals)
    first_request = [e for e in events if e.request_id and e.request_id.endswith(":1")]
    decisions = [e for e in first_request if e.type == "ContextDecision"]
    sent = [e for e in first_request if e.type == "RequestSent"]
    received = [e for e in first_request if e.type == "ResponseReceived"]
    assert len(decisions) == 2 and all(d.data["sent"] for d in decisions)  # measured before each attempt
    assert [s.data["attempt"] for s in sent] == [1, 2]
    assert len(received) == 1  # one completed call, its usage counted once
    assert run.report["requests"] == 2 and run.report["attempts"] == 3


@pytest.mark.anyio
async def test_a_dropped_connection_is_retried() -> None:
    run = await run_scenario(scenario('faults = [{ kind = "drop", on_request = 2 }]'))
    assert run.report["status"] == "ok"
    assert run.report["attempts"] == 3


@pytest.mark.anyio
async def test_a_malformed_body_fails_the_node_with_a_clear_error() -> None:
    run = await run_scenario(scenario('faults = [{ kind = "malformed", on_request = 1 }]'))
    assert run.report["status"] == "failed"
    reason = run.report["nodes"]["n"]["reason"]
    assert "malformed response body" in reason


@pytest.mark.anyio
async def test_retries_give_up_after_the_sdk_limit_and_respect_x_should_retry() -> None:
    run = await run_scenario(scenario('faults = [{ kind = "500", every = 1, retry_after_ms = 1 }]'))
    assert run.report["status"] == "failed"
    assert "HTTP 500" in run.report["nodes"]["n"]["reason"] and "3 attempts" in run.report["nodes"]["n"]["reason"]
    run = await run_scenario(scenario('faults = [{ kind = "429", on_request = 1, should_retry = false }]'))
    assert run.report["status"] == "failed" and "1 attempt" in run.report["nodes"]["n"]["reason"]


@pytest.mark.anyio
async def test_the_api_key_never_appears_in_events_or_errors(tmp_path, monkeypatch) -> None:
    secret = "sk-ant-test-" + "9" * 30
    from runtime.providers import factory

    seen: list[str] = []
    original = factory.AnthropicProvider.create

    def spy(**kw):
        seen.append(kw["api_key"])
        kw["api_key"] = secret
        return original(**kw)

    monkeypatch.setattr(factory.AnthropicProvider, "create", staticmethod(spy))
    monkeypatch.setattr(factory, "sim_config_for", lambda spec, api_key, **_kw: _sim_config(secret))
    signals = tmp_path / "s.jsonl"
    run = await run_scenario(
        scenario('faults = [{ kind = "500", every = 1, retry_after_ms = 1 }]'), signals_path=signals
    )
    assert run.report["status"] == "failed"
    assert secret not in signals.read_text()
    assert secret not in str(run.report)
    assert seen


def _sim_config(secret: str):
    from runtime.scripted.faults import FaultRule
    from runtime.sim.config import SimConfig

    return SimConfig(
        api_keys=frozenset({secret}),
        faults=(FaultRule.from_obj({"kind": "500", "every": 1, "retry_after_ms": 1}, "f"),),
    )
