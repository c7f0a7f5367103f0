"""Typed results on a model without structured outputs: the answer comes as a final-answer tool's input."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import anthropic
import anyio
import pydantic
import pytest
from sdk_sim import Capture, run_node, simulated
from support import bounded, calls, flow, iterative, node, runtime_for, scripted, text

from actors.final_tool import FINAL_TOOL_NAME
from actors.tools import BUILTIN_TOOLS, tool
from runtime.cli.store import main as store_main
from runtime.config import Profile
from runtime.config.loader import load_scenario, loads_scenario
from runtime.config.operation import Operation
from runtime.config.output_schema import OutputInvalid
from runtime.errors import ConfigError
from runtime.models.limits import ModelTable, default_model_table
from runtime.providers.anthropic import AnthropicProvider
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.server import serve_simulator
from runtime.store.run import run_scenario_stored
from runtime.values.messages import Instruction, ToolResult

OLD = "claude-3-haiku-20240307"
"""A model the packaged model table marks ``structured_outputs = false``."""


class Finding(pydantic.BaseModel):
    topic: str
    points: list[str]


GOOD = {"topic": "folding", "points": ["lossless", "cacheable"]}
NO_SO = Profile(system="You answer with the final_answer tool.", tools=(), model=OLD)


def _asked_through_the_tool(payloads: list[dict[str, Any]]) -> None:
    """Every request offered the same final-answer tool (same bytes), and none asked for structured outputs."""
    tools = [json.dumps(p["tools"], sort_keys=True) for p in payloads]
    assert len(set(tools)) == 1
    final = payloads[0]["tools"][-1]
    assert final["name"] == FINAL_TOOL_NAME and "'Finding'" in final["description"]
    assert final["input_schema"]["required"] == ["topic", "points"]
    assert final["input_schema"]["additionalProperties"] is False
    assert all("output_config" not in p and "tool_choice" not in p for p in payloads)


def test_the_model_table_says_which_models_lack_structured_outputs() -> None:
    table = default_model_table()
    assert table.structured_outputs(OLD) is False
    assert table.structured_outputs("claude-sonnet-4-5") is True  # absent: true
    assert table.structured_outputs("a-model-the-table-does-not-list") is True
    bad = 'schema = "foldline.models/v1"\n[models.m]\nsource = "s"\nread_on = 2026-12-04\nstructured_outputs = "no"\n'
    with pytest.raises(ConfigError, match=r"t.toml: models.m.structured_outputs: 'no' is not true or false"):
        ModelTable.from_toml(bad, "t.toml")


@pytest.mark.anyio
async def test_a_model_without_structured_outputs_answers_through_the_final_tool() -> None:
    async with simulated({"n": [calls((FINAL_TOOL_NAME, GOOD))]}) as (_sim, capture, clock):
        result = await run_node(capture, clock, NO_SO, Operation("bounded", ("Report.",), output=Finding))
    outcome = result["n"]
    assert outcome.status == "ok", outcome.reason
    assert outcome.result.value == Finding(**GOOD)
    assert json.loads(outcome.result.answer) == GOOD and outcome.result.requests == 1
    _asked_through_the_tool(capture.payloads)
    # The call is answered, so the branch stays a well-formed conversation another operation can continue.
    last = result.branches["n"].view()[-1]
    assert isinstance(last, ToolResult) and last.name == FINAL_TOOL_NAME and not last.is_error


@pytest.mark.anyio
async def test_the_simulators_default_model_fills_the_final_tool_from_the_schema() -> None:
    clock = ManualClock(1_000.0)
    async with serve_simulator(SimConfig(), PolicyRegistry(fallback=DefaultModel(calls="one")), clock) as sim:
        provider = AnthropicProvider.create(api_key="sim-final", base_url=sim.base_url, max_retries=0)
        capture = Capture(provider)
        try:
            result = await run_node(capture, clock, NO_SO, Operation("iterative", ("Report.",), output=Finding))
        finally:
            await provider.aclose()
    assert result["n"].status == "ok", result["n"].reason
    assert isinstance(result["n"].result.value, Finding)
    _asked_through_the_tool(capture.payloads)


@pytest.mark.anyio
async def test_the_simulator_refuses_structured_outputs_for_a_model_marked_without_them() -> None:
    clock = ManualClock(1_000.0)
    async with serve_simulator(SimConfig(), PolicyRegistry(fallback=DefaultModel(calls="one")), clock) as sim:
        client = anthropic.AsyncAnthropic(api_key="sim-final", base_url=sim.base_url, max_retries=0)
        fmt = {"format": {"type": "json_schema", "schema": {"type": "object", "additionalProperties": False}}}
        with pytest.raises(anthropic.BadRequestError, match="structured outputs are not supported by the model"):
            await client.messages.create(
                model=OLD, max_tokens=64, messages=[{"role": "user", "content": "hi"}], output_config=fmt
            )
        await client.close()


@pytest.mark.anyio
async def test_a_final_answer_wrong_once_gets_its_error_back_and_the_corrected_call_is_the_value() -> None:
    steps = [calls((FINAL_TOOL_NAME, {"topic": "folding"})), calls((FINAL_TOOL_NAME, GOOD))]
    async with simulated({"n": steps}) as (_sim, capture, clock):
        result = await run_node(capture, clock, NO_SO, Operation("bounded", ("Report.",), output=Finding))
    outcome = result["n"]
    assert outcome.status == "ok", outcome.reason
    assert outcome.result.value == Finding(**GOOD) and outcome.result.requests == 2
    _asked_through_the_tool(capture.payloads)
    # The second request answers the first call with the validation error, then asks for the tool again.
    blocks = capture.payloads[1]["messages"][-1]["content"]
    assert blocks[0]["type"] == "tool_result" and blocks[0]["is_error"] is True
    assert "$.points: Field required" in str(blocks[0]["content"])
    assert blocks[1]["text"].startswith("Your final answer is not a valid value of the required output schema:")
    assert f"Call the {FINAL_TOOL_NAME} tool again" in blocks[1]["text"]


@pytest.mark.anyio
async def test_a_final_answer_never_right_fails_the_node_naming_the_schema_error() -> None:
    steps = [text("no call, just words"), calls((FINAL_TOOL_NAME, {"topic": 3, "points": []}))]
    fl = flow(
        node("n", bounded("Report.", output=Finding), profile=NO_SO),
        node("other", bounded("other"), profile=NO_SO),
    )
    async with runtime_for(scripted({"n": steps, "other": [text("fine")]})) as rt:
        result = await rt.run(fl)
    assert result["n"].status == "failed" and isinstance(result["n"].error, OutputInvalid)
    reason = result["n"].reason
    assert reason.startswith("the reply does not match the output schema 'Finding': $.topic: Input should be a valid")
    assert f"the first: the reply did not call the final-answer tool '{FINAL_TOOL_NAME}'" in reason
    assert result["other"].status == "ok"
    # Even the failing call is answered (with its error): no orphaned call in the record.
    last = result.branches["n"].view()[-1]
    assert isinstance(last, ToolResult) and last.is_error and "$.topic" in last.output


@pytest.mark.anyio
async def test_an_iterative_operation_runs_its_tools_and_ends_at_the_final_call() -> None:
    profile = Profile(system="You read, then answer.", tools=("synthetic_read",), model=OLD)
    steps = [
        calls(("synthetic_read", {"path": "a.txt", "size": 50})),
        calls((FINAL_TOOL_NAME, GOOD), ("synthetic_read", {"path": "b.txt", "size": 50})),
    ]
    async with simulated({"n": steps}) as (_sim, capture, clock):
        result = await run_node(capture, clock, profile, Operation("iterative", ("Read and report.",), output=Finding))
    assert result["n"].status == "ok", result["n"].reason
    assert result["n"].result.value == Finding(**GOOD) and result["n"].result.requests == 2
    _asked_through_the_tool(capture.payloads)
    assert [t["name"] for t in capture.payloads[0]["tools"]] == ["synthetic_read", FINAL_TOOL_NAME]
    results = [m for m in result.branches["n"].view() if isinstance(m, ToolResult)]
    assert [(r.name, r.is_error) for r in results] == [
        ("synthetic_read", False),
        ("synthetic_read", True),  # given beside the final answer: not run
        (FINAL_TOOL_NAME, False),
    ]
    assert results[1].output.startswith("not run: the final answer was given")


@pytest.mark.anyio
async def test_a_non_object_schema_on_such_a_model_fails_that_node_saying_why() -> None:
    op = iterative("List.", output={"type": "array", "items": {"type": "string"}})
    async with runtime_for(scripted({"n": [text('["a"]')]})) as rt:
        result = await rt.run(flow(node("n", op, profile=NO_SO)))
    assert result["n"].status == "failed"
    assert "type 'array'" in result["n"].reason and "structured_outputs = false" in result["n"].reason
    assert not [m for m in result.branches["n"].view() if not isinstance(m, Instruction)]


SCENARIO = """
schema = "foldline.scenario/v1"
[provider]
kind = "simulated"
model = "claude-3-haiku-20240307"
[[nodes]]
id = "n"
operation = "bounded"
instruction = "Report."
output = { schema = { type = "object", properties = { score = { type = "integer" } }, required = ["score"] } }
script = [
  { tool_calls = [{ name = "final_answer", arguments = { score = "high" } }] },
  { tool_calls = [{ name = "final_answer", arguments = { score = 7 } }] },
]
"""


def test_a_stored_run_through_the_final_tool_replays_every_request_to_its_digest(tmp_path: Path) -> None:
    path = tmp_path / "final.toml"
    path.write_text(SCENARIO, encoding="utf-8")
    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    run = anyio.run(lambda: run_scenario_stored(scenario, store_path=tmp_path / "f.db"))
    assert run.result["n"].status == "ok", run.result["n"].reason
    assert run.result["n"].result.value == {"score": 7} and run.result["n"].result.requests == 2
    out = io.StringIO()
    assert store_main(["replay", str(tmp_path / "f.db"), "--all"], out=out, err=io.StringIO()) == 0
    assert "2 of 2 requests verified" in out.getvalue()


def test_a_script_may_call_the_final_tool_only_on_a_model_without_structured_outputs() -> None:
    modern = SCENARIO.replace("claude-3-haiku-20240307", "claude-haiku-5-5")
    with pytest.raises(
        ConfigError, match=r'nodes\[0\]\.script\[0\]\.tool_calls\[0\]\.name: "final_answer" is not a tool'
    ):
        loads_scenario(modern, path_label="final.toml", tool_names=BUILTIN_TOOLS.names())
    assert loads_scenario(SCENARIO, path_label="final.toml", tool_names=BUILTIN_TOOLS.names()).nodes[0].output


STRUCTURED = SCENARIO.replace("claude-3-haiku-20240307", "claude-haiku-5-5").replace(
    """  { tool_calls = [{ name = "final_answer", arguments = { score = "high" } }] },
  { tool_calls = [{ name = "final_answer", arguments = { score = 7 } }] },""",
    """  { text = '{"score": "high"}' },
  { text = '{"score": 7}' },""",
)


@pytest.mark.parametrize("cut_at", [1, 2])
@pytest.mark.parametrize("reply", ["lost", "after_sink_stopped"])
@pytest.mark.parametrize("text", [SCENARIO, STRUCTURED], ids=["final_tool", "structured"])
def test_a_typed_run_stopped_around_its_correction_resumes_to_the_uninterrupted_result(
    tmp_path: Path, cut_at: int, reply: str, text: str
) -> None:
    """Resumed after the correction was appended, the correction is not appended twice (either way of asking)."""
    from test_resume import cut_stored_run, outcome_of

    from runtime.store.run import resume_stored_run

    path = tmp_path / "final.toml"
    path.write_text(text, encoding="utf-8")
    assert text.count("claude-3-haiku") == (1 if text is SCENARIO else 0)
    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    anyio.run(lambda: run_scenario_stored(scenario, store_path=tmp_path / "full.db"))
    anyio.run(lambda: cut_stored_run(path, tmp_path / "cut.db", cut_at=cut_at, reply=reply))  # type: ignore[arg-type]
    resumed = anyio.run(lambda: resume_stored_run(tmp_path / "cut.db"))
    assert resumed.report["nodes"]["n"]["status"] == "ok"
    assert outcome_of(tmp_path / "cut.db") == outcome_of(tmp_path / "full.db")


@tool(name=FINAL_TOOL_NAME)
def clashing(text: str) -> str:
    """A user tool that takes the final-answer tool's name."""
    return text


@pytest.mark.anyio
async def test_branch_run_with_output_on_such_a_model_returns_the_value_and_a_clashing_tool_is_refused() -> None:
    provider = scripted({"typed": [calls((FINAL_TOOL_NAME, GOOD))], "clash": [text("unused")]})
    async with runtime_for(provider) as rt:
        value = await rt.branch(NO_SO, name="typed").run("Report.", output=Finding)
        assert value == Finding(**GOOD)
        clash = rt.branch(Profile(system="s", tools=[clashing], model=OLD), name="clash")
        with pytest.raises(ConfigError, match=r"tools: a tool named 'final_answer' is offered, and a typed result"):
            await clash.run("Report.", output=Finding)
