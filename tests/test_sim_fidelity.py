"""The simulated server's fidelity to the API: generation limits, models, request ids, the default model, scripts."""

from __future__ import annotations

import json
import typing
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import anyio
import h11
import pytest

from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry, Reply, ScriptStep
from runtime.sim import models as models_module
from runtime.sim.clock import ManualClock
from runtime.sim.generation import finish
from runtime.sim.models import display_name, sdk_model_ids, served_models, table_model_ids
from runtime.sim.server import SimConfig, SimServer, serve_simulator
from runtime.sim.tokens import SimTokenCounter
from runtime.values.json_schema import example_value

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-5-5"


@asynccontextmanager
async def running(policies: PolicyRegistry | None = None) -> AsyncIterator[tuple[SimServer, anthropic.AsyncAnthropic]]:
    clock = ManualClock()
    async with serve_simulator(
        SimConfig(), policies or PolicyRegistry(default=DefaultModel(calls="one")), clock, sleep=clock.sleep
    ) as sim:
        client = anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="sk-sim", max_retries=0)
        try:
            yield sim, client
        finally:
            await client.close()


def ask(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 200, "messages": [{"role": "user", "content": text}], **extra}


async def test_max_tokens_truncates_with_stop_reason_max_tokens() -> None:
    async with running() as (_, client):
        one = await client.messages.create(**ask("Say something long about the sea", max_tokens=1))
        full = await client.messages.create(**ask("Say something long about the sea"))
    assert one.stop_reason == "max_tokens" and one.usage.output_tokens == 1
    assert len(one.content) == 1 and full.content[0].text.startswith(one.content[0].text)
    assert one.content[0].text and one.content[0].text != full.content[0].text
    assert full.stop_reason == "end_turn" and full.usage.output_tokens > 1


async def test_stop_sequences_stop_at_the_earliest_match() -> None:
    async with running() as (_, client):
        stopped = await client.messages.create(**ask("Hello world", stop_sequences=["world", "answer"]))
        missed = await client.messages.create(**ask("Hello world", stop_sequences=["zebra"]))
    assert stopped.content[0].text == "Simulated "
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", "answer")
    assert (missed.stop_reason, missed.stop_sequence) == ("end_turn", None)


def test_finish_drops_a_tool_call_that_does_not_fit_and_an_emptied_text_block() -> None:
    counter = SimTokenCounter()
    call = {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a" * 200}}
    reply = Reply(content=({"type": "text", "text": "Reading."}, call), stop_reason="tool_use")
    text_tokens = counter.block_tokens(reply.content[0])
    cut = finish(reply, {"max_tokens": text_tokens + 1}, counter)
    assert cut.content == (reply.content[0],) and (cut.stop_reason, cut.output_tokens) == (
        "max_tokens",
        text_tokens + 1,
    )
    stopped = finish(reply, {"max_tokens": 1000, "stop_sequences": ["Read"]}, counter)
    assert stopped.content == () and stopped.stop_sequence == "Read"
    assert finish(reply, {"max_tokens": 0}, counter).stop_reason == "max_tokens"
    # A script's step is answered whole (its author's exact transcript); stop sequences still cut it.
    whole = finish(reply, {"max_tokens": 1}, counter, whole=True)
    assert whole.content == reply.content and whole.stop_reason == "tool_use"
    assert finish(reply, {"max_tokens": 1, "stop_sequences": ["Read"]}, counter, whole=True).stop_sequence == "Read"


def test_the_served_list_is_the_simulators_own_and_never_asks_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever SDK release is installed (or none), the simulator serves the model table's ids and its own.
    def no_sdk() -> tuple[str, ...]:
        raise AssertionError("the served list must not ask the SDK")

    monkeypatch.setattr(models_module, "sdk_model_ids", no_sdk)
    ids = list(served_models.__wrapped__())
    assert {*models_module.STATED, *models_module.DATED_IDS} <= set(ids)
    assert set(models_module.table_model_ids()) <= set(ids)


@pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")
async def test_every_model_id_the_sdk_names_is_served_and_listed() -> None:
    ids = sdk_model_ids()
    assert set(typing.get_args(typing.get_args(anthropic.types.Model)[0])) == set(ids)
    # The model table lists every id the installed SDK names (the simulator serves from it, never the SDK).
    assert set(ids) <= set(table_model_ids())
    assert "claude-sonnet-4-5-20250929" in served_models()  # served even when the installed SDK no longer names it
    async with running() as (_, client):
        for model_id in ids:
            message = await client.messages.create(**ask("hi", model=model_id))
            assert message.model == model_id
        dated = await client.models.retrieve("claude-sonnet-4-5-20250929")
        listed = [info.id async for info in client.models.list(limit=5)]
        first_page = await client.models.list(limit=3)
        with pytest.raises(anthropic.NotFoundError):
            await client.models.retrieve("claude-nonesuch")
        with pytest.raises(anthropic.BadRequestError, match="limit: expected an integer from 1 to 1000"):
            await client.models.list(limit=0)
    assert listed == list(served_models()) and set(ids) <= set(listed)
    assert first_page.has_more and first_page.last_id == listed[2]
    assert (dated.display_name, dated.created_at.isoformat()) == ("Claude Sonnet 4.5", "2025-09-29T00:00:00+00:00")
    assert dated.lifecycle == "deprecated" and dated.retires_at is not None
    assert (
        served_models()["claude-sonnet-4-5-20250929"].min_cacheable_tokens
        == served_models()["claude-sonnet-4-5"].min_cacheable_tokens
    )
    assert display_name("claude-mythos-preview") == "Claude Mythos Preview"


async def test_request_ids_are_unique_on_every_response_including_http_level_errors() -> None:
    async with running() as (sim, client):
        ok = await client.messages.with_raw_response.create(**ask("hi"))
        counted = await client.messages.with_raw_response.count_tokens(
            model=MODEL, messages=[{"role": "user", "content": "hi"}]
        )
        ids = [ok.headers["request-id"], counted.headers["request-id"]]
        for _ in range(2):
            ids.append(await _raw_status(sim, b"GET /v1/nowhere HTTP/1.1\r\nhost: x\r\n\r\n"))
            ids.append(await _raw_status(sim, b"NOT HTTP AT ALL\r\n\r\n"))
    assert all(rid.startswith("req_") and len(rid) == 28 for rid in ids)
    assert len(set(ids)) == len(ids)
    assert (await counted.parse()).input_tokens > 0


async def _raw_status(sim: SimServer, raw: bytes) -> str:
    async with await anyio.connect_tcp(sim.host, sim.port) as stream:
        await stream.send(raw)
        conn = h11.Connection(h11.CLIENT)
        conn.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive())
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
    envelope = json.loads(body)
    assert envelope["type"] == "error"
    return envelope["request_id"]


