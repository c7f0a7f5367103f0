"""The chat-completions rendering of a compiled request, the usage read back and the openai kind's settings."""

from __future__ import annotations

import json

import pytest

from runtime.config import ProviderSpec
from runtime.errors import ConfigError
from runtime.providers.openai_wire import (
    ChatDialect,
    chat_body,
    chat_payload,
    chat_usage,
    origin_of,
    payload_session_key,
    reasoning_block,
    session_key,
)
from runtime.request.compiler import RequestSettings, ToolSpec, compile_request
from runtime.values.messages import AssistantResponse, Instruction, TextPart, ThinkingPart, ToolCall, ToolResult

ORIGIN = origin_of("http://127.0.0.1:1/v1", "m")
TOOL = ToolSpec.create("look", "Look a term up.", {"type": "object", "properties": {"q": {"type": "string"}}})


def _result(call: ToolCall, output: str, is_error: bool = False) -> ToolResult:
    return ToolResult(call.call_id, call.name, call.arguments_json, output, is_error=is_error)


def _reply(*parts, context: str | None = None) -> AssistantResponse:
    return AssistantResponse(tuple(parts), stop_reason="tool_use", context=context)


def _compile(view, **settings):
    return compile_request(
        system="sys", tools=[TOOL], view=view, settings=RequestSettings(model="m", max_tokens=99, **settings)
    )


def test_calls_and_results_keep_their_pairing_and_order() -> None:
    first = Instruction("find it")
    reply = _reply(TextPart("looking"), ToolCall.create("c1", "look", {"q": "a"}), ToolCall.create("c2", "look", {}))
    r1 = _result(reply.parts[1], "one")
    r2 = _result(reply.parts[2], "two", is_error=True)
    body = chat_payload(_compile([first, reply, r1, r2, Instruction("go on")]), ChatDialect(), ORIGIN)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    assistant = body["messages"][2]
    assert assistant["content"] == "looking"
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"q": "a"}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "one"}
    assert body["messages"][4]["content"] == "Error: two"
    assert body["max_completion_tokens"] == 99
    assert body["tools"][0]["function"]["name"] == "look"
    assert body["tools"][0]["function"]["parameters"]["properties"] == {"q": {"type": "string"}}


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ('{"type":"auto"}', "auto"),
        ('{"type":"any"}', "required"),
        ('{"type":"none"}', "none"),
        ('{"name":"look","type":"tool"}', {"type": "function", "function": {"name": "look"}}),
    ],
)
def test_tool_choice_maps_to_the_chat_shape(choice: str, expected: object) -> None:
    body = chat_payload(_compile([Instruction("x")], tool_choice_json=choice), ChatDialect(), ORIGIN)
    assert body["tool_choice"] == expected


def _thinking_view(block: dict) -> list:
    first = Instruction("find it")
    call = ToolCall.create("c1", "look", {})
    request = _compile([first])
    reply = _reply(ThinkingPart(block["thinking"], block["signature"]), call, context=request.context_digest())
    return [first, reply, _result(call, "r")]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_text_reasoning_goes_back_only_to_its_origin_and_field(field: str) -> None:
    view = _thinking_view(reasoning_block(field, ORIGIN, "I think", None))
    request = _compile(view)
    mine = chat_payload(request, ChatDialect(reasoning=field), ORIGIN)  # type: ignore[arg-type]
    assert mine["messages"][2][field] == "I think"
    other_model = chat_payload(request, ChatDialect(reasoning=field), origin_of("http://127.0.0.1:1/v1", "m2"))  # type: ignore[arg-type]
    assert field not in other_model["messages"][2]
    other_field = chat_payload(request, ChatDialect(reasoning="reasoning_details"), ORIGIN)
    assert not {"reasoning_content", "reasoning", "reasoning_details"} & set(other_field["messages"][2])


def test_reasoning_details_go_back_whole() -> None:
    details = [{"type": "reasoning.encrypted", "data": "QUJD" * 50, "id": "r1", "format": "x", "index": 0}]
    view = _thinking_view(reasoning_block("reasoning_details", ORIGIN, "", details))
    body = chat_payload(_compile(view), ChatDialect(reasoning="reasoning_details"), ORIGIN)
    assert body["messages"][2]["reasoning_details"] == details
    assert "reasoning" not in body["messages"][2]


def test_anthropic_thinking_never_goes_to_a_chat_server() -> None:
    view = _thinking_view({"type": "thinking", "thinking": "t", "signature": "c2lnbmF0dXJl"})
    for field in ("reasoning_content", "reasoning", "reasoning_details"):
        body = chat_payload(_compile(view), ChatDialect(reasoning=field), ORIGIN)  # type: ignore[arg-type]
        assert not {"reasoning_content", "reasoning", "reasoning_details"} & set(body["messages"][2])


def test_the_session_key_is_shared_by_a_conversation_and_says_nothing_else() -> None:
    first = Instruction("task")
    one = session_key(_compile([first]))
    reply = _reply(TextPart("ok"))
    two = session_key(_compile([first, reply, Instruction("more")]))
    other = session_key(_compile([Instruction("task")]))
    assert one == two and one != other
    assert one is not None and first.id not in one and len(one) == 48


