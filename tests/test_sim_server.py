"""The simulated Anthropic server driven through the real ``anthropic`` SDK, on asyncio and trio."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import anyio
import pytest

from runtime.scripted.faults import FaultRule
from runtime.scripted.policies import PolicyRegistry, ScriptCall, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.server import SimConfig, SimServer, serve_forever, serve_simulator

pytestmark = pytest.mark.anyio

KEY = "sk-sim-test"
MODEL = "claude-haiku-5-5"  # minimum cacheable prefix: 512 simulator tokens
EPH = {"type": "ephemeral"}
EPH_1H = {"type": "ephemeral", "ttl": "1h"}
BIG = "The simulator counts every word of this system prompt. " * 80  # well over 512 tokens
TOOLS = [{"name": "read", "description": "Read a file by path.", "input_schema": {"type": "object"}}]


def answers(n: int = 60) -> PolicyRegistry:
    return PolicyRegistry(default=ScriptPolicy("default", [ScriptStep(text="ok")] * n))


@asynccontextmanager
async def running(
    config: SimConfig | None = None,
    policies: PolicyRegistry | None = None,
    clock: ManualClock | None = None,
    max_retries: int = 0,
    sleep: Any = None,
) -> AsyncIterator[tuple[SimServer, anthropic.AsyncAnthropic, ManualClock]]:
    clock = clock or ManualClock()
    async with serve_simulator(config or SimConfig(), policies or answers(), clock, sleep=sleep or clock.sleep) as sim:
        client = anthropic.AsyncAnthropic(base_url=sim.base_url, api_key=KEY, max_retries=max_retries)
        try:
            yield sim, client, clock
        finally:
            await client.close()  # its implicit cleanup assumes asyncio


def system(cc: dict | None = None, value: str = BIG) -> list[dict[str, Any]]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if cc is not None:
        block["cache_control"] = cc
    return [block]


def user(*texts: str, cc: dict | None = None) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    if cc is not None:
        blocks[-1]["cache_control"] = cc
    return {"role": "user", "content": blocks}


async def create(client: anthropic.AsyncAnthropic, **payload: Any) -> anthropic.types.Message:
    payload.setdefault("model", MODEL)
    payload.setdefault("max_tokens", 100)
    return await client.messages.create(**payload)


def usage_tuple(message: anthropic.types.Message) -> tuple[int, int, int, int]:
    usage = message.usage
    assert usage.cache_creation is not None
    assert usage.cache_creation_input_tokens == (
        usage.cache_creation.ephemeral_5m_input_tokens + usage.cache_creation.ephemeral_1h_input_tokens
    )
    return (
        usage.input_tokens,
        usage.cache_read_input_tokens or 0,
        usage.cache_creation.ephemeral_5m_input_tokens,
        usage.cache_creation.ephemeral_1h_input_tokens,
    )


async def test_a_scripted_reply_comes_back_with_usage_and_a_record() -> None:
    policies = PolicyRegistry.from_scripts({"writer": [ScriptStep(text="hello there")]})
    async with running(policies=policies) as (sim, client, _):
        message = await create(client, messages=[user("hi")], extra_headers={"x-foldline-node": "writer"})
    assert message.role == "assistant" and message.model == MODEL
    assert [(b.type, b.text) for b in message.content] == [("text", "hello there")]
    assert message.stop_reason == "end_turn" and message.stop_sequence is None
    assert message.id.startswith("msg_")
    assert message.usage.output_tokens > 0 and message.usage.service_tier == "standard"
    assert usage_tuple(message)[1:] == (0, 0, 0)
    (record,) = sim.requests
    assert (record.node, record.status, record.path) == ("writer", 200, "/v1/messages")
    assert record.usage is not None and record.usage.input_tokens == message.usage.input_tokens
    assert record.payload_digest is not None and len(record.payload_digest) == 64


async def test_a_fifth_mark_is_a_400() -> None:
    async with running() as (sim, client, _):
        with pytest.raises(anthropic.BadRequestError) as info:
            marked = [{"type": "text", "text": t, "cache_control": EPH} for t in "abcd"]
            await create(client, system=system(EPH), messages=[{"role": "user", "content": marked}])
    assert info.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    }
    assert info.value.body["type"] == "error" and info.value.body["request_id"].startswith("req_")
    assert sim.requests[-1].status == 400


async def test_a_five_minute_mark_before_a_one_hour_mark_is_a_400() -> None:
    async with running() as (_, client, _clock):
        with pytest.raises(
            anthropic.BadRequestError, match="Cache entries with longer TTL must appear before shorter TTLs"
        ):
            await create(client, system=system(EPH), messages=[user("q", cc=EPH_1H)])


async def test_a_prefix_below_the_model_minimum_writes_nothing_and_does_not_fail() -> None:
    async with running() as (sim, client, _):
        for _ in range(2):
            message = await create(client, system=system(EPH, "short system"), messages=[user("q", cc=EPH)])
            assert usage_tuple(message) == (message.usage.input_tokens, 0, 0, 0)
            assert message.usage.cache_creation_input_tokens == 0
        assert sim.cache_entries(KEY, MODEL) == ()


async def test_write_then_read_and_top_level_cache_control() -> None:
    async with running() as (sim, client, _):
        payload = {"system": system(EPH_1H), "messages": [user("question")], "cache_control": EPH}
        first = await create(client, **payload)
        second = await create(client, **payload)
    entries = sim.cache_entries(KEY, MODEL)
    assert [(e.location, e.ttl) for e in entries] == [(("system", 0), "1h"), (("messages", 0, 0), "5m")]
    system_tokens, total = entries[0].prefix_tokens, entries[1].prefix_tokens
    assert usage_tuple(first) == (0, 0, total - system_tokens, system_tokens)
    assert usage_tuple(second) == (0, total, 0, 0)


async def _lookback(distance: int, *, collapse: bool = True, wide_turn: bool = False) -> int:
    config = SimConfig(lookback_collapse=collapse)
    async with running(config) as (sim, client, _):
        await create(client, tools=TOOLS, system=system(EPH), messages=[user("start")])
        if wide_turn:
            uses = [
                {"type": "tool_use", "id": f"toolu_{i:02d}", "name": "read", "input": {"i": i}} for i in range(distance)
            ]
            results = [
                {"type": "tool_result", "tool_use_id": f"toolu_{i:02d}", "content": f"r{i}"} for i in range(distance)
            ]
            results[-1]["cache_control"] = EPH
            messages = [user("go"), {"role": "assistant", "content": uses}, {"role": "user", "content": results}]
        else:
            messages = [user(*[f"part {i}" for i in range(distance)], cc=EPH)]
        message = await create(client, tools=TOOLS, system=system(), messages=messages)
        entry = sim.cache_entries(KEY, MODEL)[0]
        assert entry.location == ("system", 0)
        read = message.usage.cache_read_input_tokens or 0
        assert read in (0, entry.prefix_tokens)
        return read


async def test_a_mark_19_positions_after_an_entry_reads_it() -> None:
    assert await _lookback(19) > 0


async def test_a_mark_20_or_21_positions_after_an_entry_does_not_read_it() -> None:
    assert await _lookback(20) == 0
    assert await _lookback(21) == 0


async def test_a_run_of_tool_results_counts_as_one_position_when_the_switch_is_on() -> None:
    # 25 tool_use then 25 tool_result blocks: 3 positions collapsed, 51 without collapsing.
    assert await _lookback(25, collapse=True, wide_turn=True) > 0
    assert await _lookback(25, collapse=False, wide_turn=True) == 0


async def test_an_entry_expires_after_its_ttl_on_the_injected_clock() -> None:
    async with running() as (sim, client, clock):
        payload = {"system": system(), "messages": [user("q", cc=EPH)]}
        await create(client, **payload)
        clock.advance(299.0)
        assert usage_tuple(await create(client, **payload))[1] > 0  # read at 299 s: refreshed to 599 s
        clock.advance(300.0)
        expired = await create(client, **payload)
    assert usage_tuple(expired)[1] == 0 and usage_tuple(expired)[2] > 0
    (entry,) = sim.cache_entries(KEY, MODEL)
    assert (entry.written_at, entry.expires_at) == (599.0, 899.0)


async def test_a_read_refreshes_the_ttl() -> None:
    async with running() as (sim, client, clock):
        payload = {"system": system(), "messages": [user("q", cc=EPH)]}
        await create(client, **payload)
        clock.advance(200.0)
        await create(client, **payload)
        (entry,) = sim.cache_entries(KEY, MODEL)
        assert (entry.written_at, entry.last_touch, entry.expires_at) == (0.0, 200.0, 500.0)
        clock.advance(250.0)  # 450 s after the write: alive only because the read refreshed it
        third = await create(client, **payload)
    assert usage_tuple(third)[1:] == (entry.prefix_tokens, 0, 0)


async def test_a_tools_change_invalidates_everything_and_a_tool_choice_change_only_messages() -> None:
    def payload(tools: list[dict], tool_choice: dict | None = None) -> dict[str, Any]:
        body = {"tools": tools, "system": system(EPH_1H), "messages": [user("q1", "q2", cc=EPH)]}
        if tool_choice is not None:
            body["tool_choice"] = tool_choice
        return body

    async with running() as (sim, client, _):
        first = await create(client, **payload(TOOLS))
        stable = usage_tuple(first)[3]
        total = sum(usage_tuple(first))
        choice = await create(client, **payload(TOOLS, {"type": "auto"}))
        assert usage_tuple(choice) == (0, stable, total - stable, 0)
        changed = [{**TOOLS[0], "description": "Read a file by its path."}]
        tools = await create(client, **payload(changed, {"type": "auto"}))
        assert usage_tuple(tools)[1] == 0
        assert usage_tuple(tools)[3] > 0 and usage_tuple(tools)[2] > 0


async def test_an_entry_is_readable_only_once_its_writers_response_began() -> None:
    started = anyio.Event()
    release = anyio.Event()
    clock = ManualClock()

    async def gated_sleep(seconds: float) -> None:
        if not started.is_set():
            started.set()
            await release.wait()  # the first (writer) response is held before it begins
        clock.advance(seconds)

    payload = {"system": system(), "messages": [user("q", cc=EPH)]}
    async with running(SimConfig(latency_s=5.0), clock=clock, sleep=gated_sleep) as (sim, client, _):
        results: dict[str, anthropic.types.Message] = {}

        async def writer() -> None:
            results["writer"] = await create(client, **payload)

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            await started.wait()
            parallel = await create(client, **payload)  # at t=0: the writer's response has not begun
            release.set()
        assert usage_tuple(parallel)[1] == 0 and usage_tuple(parallel)[2] > 0  # both pay the write
        assert clock() == 10.0
        later = await create(client, **payload)
    assert usage_tuple(results["writer"])[2] > 0
    assert usage_tuple(later)[1] > 0
    (entry,) = sim.cache_entries(KEY, MODEL)
    assert entry.readable_at == 5.0


async def test_caches_are_scoped_by_api_key_and_model() -> None:
    payload = {"system": system(), "messages": [user("q", cc=EPH)]}
    async with running() as (sim, client, _):
        await create(client, **payload)
        other = client.with_options(api_key="sk-other")
        assert usage_tuple(await create(other, **payload))[1] == 0
        assert usage_tuple(await create(client, model="claude-opus-5", **payload))[1] == 0
        assert usage_tuple(await create(client, **payload))[1] > 0


async def test_faults_529_then_success_completes_through_the_sdk_retry() -> None:
    config = SimConfig(faults=(FaultRule(kind="529", on_request=1, retry_after_ms=1),))
    async with running(config, max_retries=2) as (sim, client, _):
        message = await create(client, system=system(), messages=[user("q", cc=EPH)])
    assert message.content[0].text == "ok"
    assert [(r.status, r.fault, r.error_type) for r in sim.requests] == [
        (529, "529", "overloaded_error"),
        (200, None, None),
    ]
    assert sim.requests[0].cache is None and usage_tuple(message)[2] > 0


async def test_a_malformed_body_makes_the_sdk_raise() -> None:
    config = SimConfig(faults=(FaultRule(kind="malformed", on_request=1),))
    async with running(config, max_retries=2) as (sim, client, _):
        with pytest.raises(ValueError):
            await create(client, system=system(), messages=[user("q", cc=EPH)])
        assert sim.cache_entries(KEY, MODEL) == ()
        assert [(r.status, r.fault) for r in sim.requests] == [(200, "malformed")]
        # The script did not advance: the next request gets the first answer.
        assert (await create(client, messages=[user("q")])).content[0].text == "ok"


async def test_a_dropped_connection_is_retried_by_the_sdk() -> None:
    config = SimConfig(faults=(FaultRule(kind="drop", on_request=1),))
    async with running(config, max_retries=2) as (sim, client, _):
        message = await create(client, messages=[user("q")])
    assert message.content[0].text == "ok"
    assert [(r.status, r.fault) for r in sim.requests] == [(None, "drop"), (200, None)]


async def test_a_429_with_should_retry_false_is_not_retried() -> None:
    config = SimConfig(faults=(FaultRule(kind="429", every=1, retry_after_ms=1, should_retry=False),))
    async with running(config, max_retries=2) as (sim, client, _):
        with pytest.raises(anthropic.RateLimitError) as info:
            await create(client, messages=[user("q")])
    assert info.value.response.headers["retry-after-ms"] == "1"
    assert info.value.body["error"]["type"] == "rate_limit_error"
    assert len(sim.requests) == 1


async def test_a_500_fault_is_an_api_error() -> None:
    config = SimConfig(faults=(FaultRule(kind="500", on_request=1, should_retry=False),))
    async with running(config, max_retries=2) as (_, client, _clock):
        with pytest.raises(anthropic.InternalServerError) as info:
            await create(client, messages=[user("q")])
    assert info.value.status_code == 500 and info.value.body["error"]["type"] == "api_error"


async def test_a_slow_reply_waits_on_the_servers_sleep_and_then_answers() -> None:
    config = SimConfig(latency_s=1.0, faults=(FaultRule(kind="slow", on_request=1, delay_s=30.0),))
    async with running(config) as (sim, client, clock):
        message = await create(client, system=system(), messages=[user("q", cc=EPH)])
        assert clock() == 31.0
    assert message.content[0].text == "ok"
    (entry,) = sim.cache_entries(KEY, MODEL)
    assert (entry.written_at, entry.readable_at) == (0.0, 31.0)


async def test_an_exhausted_script_is_a_500_the_sdk_does_not_retry() -> None:
    policies = PolicyRegistry.from_scripts({"n": [ScriptStep(text="only")]})
    async with running(policies=policies, max_retries=2) as (sim, client, _):
        await create(client, messages=[user("q")], extra_headers={"x-foldline-node": "n"})
        follow_up = [user("q"), {"role": "assistant", "content": "only"}, user("next")]
        with pytest.raises(anthropic.InternalServerError, match=r"node 'n': its script had 1 step\(s\)") as info:
            await create(client, messages=follow_up, extra_headers={"x-foldline-node": "n"})
    assert info.value.response.headers["x-should-retry"] == "false"
    assert len(sim.requests) == 2


async def test_tool_calls_round_trip_through_the_sdk() -> None:
    steps = [ScriptStep(tool_calls=(ScriptCall.create("read", {"path": "a.txt"}),)), ScriptStep(text="it says hi")]
    policies = PolicyRegistry.from_scripts({"reader": steps})
    headers = {"x-foldline-node": "reader"}
    async with running(policies=policies) as (_, client, _clock):
        first = await create(client, tools=TOOLS, messages=[user("read a.txt")], extra_headers=headers)
        assert first.stop_reason == "tool_use"
        (call,) = first.content
        assert (call.type, call.name, call.input) == ("tool_use", "read", {"path": "a.txt"})
        history = [
            user("read a.txt"),
            {"role": "assistant", "content": [call.model_dump(exclude_none=True)]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "hi"}]},
        ]
        second = await create(client, tools=TOOLS, messages=history, extra_headers=headers)
        assert second.content[0].text == "it says hi"
        with pytest.raises(anthropic.BadRequestError, match=call.id):
            await create(client, tools=TOOLS, messages=history[:2] + [user("forgot")], extra_headers=headers)


async def test_a_max_tokens_zero_prewarm_writes_the_cache_and_uses_no_script_step() -> None:
    policies = PolicyRegistry.from_scripts({"n": [ScriptStep(text="real answer")]})
    headers = {"x-foldline-node": "n"}
    payload = {"system": system(EPH_1H), "messages": [user("q")], "extra_headers": headers}
    async with running(policies=policies) as (_, client, _clock):
        warm = await create(client, max_tokens=0, **payload)
        assert (warm.content, warm.stop_reason, warm.usage.output_tokens) == ([], "max_tokens", 0)
        assert usage_tuple(warm)[3] > 0
        real = await create(client, **payload)
    assert real.content[0].text == "real answer"
    assert usage_tuple(real)[1] == usage_tuple(warm)[3]


async def test_count_tokens_matches_the_billed_input_and_touches_no_cache() -> None:
    payload = {"system": system(EPH), "messages": [user("q", cc=EPH)]}
    async with running() as (sim, client, _):
        counted = await client.messages.count_tokens(model=MODEL, **payload)
        assert sim.cache_entries(KEY, MODEL) == ()
        message = await create(client, **payload)
    assert counted.input_tokens == sum(usage_tuple(message))


async def test_a_prompt_past_the_models_window_is_a_400() -> None:
    # claude-sonnet-4-5: a 200K window (runtime/data/models.toml, with its source).
    huge = "lorem ipsum dolor sit amet " * 45_000  # ~200k o200k tokens, more after the factor
    async with running() as (_, client, _clock):
        with pytest.raises(anthropic.BadRequestError, match=r"prompt is too long: \d+ tokens > 200000 maximum"):
            await create(client, model="claude-sonnet-4-5", messages=[user(huge)])


async def test_an_unknown_model_is_a_404_and_a_wrong_key_a_401() -> None:
    async with running(SimConfig(api_keys=frozenset({KEY}))) as (_, client, _clock):
        with pytest.raises(anthropic.NotFoundError, match="model: claude-nonesuch"):
            await create(client, model="claude-nonesuch", messages=[user("q")])
        with pytest.raises(anthropic.AuthenticationError, match="invalid x-api-key"):
            await create(client.with_options(api_key="sk-wrong"), messages=[user("q")])


async def test_serve_forever_serves_until_cancelled() -> None:
    clock = ManualClock()
    async with anyio.create_task_group() as tg:
        sim = await tg.start(serve_forever, "127.0.0.1", 0, SimConfig(), answers(), clock)
        client = anthropic.AsyncAnthropic(base_url=sim.base_url, api_key=KEY, max_retries=0)
        try:
            assert (await create(client, messages=[user("q")])).content[0].text == "ok"
        finally:
            await client.close()
        tg.cancel_scope.cancel()
