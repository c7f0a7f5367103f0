"""The OpenAI-compatible provider through the official ``openai`` SDK over HTTP to the simulator's chat face."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from openai_sim import chat_simulated, run_chat_node
from support import READER, calls, iterative, read, text

from actors.tools import BUILTIN_TOOLS
from runtime.config import load_scenario
from runtime.providers.openai_wire import ChatDialect
from runtime.scenarios.run import run_scenario
from runtime.scripted.faults import FaultRule
from runtime.sim.chat.cache import INCREMENT, MIN_CACHED_TOKENS

pytestmark = pytest.mark.anyio
SYSTEM = "You read every document you are given and report what it says, briefly and exactly. " * 60
LOOP = READER.evolve(system=SYSTEM, tools=("synthetic_read",))
REASONING = ("reasoning_content", "reasoning", "reasoning_details")


def served(sim: Any) -> list[Any]:
    return [r for r in sim.requests if r.path == "/v1/chat/completions"]


async def _tool_loop(rounds: int, dialect: ChatDialect) -> tuple[Any, Any, list[Any]]:
    script = [calls(read(f"doc{i}.md", 600)) for i in range(rounds - 1)] + [text("all read")]
    async with chat_simulated({"n": script}, dialect=dialect) as (sim, capture, clock):
        result, report = await run_chat_node(capture, clock, LOOP, iterative("read", max_rounds=rounds))
        return result, capture, served(sim)


async def test_a_keyed_twenty_round_loop_reads_each_previous_prompt_rounded_down_to_128() -> None:
    result, capture, requests = await _tool_loop(20, ChatDialect())
    assert result.status == "ok", result["n"].reason
    assert len(requests) == 20 and all(r.status == 200 for r in requests)
    keys = {body["prompt_cache_key"] for body in capture.bodies}
    assert len(keys) == 1 and {h["X-Session-Id"] for h in capture.headers} == keys
    assert len({r.chat_cache.machine for r in requests}) == 1
    for before, after in zip(requests, requests[1:], strict=False):
        assert after.chat_cache.prompt_tokens > before.chat_cache.prompt_tokens >= MIN_CACHED_TOKENS
        assert after.usage.cache_read_input_tokens == before.chat_cache.prompt_tokens // INCREMENT * INCREMENT


async def test_the_same_loop_without_a_key_reads_less() -> None:
    keyed = await _tool_loop(20, ChatDialect())
    unkeyed = await _tool_loop(20, ChatDialect(cache_key="off"))
    assert all("prompt_cache_key" not in body for body in unkeyed[1].bodies)
    assert all(headers == {} for headers in unkeyed[1].headers)
    read_keyed = sum(r.usage.cache_read_input_tokens for r in keyed[2])
    read_unkeyed = sum(r.usage.cache_read_input_tokens for r in unkeyed[2])
    assert 0 < read_unkeyed < read_keyed
    # the prompts are the same: only where they went differs
    assert [r.chat_cache.prompt_tokens for r in keyed[2]] == [r.chat_cache.prompt_tokens for r in unkeyed[2]]


async def test_a_header_only_key_routes_by_the_header() -> None:
    result, capture, requests = await _tool_loop(6, ChatDialect(cache_key="header"))
    assert all("prompt_cache_key" not in body for body in capture.bodies)
    assert len({h["X-Session-Id"] for h in capture.headers}) == 1
    assert len({r.chat_cache.machine for r in requests}) == 1
    assert all(r.usage.cache_read_input_tokens > 0 for r in requests[1:])


async def test_the_report_and_the_records_read_usage_from_cached_tokens() -> None:
    script = [calls(read(f"doc{i}.md", 600)) for i in range(3)] + [text("done")]
    async with chat_simulated({"n": script}) as (sim, capture, clock):
        result, report = await run_chat_node(capture, clock, LOOP, iterative("read", max_rounds=5))
        requests = served(sim)
    usage = report["usage"]
    assert usage["cache_read_input_tokens"] == sum(r.chat_cache.cached_tokens for r in requests) > 0
    total = sum(r.chat_cache.prompt_tokens for r in requests)
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == total
    assert usage["cache_write_5m_tokens"] == usage["cache_write_1h_tokens"] == 0


@pytest.mark.parametrize("field", REASONING)
async def test_reasoning_goes_back_in_its_dialects_field_on_its_reply(field: str) -> None:
    dialect = ChatDialect(reasoning=field, reasoning_effort="low")  # type: ignore[arg-type]
    script = [calls(read(f"doc{i}.md", 300)) for i in range(3)] + [text("done")]
    async with chat_simulated({"n": script}, dialect=dialect) as (sim, capture, clock):
        result, report = await run_chat_node(capture, clock, LOOP, iterative("read", max_rounds=5))
        assert result.status == "ok", result["n"].reason
        assert all(r.status == 200 for r in served(sim))
        verified = sim.app.thinking.verified
    for k, body in enumerate(capture.bodies):
        assert body["reasoning_effort"] == "low"
        replies = [m for m in body["messages"] if m["role"] == "assistant"]
        assert len(replies) == k
        assert all(m.get(field) for m in replies)
        others = {"reasoning_content", "reasoning", "reasoning_details"} - {field}
        assert not any(m.get(other) for m in replies for other in others)
    last = [m for m in capture.bodies[-1]["messages"] if m["role"] == "assistant"]
    if field == "reasoning_details":
        assert all(m[field][0]["format"] == "foldline-sim-v1" for m in last)
        assert verified == 0 + 1 + 2 + 3  # every given-back item checked against what preceded it
    else:
        assert all(m[field].startswith("Turn with") for m in last)


async def test_no_reasoning_goes_back_when_the_dialect_has_none() -> None:
    script = [calls(read(f"doc{i}.md", 300)) for i in range(2)] + [text("done")]
    async with chat_simulated({"n": script}, dialect=ChatDialect(reasoning="none")) as (sim, capture, clock):
        sim.app.chat.dialect = "reasoning_content"  # the server sends it; this model's setting keeps none
        result, report = await run_chat_node(capture, clock, LOOP, iterative("read", max_rounds=4))
    assert result.status == "ok"
    for body in capture.bodies:
        for m in body["messages"]:
            assert not {"reasoning_content", "reasoning", "reasoning_details"} & set(m)


@pytest.mark.parametrize("field", REASONING)
async def test_a_fold_drops_the_reasoning_of_replies_made_before_it(field: str) -> None:
    rounds = 12
    dialect = ChatDialect(reasoning=field, reasoning_effort="low")  # type: ignore[arg-type]
    script = [calls(read(f"doc{i}.md", 1500)) for i in range(rounds)] + [text("all read")]
    profile = READER.evolve(
        max_tokens=4096, max_input_tokens=6000, context_management=True, tools=("synthetic_read",), fold_policy="fixed"
    )
    async with chat_simulated({"n": script}, dialect=dialect) as (sim, capture, clock):
        result, report = await run_chat_node(capture, clock, profile, iterative("read the docs", max_rounds=rounds + 2))
        assert result.status == "ok", result["n"].reason
        assert all(r.status == 200 for r in served(sim)), [
            (r.status, r.error_message) for r in served(sim) if r.status != 200
        ]

    def given_back(body: dict[str, Any]) -> list[bool]:
        return [bool(m.get(field)) for m in body["messages"] if m["role"] == "assistant"]

    # The node's own requests (a fold's summary request, intent "side", shares nothing with the conversation).
    main = [b for b, intent in zip(capture.bodies, capture.intents, strict=True) if intent != "side"]
    folded = [k for k, b in enumerate(main) if re.search(r"\[fold f-", json.dumps(b["messages"]))]
    assert folded, "the loop never folded"
    assert len({b["prompt_cache_key"] for b in main}) == 1  # a fold keeps the session
    first = folded[0]
    assert any(given_back(main[first - 1]))
    assert given_back(main[first]) and not any(given_back(main[first]))
    later = main[first + 1] if first + 1 < len(main) else None
    if later is not None and first + 1 not in folded[1:2]:
        assert given_back(later)[-1]  # a reply made after the fold keeps its reasoning


async def test_a_retried_attempt_is_measured_and_announced_again() -> None:
    rule = FaultRule.from_obj({"node": "n", "on_request": 2, "kind": "429", "retry_after_ms": 1}, "faults[0]")
    script = [calls(read("a.md", 300)), text("done")]
    async with chat_simulated({"n": script}, faults=[rule]) as (sim, capture, clock):
        result, report = await run_chat_node(capture, clock, LOOP, iterative("read", max_rounds=3))
        statuses = [r.status for r in served(sim)]
    assert result.status == "ok", result["n"].reason
    assert statuses == [200, 429, 200]
    assert len(capture.bodies) == 3  # every attempt went through the pipeline
    assert capture.bodies[1] == capture.bodies[2]
    assert report["requests"] == 2


async def test_a_mid_stream_error_is_a_failed_attempt_that_is_retried() -> None:
    rule = FaultRule.from_obj({"node": "n", "on_request": 1, "kind": "stream_error"}, "faults[0]")
    script = [text("done")]
    async with chat_simulated({"n": script}, faults=[rule]) as (sim, capture, clock):
        result, report = await run_chat_node(capture, clock, LOOP, iterative("read", max_rounds=2))
    assert result.status == "ok", result["n"].reason
    assert len(capture.bodies) == 2


async def test_a_refused_request_fails_the_node_naming_the_field_and_never_the_key(tmp_path: Path) -> None:
    key = "sk-proj-" + "Q" * 40
    rule = FaultRule.from_obj({"node": "n", "on_request": 1, "kind": "500", "should_retry": False}, "faults[0]")
    signals = tmp_path / "signals.jsonl"
    async with chat_simulated({"n": [text("x")]}, faults=[rule], key=key) as (sim, capture, clock):
        result, report = await run_chat_node(
            capture, clock, LOOP, iterative("read", max_rounds=2), signals_path=str(signals)
        )
    assert result.status == "failed"
    assert "HTTP 500" in result["n"].reason
    for text_out in (signals.read_text(), json.dumps(report, default=str), result["n"].reason, repr(capture.inner)):
        assert key not in text_out and key[8:30] not in text_out


def _openai_fold_scenario(tmp_path: Path) -> Any:
    source = Path(__file__).parent.parent / "scenarios" / "fold.toml"
    scenario = load_scenario(source, tool_names=BUILTIN_TOOLS.names())
    return scenario.evolve(provider=scenario.provider.with_kind("openai"))


async def test_fold_toml_on_the_openai_provider_keeps_every_promise(tmp_path: Path) -> None:
    signals = tmp_path / "signals.jsonl"
    run = await run_scenario(_openai_fold_scenario(tmp_path), signals_path=signals)
    report = run.report
    assert run.result.status == "ok"
    events = [json.loads(line) for line in signals.read_text().splitlines()]
    decisions = [e for e in events if e["type"] == "ContextDecision" and e["data"]["sent"]]
    assert decisions
    for event in decisions:
        payload = event["data"]
        assert payload["ceiling"] is None or payload["estimate_after"] <= payload["ceiling"]
    assert report["bytes_unrecoverable"] == 0
    assert report["rewrites"]["unexplained"] == 0
    usage = report["usage"]
    assert usage["cache_read_input_tokens"] > 0
    total = usage["input_tokens"] + usage["cache_read_input_tokens"]
    assert report["cached_share"] == pytest.approx(usage["cache_read_input_tokens"] / total, abs=1e-3)


async def test_a_dropped_connection_is_retried_and_a_malformed_body_is_final() -> None:
    drop = FaultRule.from_obj({"node": "n", "on_request": 1, "kind": "drop"}, "faults[0]")
    async with chat_simulated({"n": [text("done")]}, faults=[drop]) as (sim, capture, clock):
        result, report = await run_chat_node(capture, clock, LOOP, iterative("read", max_rounds=2))
    assert result.status == "ok", result["n"].reason
    assert len(capture.bodies) == 2 and report["attempts"] == 2
    malformed = FaultRule.from_obj({"node": "n", "on_request": 1, "kind": "malformed"}, "faults[0]")
    async with chat_simulated({"n": [text("done")]}, faults=[malformed]) as (sim, capture, clock):
        result, report = await run_chat_node(capture, clock, LOOP, iterative("read", max_rounds=2))
    assert result.status == "failed"
    assert "malformed response" in result["n"].reason
    assert len(capture.bodies) == 1


async def test_a_fork_names_the_session_of_its_root_and_another_root_its_own() -> None:
    from runtime.runtime import Runtime
    from runtime.scripted.default_model import DefaultModel

    async with chat_simulated({}, fallback=DefaultModel(calls="one")) as (sim, capture, clock):
        async with Runtime(provider=capture, clock=clock, monotonic=clock, model="gpt-sim") as rt:  # type: ignore[arg-type]
            lead = rt.branch(LOOP)
            await lead.run("Read doc.md.")
            child = lead.fork()
            await child.run("Say it shorter.")
            lead_requests = len(capture.bodies)
            other = rt.branch(LOOP)
            await other.run("Read doc.md.")
    keys = [body["prompt_cache_key"] for body in capture.bodies]
    assert len(set(keys[:lead_requests])) == 1
    assert set(keys[lead_requests:]).isdisjoint(keys[:lead_requests])


async def test_streamed_text_reaches_the_sends_progress_hook_and_there_is_no_count_endpoint() -> None:
    from runtime.contract.progress import reporting_progress
    from runtime.contract.provider import CountUnavailable
    from runtime.request.compiler import RequestSettings, compile_request
    from runtime.values.messages import Instruction

    answer = "a streamed answer " * 40
    async with chat_simulated({"n": [text(answer)]}) as (sim, capture, clock):
        request = compile_request(
            system=None, tools=(), view=[Instruction("hi")], settings=RequestSettings(model="gpt-sim", max_tokens=2000)
        )
        pieces: list[tuple[str, str]] = []
        with reporting_progress(lambda kind, piece: pieces.append((kind, piece))):
            reply = await capture.inner.send(request, node_id="n")
        assert len(pieces) > 1 and {kind for kind, _ in pieces} == {"text"}
        assert "".join(piece for _, piece in pieces) == "".join(b["text"] for b in reply.content if b["type"] == "text")
        assert capture.inner.counts_tokens is False
        with pytest.raises(CountUnavailable, match="no count-tokens endpoint"):
            await capture.inner.count_tokens(request)