def test_the_default_model_builds_arguments_from_the_schema() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 3},
            "tags": {"type": "array", "items": {"type": "string"}},
            "when": {"anyOf": [{"type": "null"}, {"type": "number"}]},
            "flag": {"type": "boolean", "default": False},
            "optional": {"type": "string"},
        },
        "required": ["city", "unit", "days", "tags", "when", "flag"],
    }
    assert example_value(schema, "args") == {
        "city": "<city>",
        "unit": "celsius",
        "days": 3,
        "tags": ["<tags>"],
        "when": 1.0,
        "flag": False,
    }
    assert example_value({"type": "object", "properties": {"a": {"type": "string"}}}, "x") == {"a": "<a>"}
    nested = {
        "type": "object",
        "properties": {"place": {"$ref": "#/$defs/Place"}},
        "required": ["place"],
        "$defs": {"Place": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
    }
    assert example_value(nested, "args", root=nested) == {"place": {"lat": 1.0}}


def test_the_default_model_calls_a_tool_then_answers_from_its_result() -> None:
    model = DefaultModel(calls="one")
    tools = [
        {"name": "first", "input_schema": {"type": "object"}},
        {"name": "second", "input_schema": {"type": "object"}},
    ]
    question = {"role": "user", "content": "What now?"}
    call = model.respond({"messages": [question], "tools": tools})
    assert call.stop_reason == "tool_use" and call.content[0]["name"] == "first"
    assert model.respond({"messages": [question], "tools": tools}) == call  # deterministic
    forced = model.respond({"messages": [question], "tools": tools, "tool_choice": {"type": "tool", "name": "second"}})
    assert forced.content[0]["name"] == "second"
    assert (
        model.respond({"messages": [question], "tools": tools, "tool_choice": {"type": "none"}}).stop_reason
        == "end_turn"
    )
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": call.content[0]["id"], "content": "sunny, 21 C"}],
    }
    answer = model.respond(
        {"messages": [question, {"role": "assistant", "content": list(call.content)}, result], "tools": tools}
    )
    assert answer.content == ({"type": "text", "text": "Simulated answer after 1 tool result(s): sunny, 21 C"},)


async def test_scripts_advance_per_conversation_and_a_retry_gets_the_same_answer() -> None:
    policies = PolicyRegistry.from_scripts({"n": [ScriptStep(text="one"), ScriptStep(text="two")]})
    node = {"x-foldline-node": "n"}
    async with running(policies) as (_, client):

        async def conversation(task: str) -> list[str]:
            first = await client.messages.create(**ask(task), extra_headers=node)
            again = await client.messages.create(**ask(task), extra_headers=node)  # a retry of the same request
            follow = ask(task)
            follow["messages"] += [
                {"role": "assistant", "content": first.content[0].text},
                {"role": "user", "content": "more"},
            ]
            second = await client.messages.create(**follow, extra_headers=node)
            return [first.content[0].text, again.content[0].text, second.content[0].text]

        results: dict[str, list[str]] = {}

        async def run(task: str) -> None:
            results[task] = await conversation(task)

        async with anyio.create_task_group() as tg:
            for task in ("task A", "task B", "task C"):
                tg.start_soon(run, task)
    assert results == {task: ["one", "one", "two"] for task in ("task A", "task B", "task C")}


def test_a_note_appended_to_the_first_message_keeps_the_conversation() -> None:
    from runtime.sim.conversations import conversation_key

    task = {"type": "text", "text": "Read everything and report.", "cache_control": {"type": "ephemeral"}}
    before = {"messages": [{"role": "user", "content": [task]}]}
    folded = {"messages": [{"role": "user", "content": [task, {"type": "text", "text": "[folded: 3 messages]"}]}]}
    other = {"messages": [{"role": "user", "content": "Another task."}]}
    assert conversation_key("n", before) == conversation_key("n", folded) != conversation_key("n", other)
    assert conversation_key("n", before) != conversation_key("m", before)
