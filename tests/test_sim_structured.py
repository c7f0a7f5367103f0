"""Structured outputs on the simulator: ``output_config.format`` (Messages) and ``response_format`` (chat).

The real ``anthropic`` SDK's ``messages.parse()`` and the ``openai`` SDK's
``chat.completions.parse()`` with pydantic models, over real HTTP; the default
model's value built from the schema, a script's ``output`` given back as is,
the refusals of bad formats, and the cache rule (a format change invalidates
the prefix). Async tests run on asyncio and trio.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from enum import StrEnum
from typing import Any, Literal

import anthropic
import hypothesis.strategies as st
import pydantic
import pytest
from hypothesis import given, settings

from runtime.errors import ConfigError
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.server import SimConfig, SimServer, serve_simulator
from runtime.values.json_schema import SchemaError, check_schema, example_value, violation

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-4-6"


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class Address(pydantic.BaseModel):
    street: str
    number: int = pydantic.Field(ge=3)


class Person(pydantic.BaseModel):
    name: str
    age: int
    colour: Colour
    kind: Literal["human", "robot"]
    email: str = pydantic.Field(json_schema_extra={"format": "email"})
    tags: list[str]
    home: Address
    nickname: str | None = None


@asynccontextmanager
async def running(policies: PolicyRegistry | None = None) -> AsyncIterator[tuple[SimServer, anthropic.AsyncAnthropic]]:
    clock = ManualClock()
    registry = policies or PolicyRegistry(default=DefaultModel(calls="one"))
    async with serve_simulator(SimConfig(), registry, clock, sleep=clock.sleep) as sim:
        client = anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="sk-sim", max_retries=0)
        try:
            yield sim, client
        finally:
            await client.close()


def ask(text: str = "Describe someone.", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 500, "messages": [{"role": "user", "content": text}], **extra}


async def test_messages_parse_with_a_pydantic_model_gets_a_valid_instance_from_the_default_model() -> None:
    async with running() as (_, client):
        first = await client.messages.parse(**ask(), output_format=Person)
        again = await client.messages.parse(**ask(), output_format=Person)
    person = first.parsed_output
    assert isinstance(person, Person)
    assert person == Person(
        name="<name>",
        age=1,
        colour=Colour.RED,
        kind="human",
        email="user@example.com",
        tags=["<tags>"],
        home=Address(street="<street>", number=3),
        nickname=None,
    )
    assert first.stop_reason == "end_turn" and len(first.content) == 1
    assert again.parsed_output == person  # deterministic


async def test_a_script_step_output_is_the_structured_value() -> None:
    value = {"name": "Ada", "age": 36, "colour": "blue", "kind": "human", "email": "ada@example.org", "tags": []}
    value["home"] = {"street": "St James's Square", "number": 12}
    steps = [ScriptStep.from_obj({"output": value}, "script[0]")]
    policies = PolicyRegistry({"n": ScriptPolicy("n", steps)})
    async with running(policies) as (_, client):
        reply = await client.messages.parse(**ask(), output_format=Person, extra_headers={"x-foldline-node": "n"})
    assert reply.parsed_output == Person.model_validate(value)
    assert json.loads(reply.content[0].text) == value


async def test_a_script_may_give_text_the_schema_refuses_as_its_author_wrote_it() -> None:
    steps = [ScriptStep(text='{"name": 3}')]
    policies = PolicyRegistry({"n": ScriptPolicy("n", steps)})
    schema = Person.model_json_schema()
    body = ask(output_config={"format": {"type": "json_schema", "schema": anthropic.transform_schema(schema)}})
    async with running(policies) as (_, client):
        reply = await client.messages.create(**body, extra_headers={"x-foldline-node": "n"})
    assert reply.content[0].text == '{"name": 3}'


async def test_the_default_model_calls_tools_first_then_answers_in_the_format() -> None:
    tools = [{"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}]
    async with running() as (_, client):
        call = await client.messages.parse(**ask(tools=tools), output_format=Address)
        assert call.stop_reason == "tool_use" and call.parsed_output is None
        result = {"type": "tool_result", "tool_use_id": call.content[0].id, "content": "found"}
        messages = [
            *ask()["messages"],
            {"role": "assistant", "content": call.content},
            {"role": "user", "content": [result]},
        ]
        answer = await client.messages.parse(**ask(tools=tools, messages=messages), output_format=Address)
    assert answer.parsed_output == Address(street="<street>", number=3)


async def test_a_streamed_structured_answer_is_the_same_json() -> None:
    async with running() as (_, client):
        async with client.messages.stream(**ask(), output_format=Address) as stream:
            final = await stream.get_final_message()
    assert final.parsed_output == Address(street="<street>", number=3)


@pytest.mark.parametrize(
    ("output_config", "message"),
    [
        ({"format": {"type": "json", "schema": {}}}, "output_config.format: expected"),
        ({"format": {"type": "json_schema"}}, "output_config.format.schema: Field required"),
        ({"format": {"type": "json_schema", "schema": {"type": "string"}}}, "must describe an object"),
        ({"format": {"type": "json_schema", "schema": {"type": "object"}, "strict": True}}, "format.strict: Extra"),
        ({"format": {"type": "json_schema", "schema": {"$ref": "#/$defs/Nope"}}}, "must describe an object"),
        (
            {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"a": {"$ref": "#/x"}}}}},
            "properties.a.$ref: '#/x' does not name a definition",
        ),
        (
            {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"a": {"type": "str"}}}}},
            "properties.a.type: 'str' is not one of",
        ),
        ({"effort": "extreme"}, "output_config.effort: Input should be one of"),
        ({"verbosity": "low"}, "output_config.verbosity: Extra inputs are not permitted"),
    ],
)
async def test_bad_output_configs_are_refused_with_their_key_path(output_config: Any, message: str) -> None:
    async with running() as (sim, client):
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.messages.create(**ask(output_config=output_config))
    assert message in raised.value.message
    assert sim.app.requests[-1].status == 400


async def test_a_pattern_the_default_model_cannot_meet_is_a_clear_500_naming_the_fix() -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[0-9]{6}$"}},
        "required": ["code"],
    }
    async with running() as (_, client):
        with pytest.raises(anthropic.InternalServerError) as raised:
            await client.messages.create(**ask(output_config={"format": {"type": "json_schema", "schema": schema}}))
    assert "pattern" in raised.value.message and "script step's 'output'" in raised.value.message


async def test_changing_the_format_invalidates_the_cached_prefix() -> None:
    system = [{"type": "text", "text": "Stay on topic. " * 400, "cache_control": {"type": "ephemeral"}}]
    one = {"format": {"type": "json_schema", "schema": anthropic.transform_schema(Address)}}
    two = {"format": {"type": "json_schema", "schema": anthropic.transform_schema(Person)}}
    async with running() as (_, client):
        write = await client.messages.create(**ask(system=system, output_config=one))
        read = await client.messages.create(**ask(system=system, output_config=one))
        changed = await client.messages.create(**ask(system=system, output_config=two))
    assert write.usage.cache_creation_input_tokens > 0 and write.usage.cache_read_input_tokens == 0
    assert read.usage.cache_read_input_tokens == write.usage.cache_creation_input_tokens
    assert changed.usage.cache_read_input_tokens == 0 and changed.usage.cache_creation_input_tokens > 0


async def test_the_openai_sdk_parse_on_the_chat_face() -> None:
    openai = pytest.importorskip("openai", reason="the openai extra (the chat face's own SDK)")
    clock = ManualClock()
    async with serve_simulator(
        SimConfig(), PolicyRegistry(default=DefaultModel(calls="one")), clock, sleep=clock.sleep
    ) as sim:
        client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-sim", max_retries=0)
        try:
            parsed = await client.chat.completions.parse(
                model="gpt-5-mini", messages=[{"role": "user", "content": "Who?"}], response_format=Person
            )
            loose = await client.chat.completions.create(
                model="gpt-5-mini",
                messages=[{"role": "user", "content": "JSON please"}],
                response_format={"type": "json_object"},
            )
            with pytest.raises(openai.BadRequestError) as raised:
                await client.chat.completions.create(
                    model="gpt-5-mini",
                    messages=[{"role": "user", "content": "Who?"}],
                    response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "str"}}},
                )
        finally:
            await client.close()
    assert isinstance(parsed.choices[0].message.parsed, Person)
    assert parsed.choices[0].message.parsed.home == Address(street="<street>", number=3)
    assert json.loads(loose.choices[0].message.content) == {}
    assert "response_format.json_schema.schema" in raised.value.message


def test_a_script_step_gives_text_or_output_not_both() -> None:
    with pytest.raises(ConfigError, match=r"script\[0\]: a step gives 'text' or 'output', not both"):
        ScriptStep.from_obj({"text": "hi", "output": {"a": 1}}, "script[0]")
    with pytest.raises(ConfigError, match=r"script\[0\]\.output: .* is not a JSON value"):
        ScriptStep.from_obj({"output": {"a": float("nan")}}, "script[0]")
    assert ScriptStep.from_obj({"output": [1, "two"]}, "s").output_json == '[1,"two"]'


def test_violation_names_where_a_value_breaks_the_schema() -> None:
    schema = anthropic.transform_schema(Person)
    good = example_value(schema, "output")
    assert violation(good, schema) is None
    assert violation({**good, "age": "old"}, schema) == "$.age: 'old' is not of type integer"
    assert violation({**good, "colour": "green"}, schema) == "$.colour: 'green' is not one of ['red', 'blue']"
    assert (
        violation({k: v for k, v in good.items() if k != "tags"}, schema)
        == "$: the required property 'tags' is missing"
    )
    assert (
        violation({**good, "extra": 1}, schema)
        == "$: the property 'extra' is not allowed (additionalProperties is false)"
    )
    assert violation({**good, "email": "nobody"}, schema) == "$.email: 'nobody' is not a email"


def test_check_schema_bounds_depth_and_size() -> None:
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"a": deep}}
    with pytest.raises(SchemaError, match="schema larger than 32 levels"):
        check_schema(deep, "output_config.format.schema")


_LEAVES = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "minLength": 12, "maxLength": 20},
        {"type": "string", "format": "date-time"},
        {"type": "string", "format": "uuid"},
        {"type": "integer", "minimum": 5},
        {"type": "integer", "exclusiveMinimum": 5},
        {"type": "number", "maximum": -2},
        {"type": "boolean"},
        {"type": "null"},
        {"enum": ["a", "b"]},
        {"const": 7},
        {"type": ["string", "null"]},
    ]
)
_SCHEMAS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds(
            lambda props, req: {
                "type": "object",
                "properties": props,
                "required": [k for k in props if req],
                "additionalProperties": False,
            },
            st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
            st.booleans(),
        ),
        st.builds(lambda items, n: {"type": "array", "items": items, "minItems": n}, inner, st.integers(0, 3)),
        st.builds(lambda options: {"anyOf": options}, st.lists(inner, min_size=1, max_size=3)),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_SCHEMAS)
def test_the_default_models_value_always_fits_its_schema(schema: dict[str, Any]) -> None:
    assert violation(example_value(schema, "output"), schema) is None
