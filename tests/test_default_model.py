"""The default model: each offered tool once, arguments from the schema, then a short text."""

from __future__ import annotations

from typing import Any

from runtime.scenarios.defaults import DefaultModel, arguments_from_schema


def tool(name: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "description": "d", "input_schema": schema or {"type": "object", "properties": {}}}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_arguments_are_drawn_from_the_schema_for_required_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "n": {"type": "integer", "minimum": 3},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "e": {"enum": ["low", "high"]},
            "d": {"type": "string", "default": "given"},
            "a": {"type": "array"},
            "o": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]},
            "opt": {"type": "string"},
            "u": {"type": ["null", "integer"]},
        },
        "required": ["s", "n", "x", "b", "e", "d", "a", "o", "u"],
    }
    assert arguments_from_schema(schema) == {
        "s": "example",
        "n": 3,
        "x": 1.0,
        "b": True,
        "e": "low",
        "d": "given",
        "a": [],
        "o": {"k": 1},
        "u": 1,
    }


def test_it_calls_each_offered_tool_once_then_names_what_it_saw() -> None:
    model = DefaultModel()
    tools = [
        tool("a"),
        tool("b", {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        tool("spawn"),
        tool("context"),
    ]
    first = model.respond({"messages": [user("Go.")], "tools": tools})
    assert first.stop_reason == "tool_use"
    uses = [b for b in first.content if b["type"] == "tool_use"]
    assert [(u["name"], u["input"]) for u in uses] == [("a", {}), ("b", {"q": "example"})]
    assert first == model.respond({"messages": [user("Go.")], "tools": tools})  # deterministic
    results = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": uses[0]["id"], "content": "first line\nsecond"},
            {
                "type": "tool_result",
                "tool_use_id": uses[1]["id"],
                "content": [{"type": "text", "text": "no such thing"}],
                "is_error": True,
            },
        ],
    }
    assistant = {"role": "assistant", "content": list(first.content)}
    second = model.respond({"messages": [user("Go."), assistant, results], "tools": tools})
    assert second.stop_reason == "end_turn"
    assert second.content[0]["text"] == (
        "I called a (17 characters): first line; b (13 characters): error: no such thing."
    )
    third = model.respond(
        {
            "messages": [
                user("Go."),
                assistant,
                results,
                {"role": "assistant", "content": list(second.content)},
                user("And now?"),
            ],
            "tools": tools,
        }
    )
    assert third.stop_reason == "tool_use"  # a new instruction: the tools again


def test_without_tools_or_with_tool_choice_none_it_answers_at_once() -> None:
    model = DefaultModel()
    assert model.respond({"messages": [user("Just talk.")]}).content[0]["text"].startswith("You asked: 'Just talk.'")
    reply = model.respond({"messages": [user("x")], "tools": [tool("a")], "tool_choice": {"type": "none"}})
    assert reply.stop_reason == "end_turn"