def test_usage_reads_fresh_cached_written_output_and_reasoning() -> None:
    usage = chat_usage(
        {
            "prompt_tokens": 5000,
            "completion_tokens": 300,
            "prompt_tokens_details": {"cached_tokens": 3968, "cache_write_tokens": 100},
            "completion_tokens_details": {"reasoning_tokens": 120},
        }
    )
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_write_5m_tokens) == (932, 3968, 100)
    assert (usage.output_tokens, usage.reasoning_tokens, usage.total_input) == (300, 120, 5000)
    assert usage.to_dict()["reasoning_tokens"] == 120
    bare = chat_usage({"prompt_tokens": 10, "completion_tokens": 2, "prompt_tokens_details": None})
    assert (bare.input_tokens, bare.cache_read_input_tokens, bare.reasoning_tokens) == (10, 0, 0)
    assert "reasoning_tokens" not in bare.to_dict()


def test_the_openai_kind_reads_its_dialect_with_key_paths() -> None:
    spec = ProviderSpec.from_obj(
        {
            "kind": "openai",
            "model": "gpt-x",
            "base_url": "https://openrouter.example/api/v1",
            "reasoning": "reasoning_details",
            "cache_key": "header",
            "cache_control": "1h",
            "reasoning_effort": "high",
        },
        "provider",
    )
    assert (spec.api_key_env, spec.key_env) == (None, "OPENAI_API_KEY")
    assert (spec.reasoning, spec.cache_key, spec.cache_control) == ("reasoning_details", "header", "1h")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"kind": "openai", "reasoning": "thoughts"}, 'provider.reasoning: "thoughts" is not one of'),
        ({"kind": "openai", "cache_key": "on"}, 'provider.cache_key: "on" is not one of'),
        ({"kind": "openai", "cache_control": "5m"}, 'provider.cache_control: "5m" is not one of'),
        ({"kind": "simulated", "reasoning": "reasoning"}, 'provider.reasoning: set for provider kind "simulated"'),
        ({"kind": "openai", "base_url": "ftp://x"}, "provider.base_url:"),
    ],
)
def test_the_openai_kinds_settings_are_refused_with_their_key_path(table: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ProviderSpec.from_obj(table, "provider")
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_dialect_is_a_setting_never_a_guess() -> None:
    spec = ProviderSpec.from_obj({"kind": "openai", "model": "deepseek-reasoner"}, "provider")
    assert (spec.reasoning, spec.cache_key, spec.cache_control) == ("none", "session", None)


def test_call_arguments_that_are_no_json_object_reach_the_tool_check_under_a_key_that_says_so() -> None:
    pytest.importorskip("openai", reason="the provider's reading of a call needs the openai extra")
    from runtime.providers.openai import _arguments

    assert _arguments({"arguments": '{"q": "a"}'}) == {"q": "a"}
    assert _arguments({"arguments": ""}) == {}
    assert _arguments({"arguments": '{"q": '}) == {"arguments_not_a_json_object": '{"q": '}
    assert _arguments({"arguments": "[1, 2]"}) == {"arguments_not_a_json_object": "[1, 2]"}


def test_another_kind_on_the_command_line_drops_the_openai_settings() -> None:
    spec = ProviderSpec.from_obj(
        {"kind": "openai", "base_url": "https://api.example.test/v1", "reasoning": "reasoning", "cache_key": "off"},
        "provider",
    )
    simulated = spec.with_kind("simulated")
    assert (simulated.reasoning, simulated.cache_key, simulated.base_url) == ("none", "session", None)
    assert spec.with_kind("openai") == spec
    assert ProviderSpec(kind="anthropic", base_url="https://api.example.test").with_kind("openai").base_url is None


def test_a_marked_payload_renders_as_the_unmarked_one() -> None:
    # On Temporal the worker renders the payload the workflow compiled; marks (which the openai kind never
    # places) would not reach the chat wire, and the system text arrives as its block.
    reply = _reply(ToolCall.create("c1", "look", {"q": "a"}))
    request = _compile([Instruction("find it"), reply, _result(reply.parts[0], "found")])
    payload = request.payload()
    marked = json.loads(json.dumps(payload))
    marked["system"][0]["cache_control"] = {"type": "ephemeral"}
    marked["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert chat_body(marked, ChatDialect(), ORIGIN) == chat_body(payload, ChatDialect(), ORIGIN)
    assert chat_body(payload, ChatDialect(), ORIGIN) == chat_payload(request, ChatDialect(), ORIGIN)
    assert chat_body(payload, ChatDialect(), ORIGIN)["messages"][0] == {"role": "system", "content": "sys"}


def test_a_session_key_from_the_workflow_is_bounded() -> None:
    key = session_key(_compile([Instruction("x")]))
    assert key is not None and payload_session_key(key) == key
    for bad in ("", "k" * 257, "caf\u00e9", "a\nb"):
        with pytest.raises(ValueError, match="expected 1 to 256 printable ASCII"):
            payload_session_key(bad)
