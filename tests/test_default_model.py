"""The one default model: tools called by its ``calls`` choice, arguments from the schema, then a short text."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import DefaultModel as PublicDefaultModel
from runtime.scripted.default_model import DefaultModel, with_request_tool_ids
from runtime.values.json_schema import SchemaError, example_value, violation


def tool(name: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "description": "d", "input_schema": schema or {"type": "object", "properties": {}}}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def results(*pairs: tuple[str, Any], extra_text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": i, "content": c} for i, c in pairs]
    if extra_text is not None:
        content.append({"type": "text", "text": extra_text})
    return {"role": "user", "content": content}


TOOLS = [
    tool("a"),
    tool("b", {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
    tool("spawn"),
    tool("context"),
]


def test_the_public_name_is_the_one_class_and_calls_is_checked() -> None:
    assert PublicDefaultModel is DefaultModel
    assert DefaultModel().calls == "each"
    with pytest.raises(ValueError, match=r"DefaultModel.calls: expected one of each, one, got 'all'"):
        DefaultModel(calls="all")  # type: ignore[arg-type]


def test_arguments_are_the_schema_example_value() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "n": {"type": "integer", "minimum": 3},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
            "e": {"enum": ["low", "high"]},
            "d": {"type": "string", "default": "given"},
            "a": {"type": "array", "items": {"type": "integer"}},
            "o": {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]},
            "opt": {"type": "string"},
            "u": {"type": ["null", "integer"]},
        },
        "required": ["s", "n", "x", "b", "e", "d", "a", "o", "u"],
    }
    reply = DefaultModel().respond({"messages": [user("Go.")], "tools": [tool("t", schema)]})
    arguments = reply.content[0]["input"]
    assert arguments == {
        "s": "<s>",
        "n": 3,
        "x": 1.0,
        "b": True,
        "e": "low",
        "d": "given",
        "a": [1],
        "o": {"k": 1},
        "u": 1,
    }
    assert arguments == example_value(schema, "t") and violation(arguments, schema) is None


def test_each_calls_every_offered_tool_once_per_instruction_then_answers() -> None:
    model = DefaultModel(calls="each")
    first = model.respond({"messages": [user("Go.")], "tools": TOOLS})
    assert first.stop_reason == "tool_use"
    uses = [b for b in first.content if b["type"] == "tool_use"]
    assert [(u["name"], u["input"]) for u in uses] == [("a", {}), ("b", {"q": "<q>"})]  # never spawn or context
    assert len({u["id"] for u in uses}) == 2
    assert first == model.respond({"messages": [user("Go.")], "tools": TOOLS})  # deterministic
    assistant = {"role": "assistant", "content": list(first.content)}
    back = results((uses[0]["id"], "first line\nsecond"), (uses[1]["id"], [{"type": "text", "text": "no such"}]))
    second = model.respond({"messages": [user("Go."), assistant, back], "tools": TOOLS})
    assert second.stop_reason == "end_turn"
    assert second.content[0]["text"] == "Simulated answer after 2 tool result(s): no such"
    done = [user("Go."), assistant, back, {"role": "assistant", "content": list(second.content)}]
    assert model.respond({"messages": [*done, user("And now?")], "tools": TOOLS}).stop_reason == "tool_use"


def test_each_calls_a_tool_offered_later_in_the_turn() -> None:
    model = DefaultModel()
    first = model.respond({"messages": [user("Go.")], "tools": TOOLS[:1]})
    assistant = {"role": "assistant", "content": list(first.content)}
    later = model.respond(
        {"messages": [user("Go."), assistant, results((first.content[0]["id"], "ok"))], "tools": TOOLS}
    )
    assert [b["name"] for b in later.content] == ["b"]


@pytest.mark.parametrize(("calls", "called"), [("one", ["t0"]), ("each", [f"t{i}" for i in range(40)])])
def test_text_beside_tool_results_is_no_new_instruction(calls: Any, called: list[str]) -> None:
    model = DefaultModel(calls=calls)
    many = [tool(f"t{i}") for i in range(40)]
    first = model.respond({"messages": [user("Go.")], "tools": many})
    assert first.stop_reason == "tool_use" and [b["name"] for b in first.content] == called
    assistant = {"role": "assistant", "content": list(first.content)}
    # A client that puts text beside its tool results has not given a new instruction.
    answers = [(b["id"], "sunny, 21 C") for b in first.content]
    back = results(*answers, extra_text="<system-reminder>x</system-reminder>")
    second = model.respond({"messages": [user("Go."), assistant, back], "tools": many})
    assert second.stop_reason == "end_turn"
    assert second.content[0]["text"] == f"Simulated answer after {len(called)} tool result(s): sunny, 21 C"


@pytest.mark.parametrize("calls", ["each", "one"])
def test_tool_choice_names_the_tool_or_forbids_calls(calls: Any) -> None:
    model = DefaultModel(calls=calls)
    forced = model.respond({"messages": [user("x")], "tools": TOOLS, "tool_choice": {"type": "tool", "name": "spawn"}})
    assert [b["name"] for b in forced.content] == ["spawn"]
    as_json = model.respond({"messages": [user("x")], "tools": TOOLS, "tool_choice": '{"type": "tool", "name": "b"}'})
    assert [b["name"] for b in as_json.content] == ["b"]
    for none in ({"type": "none"}, "none"):
        reply = model.respond({"messages": [user("x")], "tools": TOOLS, "tool_choice": none})
        assert reply.stop_reason == "end_turn" and reply.content[0]["text"] == "Simulated answer to: x"


def test_without_tools_it_quotes_the_instruction_and_ignores_system_messages() -> None:
    model = DefaultModel()
    long = "word " * 30
    reply = model.respond({"messages": [user(long), {"role": "system", "content": "be brief"}]})
    assert reply.content[0]["text"] == "Simulated answer to: " + " ".join(long.split())[:80]
    server_tool = {"type": "web_search_20250305", "name": "web_search"}
    assert model.respond({"messages": [user("hi")], "tools": [server_tool]}).stop_reason == "end_turn"
    assert model.respond({"messages": []}).content[0]["text"] == "Simulated answer."


def test_request_ids_make_tool_ids_unique_to_the_request() -> None:
    reply = DefaultModel().respond({"messages": [user("Go.")], "tools": TOOLS})
    one, other = with_request_tool_ids(reply, "req_1"), with_request_tool_ids(reply, "req_2")
    assert {b["id"] for b in one.content}.isdisjoint(b["id"] for b in other.content)
    assert [b["name"] for b in one.content] == [b["name"] for b in reply.content]
    assert with_request_tool_ids(reply, "") == reply


def test_a_pattern_no_example_meets_is_refused_naming_the_property() -> None:
    schema = {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["zip"]}
    with pytest.raises(SchemaError, match="pattern '\\^\\[0-9\\]\\{5\\}\\$' \\(property 'zip'\\)"):
        DefaultModel().respond({"messages": [user("Go.")], "tools": [tool("t", schema)]})


# Schemas of the subset tools and structured outputs use (no patterns: the builder refuses those it cannot meet).
_LEAF = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["string", "boolean", "null"])}),
    st.fixed_dictionaries({"type": st.just("string")}, optional={"minLength": st.integers(0, 20)}).map(
        lambda s: {**s, "maxLength": s.get("minLength", 0) + 5}
    ),
    st.builds(
        lambda kind, low, width: {"type": kind, "minimum": low, "maximum": low + width},
        st.sampled_from(["integer", "number"]),
        st.integers(-1000, 1000),
        st.integers(0, 50),
    ),
    st.builds(
        lambda kind, low: {"type": kind, "exclusiveMinimum": low}, st.sampled_from(["integer"]), st.integers(-50, 50)
    ),
    st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=5)), min_size=1, max_size=4, unique=True).map(
        lambda values: {"enum": values}
    ),
    st.sampled_from(["date-time", "date", "email", "uri", "uuid", "ipv4"]).map(
        lambda f: {"type": "string", "format": f}
    ),
)


def _compose(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    objects = st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), children, max_size=4).flatmap(
        lambda props: st.builds(
            lambda required, closed: {
                "type": "object",
                "properties": props,
                "required": required,
                **({"additionalProperties": False} if closed else {}),
            },
            st.lists(st.sampled_from(sorted(props)), unique=True) if props else st.just([]),
            st.booleans(),
        )
    )
    arrays = st.builds(
        lambda items, low: {"type": "array", "items": items, "minItems": low, "maxItems": low + 2},
        children,
        st.integers(0, 3),
    )
    options = st.lists(children, min_size=1, max_size=3).map(lambda o: {"anyOf": [{"type": "null"}, *o]})
    return st.one_of(objects, arrays, options)


SCHEMAS = st.recursive(_LEAF, _compose, max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(SCHEMAS)
def test_the_example_value_always_validates_against_its_schema(schema: dict[str, Any]) -> None:
    assert violation(example_value(schema, "v"), schema) is None


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), SCHEMAS, max_size=4))
def test_tool_arguments_always_validate_against_the_input_schema(props: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": props, "required": sorted(props)}
    for calls in ("each", "one"):
        reply = DefaultModel(calls=calls).respond({"messages": [user("Go.")], "tools": [tool("t", schema)]})  # type: ignore[arg-type]
        assert violation(reply.content[0]["input"], schema) is None


@pytest.mark.anyio
@pytest.mark.parametrize("unique", [True, False])
async def test_over_the_simulator_tool_ids_are_per_request_only_when_asked(unique: bool) -> None:
    import anthropic

    from runtime.scripted.policies import PolicyRegistry
    from runtime.sim.clock import ManualClock
    from runtime.sim.server import SimConfig, serve_simulator

    model = DefaultModel(request_unique_ids=unique)
    payload = {"messages": [user("Go.")], "tools": TOOLS[:2]}
    in_process = [b["id"] for b in model.respond(payload).content]
    clock = ManualClock()
    async with serve_simulator(SimConfig(), PolicyRegistry(default=model), clock, sleep=clock.sleep) as sim:
        async with anthropic.AsyncAnthropic(base_url=sim.base_url, api_key="k", max_retries=0) as client:
            replies = [
                await client.messages.create(model="claude-haiku-5-5", max_tokens=1024, **payload)  # type: ignore[arg-type]
                for _ in range(2)
            ]
    served = [[block.id for block in reply.content] for reply in replies]
    if unique:  # identical conversations never share a tool-use id
        assert set(served[0]).isdisjoint(served[1]) and in_process not in served
    else:  # the ids of the same run in process, so a scenario's digests match either way
        assert served == [in_process, in_process]
