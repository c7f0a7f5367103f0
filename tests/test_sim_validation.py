"""Request validation and normalization in the simulated server."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.sim.errors import SimAPIError
from runtime.sim.models import model_facts, served_models
from runtime.sim.validation import validate_request


def body(**extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "model": "claude-haiku-5-5",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    }
    base.update(extra)
    return base


def refused(value: Any, *, count_only: bool = False) -> str:
    with pytest.raises(SimAPIError) as info:
        validate_request(value, count_only=count_only)
    assert (info.value.status, info.value.error_type) == (400, "invalid_request_error")
    return info.value.message


def test_normalizes_string_content_and_system_without_mutating_the_input() -> None:
    raw = body(system="be brief")
    normalized = validate_request(raw)
    assert normalized["system"] == [{"type": "text", "text": "be brief"}]
    assert normalized["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert raw["system"] == "be brief" and raw["messages"][0]["content"] == "hi"
    assert "system" not in validate_request(body(system=""))


def test_tool_round_trip_is_accepted() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "a", "name": "t", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "r"}]},
        {"role": "assistant", "content": "done"},
    ]
    tools = [{"name": "t", "input_schema": {"type": "object"}}]
    assert len(validate_request(body(messages=messages, tools=tools))["messages"]) == 4


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([1], "request body: expected a JSON object, got list"),
        ({"max_tokens": 1, "messages": []}, "model: expected a non-empty string, got None"),
        (body(max_tokens=-1), "max_tokens: expected an integer >= 0, got -1"),
        ({"model": "claude-haiku-5-5", "messages": [{"role": "user", "content": "x"}]}, "max_tokens: Field required"),
        (body(max_tokens=True), "max_tokens: expected an integer >= 0, got True"),
        (body(messages=[]), "messages: expected a non-empty list of messages"),
        (
            body(messages=[{"role": "assistant", "content": "x"}]),
            "messages.0.role: the first message must use the 'user' role",
        ),
        (body(messages=[{"role": "system", "content": "a"}]), "messages.0: a system message must immediately follow"),
        (body(messages=[{"role": "tool", "content": "a"}]), "messages.0.role: Input should be 'user', 'assistant'"),
        (
            body(messages=[{"role": "user", "content": "a", "name": "x"}]),
            "messages.0.name: Extra inputs are not permitted",
        ),
        (body(messages=[{"role": "user", "content": ""}]), "messages.0: all messages must have non-empty content"),
        (
            body(messages=[{"role": "user", "content": [{"type": "text", "text": ""}]}]),
            "messages.0.content.0.text: text content blocks must be non-empty",
        ),
        (
            body(messages=[{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "t", "input": {}}]}]),
            "messages.0.content.0.type: 'tool_use' is not a block type allowed in a user message",
        ),
        (
            body(messages=[{"role": "user", "content": [{"text": "x"}]}]),
            "messages.0.content.0: expected a content block with a 'type'",
        ),
        (body(system=[{"type": "image"}]), "system.0: expected a text block"),
        (body(stream="yes"), "stream: expected true or false, got 'yes'"),
        (body(max_tokens=0, stream=True), "max_tokens: 0 (cache pre-warm) cannot be combined with stream"),
        (body(temperature=0.5, frequency_penalty=1), "frequency_penalty: Extra inputs are not permitted"),
        (body(tools=[{"name": "t"}]), "tools.0.input_schema: expected an object"),
        (
            body(tools=[{"name": "t", "input_schema": {}}, {"name": "t", "input_schema": {}}]),
            "tools: Tool names must be unique",
        ),
        (
            body(tool_choice={"type": "sometimes"}),
            "tool_choice: expected an object whose type is one of auto, any, tool, none",
        ),
        (body(tool_choice={"type": "tool", "name": "nope"}), "tool_choice.name: 'nope' is not the name of a tool"),
        (body(thinking={"type": "maybe"}), "thinking: expected an object whose type is"),
        (
            body(max_tokens=0, thinking={"type": "enabled", "budget_tokens": 1024}),
            "max_tokens: 0 (cache pre-warm) cannot be combined with thinking",
        ),
        (
            body(max_tokens=0, tools=[{"name": "t", "input_schema": {}}], tool_choice={"type": "any"}),
            "max_tokens: 0 (cache pre-warm) cannot be combined with a forced tool_choice ('any')",
        ),
    ],
)
def test_refusals_name_the_field(value: Any, message: str) -> None:
    assert refused(value).startswith(message)


def test_an_unanswered_tool_use_is_refused_naming_its_id() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "t", "input": {}},
                {"type": "tool_use", "id": "toolu_b", "name": "t", "input": {}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "r"}]},
    ]
    message = refused(body(messages=messages))
    assert message.startswith(
        "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_b."
    )
    message = refused(body(messages=messages[:2]))
    assert "toolu_a, toolu_b" in message


def test_a_tool_result_without_its_tool_use_is_refused() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "no calls"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]},
    ]
    assert refused(body(messages=messages)).startswith(
        "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_x."
    )


def test_count_tokens_bodies_need_no_max_tokens_but_refuse_create_only_keys() -> None:
    assert validate_request(
        {"model": "claude-haiku-5-5", "messages": [{"role": "user", "content": "x"}]}, count_only=True
    )
    assert refused(body(), count_only=True) == "max_tokens: Extra inputs are not permitted"


def test_model_facts_are_data_and_unknown_models_are_404() -> None:
    stated = {
        "claude-haiku-5-5": (512, 1_000_000),
        "claude-haiku-4-5": (4096, 200_000),
        "claude-haiku-4-5-20251001": (4096, 200_000),
        "claude-sonnet-4-5": (1024, 200_000),
        "claude-sonnet-4-5-20250929": (1024, 200_000),
        "claude-sonnet-5": (1024, 1_000_000),
        "claude-opus-4-6": (4096, 1_000_000),
        "claude-opus-4-7": (2048, 1_000_000),
        "claude-opus-4-8": (1024, 1_000_000),
        "claude-sonnet-4-6": (1024, 1_000_000),
        "claude-opus-5": (512, 1_000_000),
        "claude-fable-5-2": (1024, 200_000),  # no source states it: the documented defaults
    }
    assert {
        name: (served_models()[name].min_cacheable_tokens, served_models()[name].context_window) for name in stated
    } == stated
    with pytest.raises(SimAPIError) as info:
        model_facts("claude-nonesuch")
    assert (info.value.status, info.value.error_type, info.value.message) == (
        404,
        "not_found_error",
        "model: claude-nonesuch",
    )
