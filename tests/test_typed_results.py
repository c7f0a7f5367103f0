"""Typed results: the shape asked of the model, the reply validated, one corrected retry, then failure."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import pydantic
import pytest
from sdk_sim import run_node, simulated
from support import bounded, flow, iterative, node, runtime_for, scripted, text

from actors.tools import BUILTIN_TOOLS
from runtime.cli.store import main as store_main
from runtime.config import Profile
from runtime.config.loader import load_scenario, loads_scenario
from runtime.config.operation import Operation
from runtime.config.output_schema import OutputInvalid, OutputSchema
from runtime.errors import ConfigError
from runtime.providers.openai_wire import ChatDialect, chat_body
from runtime.request.compiler import RequestSettings, compile_request
from runtime.scenarios.run import build_flow
from runtime.store.run import run_scenario_stored
from runtime.values.messages import Instruction


class Finding(pydantic.BaseModel):
    topic: str
    points: list[str]


GOOD = '{"topic": "folding", "points": ["lossless", "cacheable"]}'
PLAIN = Profile(system="You answer in JSON.", tools=())


@pytest.mark.anyio
async def test_a_reply_wrong_once_is_sent_its_error_and_the_corrected_one_is_the_typed_value() -> None:
    async with simulated({"n": [text('{"topic": "folding"}'), text(GOOD)]}) as (_sim, capture, clock):
        result = await run_node(capture, clock, PLAIN, Operation("bounded", ("Report.",), output=Finding))
    outcome = result["n"]
    assert outcome.status == "ok", outcome.reason
    assert outcome.result.value == Finding(topic="folding", points=["lossless", "cacheable"])
    assert json.loads(outcome.result.value_json) == {"points": ["lossless", "cacheable"], "topic": "folding"}
    assert outcome.result.requests == 2
    # Both requests asked for the shape through structured outputs (output_config.format, a closed schema).
    for payload in capture.payloads:
        fmt = payload["output_config"]["format"]
        assert fmt["type"] == "json_schema"
        assert fmt["schema"]["additionalProperties"] is False and fmt["schema"]["required"] == ["topic", "points"]
    # The second request carried the validation error back.
    correction = capture.payloads[1]["messages"][-1]["content"][0]["text"]
    assert correction.startswith("Your reply is not a valid value of the required output schema:")
    assert "$.points: Field required" in correction


@pytest.mark.anyio
async def test_a_reply_that_never_validates_fails_the_node_naming_the_schema_error() -> None:
    fl = flow(
        node("n", bounded("Report.", output=Finding), profile=PLAIN),
        node("after", bounded("next"), depends_on=("n",)),
        node("other", bounded("other"), profile=PLAIN),
    )
    provider = scripted({"n": [text("not json at all"), text('{"topic": 3, "points": []}')], "other": [text("fine")]})
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    assert result["n"].status == "failed"
    reason = result["n"].reason
    assert reason.startswith("the reply does not match the output schema 'Finding': $.topic: Input should be a valid")
    assert "after one corrected reply; the first: the reply is not JSON" in reason
    assert isinstance(result["n"].error, OutputInvalid)
    assert result["after"].status == "skipped" and result["other"].status == "ok"


@pytest.mark.anyio
async def test_a_typed_dependency_is_read_as_its_json_value() -> None:
    provider = scripted({"a": [text(GOOD)], "m": [text("merged")]})
    fl = flow(
        node("a", iterative("research", output=Finding), profile=PLAIN),
        node("m", bounded("merge"), depends_on=("a",)),
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    sent = next(m for m in result.branches["m"].view() if isinstance(m, Instruction)).text
    assert '<result node="a" status="ok">\n{"points":["lossless","cacheable"],"topic":"folding"}\n</result>' in sent


@pytest.mark.anyio
async def test_branch_run_with_output_returns_the_typed_value() -> None:
    provider = scripted({"typed": [text("[1, 2]"), text(GOOD)]})
    async with runtime_for(provider) as rt:
        branch = rt.branch(PLAIN, name="typed")
        value = await branch.run("Report.", output=Finding)
    assert value == Finding(topic="folding", points=["lossless", "cacheable"])


def test_the_openai_compatible_wire_asks_through_response_format() -> None:
    output = OutputSchema.of(Finding, "output")
    settings = RequestSettings(model="gpt-sim", output_config_json=output.output_config_json())
    request = compile_request(system=None, tools=(), view=(Instruction("Report."),), settings=settings)
    body = chat_body(request.payload(), ChatDialect(), "origin")
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Finding"
    assert fmt["json_schema"]["strict"] is True and fmt["json_schema"]["schema"] == output.schema
    plain = compile_request(system=None, tools=(), view=(Instruction("x"),), settings=RequestSettings(model="gpt-sim"))
    assert "response_format" not in chat_body(plain.payload(), ChatDialect(), "origin")


SCENARIO = """
schema = "foldline.scenario/v1"
[provider]
kind = "scripted"
[[nodes]]
id = "n"
operation = "bounded"
instruction = "Report."
output = { schema = { type = "object", properties = { score = { type = "integer" } }, required = ["score"] } }
script = [{ text = '{"score": "high"}' }, { text = '{"score": 7}' }]
"""


@pytest.mark.anyio
async def test_a_scenarios_output_schema_validates_with_jsonschema_and_retries_once() -> None:
    scenario = loads_scenario(SCENARIO, path_label="typed.toml", tool_names=BUILTIN_TOOLS.names())
    fl = build_flow(scenario)
    assert fl.nodes[0].operation.output is not None
    provider = scripted({"n": list(scenario.nodes[0].script)})
    async with runtime_for(provider) as rt:
        result = await rt.run(fl)
    assert result["n"].status == "ok", result["n"].reason
    assert result["n"].result.value == {"score": 7}


def test_a_bad_output_schema_is_refused_at_load_naming_the_key_path() -> None:
    bad = SCENARIO.replace('type = "integer"', 'type = "integr"')
    with pytest.raises(
        ConfigError, match=r"typed.toml: nodes\[0\]\.output\.schema\.properties\.score\.type: not a valid"
    ):
        loads_scenario(bad, path_label="typed.toml", tool_names=BUILTIN_TOOLS.names())
    missing = SCENARIO.replace("output = { schema =", "output = { shape =")
    with pytest.raises(ConfigError, match=r"nodes\[0\]\.output\.shape: unknown key; output takes schema and name"):
        loads_scenario(missing, path_label="typed.toml", tool_names=BUILTIN_TOOLS.names())


def test_an_output_shape_must_be_a_model_or_a_schema() -> None:
    with pytest.raises(ConfigError, match=r"Operation.output: 'Finding' is not an output shape"):
        Operation("bounded", ("x",), output="Finding")
    schema = OutputSchema.of({"type": "array", "items": {"type": "string"}}, "x")
    assert schema.validate('["a"]') == (["a"], '["a"]')
    with pytest.raises(OutputInvalid, match=r"\$\[1\]: 2 is not of type 'string'"):
        schema.validate('["a", 2]')


def test_a_stored_typed_run_replays_every_request_to_its_digest(tmp_path: Path) -> None:
    path = tmp_path / "typed.toml"
    path.write_text(SCENARIO.replace('kind = "scripted"', 'kind = "simulated"'), encoding="utf-8")
    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    run = anyio.run(lambda: run_scenario_stored(scenario, store_path=tmp_path / "t.db"))
    assert run.result["n"].status == "ok" and run.result["n"].result.requests == 2
    out = io.StringIO()
    assert store_main(["replay", str(tmp_path / "t.db"), "--all"], out=out, err=io.StringIO()) == 0
    assert "2 of 2 requests verified" in out.getvalue()
