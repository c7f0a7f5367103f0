"""Every stop reason, through the official SDK's streaming against the simulator (issue 14)."""

from __future__ import annotations

import pytest
from sdk_sim import run_node, simulated
from support import READER, calls, iterative, read, text

from actors.operations import CONTINUE_TEXT, MAX_CONTINUATIONS
from runtime.scripted.policies import ScriptStep


@pytest.mark.anyio
async def test_a_streamed_4000_token_answer_arrives_whole_with_its_usage() -> None:
    answer = " ".join(f"w{i}" for i in range(2600))  # about 4,000 output tokens in the simulator's count
    seen: list[str] = []
    async with simulated({"n": [text(answer)]}) as (sim, capture, clock):
        capture.inner.progress = seen.append
        result = await run_node(capture, clock, READER.evolve(max_tokens=8000), iterative("write"))
        assert result.status == "ok", result["n"].reason
        assert result["n"].result.answer == answer
        served = sim.requests[-1]
        assert served.stream and served.usage.output_tokens >= 4000
        assert result["n"].result.usage.output_tokens == served.usage.output_tokens  # counted once
        assert "".join(seen) == answer and len(seen) > 100  # progress arrived in deltas


@pytest.mark.anyio
async def test_a_max_tokens_stop_is_continued_by_the_iterative_operation() -> None:
    first = "word " * 200
    async with simulated({"n": [text(first.strip()), text("and that is the end.")]}, whole=False) as (
        _sim,
        capture,
        clock,
    ):
        result = await run_node(capture, clock, READER.evolve(max_tokens=60), iterative("write"))
        assert result.status == "ok", result["n"].reason
        answer = result["n"].result.answer
        assert answer.startswith("word word") and answer.endswith("and that is the end.")
        assert len(capture.payloads) == 2
        assert capture.payloads[1]["messages"][-1]["content"][-1]["text"] == CONTINUE_TEXT


@pytest.mark.anyio
async def test_a_truncated_tool_call_is_not_run_and_continuation_is_bounded() -> None:
    long = "x " * 400
    script = [ScriptStep(text=long.strip(), tool_calls=calls(read("a")).tool_calls)] * (MAX_CONTINUATIONS + 1)
    async with simulated({"n": script}, whole=False) as (_sim, capture, clock):
        result = await run_node(capture, clock, READER.evolve(max_tokens=40), iterative("write", max_rounds=10))
        assert result.status == "failed"
        assert "cut off at max_tokens" in result["n"].reason
        assert len(capture.payloads) == MAX_CONTINUATIONS + 1


@pytest.mark.anyio
async def test_a_refusal_fails_its_node_with_the_reason() -> None:
    step = ScriptStep(text="I can't help with that request.", stop_reason="refusal")
    async with simulated({"n": [step]}) as (_sim, capture, clock):
        result = await run_node(capture, clock, READER, iterative("do the bad thing"))
        assert result.status == "failed"
        assert result["n"].reason is not None
        assert "refused (stop_reason refusal): I can't help with that request." in result["n"].reason


@pytest.mark.anyio
async def test_pause_turn_is_continued_by_sending_the_conversation_again() -> None:
    paused = ScriptStep(text="searching", stop_reason="pause_turn")
    async with simulated({"n": [paused, calls(read("a")), text("found it")]}) as (_sim, capture, clock):
        result = await run_node(capture, clock, READER, iterative("find"))
        assert result.status == "ok", result["n"].reason
        assert result["n"].result.answer == "found it"
        assert capture.payloads[1]["messages"][-1]["role"] == "assistant"  # sent again as it was


STEP_FILE = """
schema = "foldline.scenario/v1"
[provider]
kind = "simulated"
[profiles.default]
system = "s"
[[nodes]]
id = "n"
instruction = "x"
script = [{ text = "no", stop_reason = "%s" }]
"""


def test_a_scenario_file_names_a_scripted_stop_reason_and_only_the_two_it_may() -> None:
    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import ScenarioError, loads_scenario

    scenario = loads_scenario(STEP_FILE % "refusal", path_label="s.toml", tool_names=BUILTIN_TOOLS.names())
    assert scenario.nodes[0].script[0].stop_reason == "refusal"
    with pytest.raises(ScenarioError) as refused:
        loads_scenario(STEP_FILE % "end_turn", path_label="s.toml", tool_names=BUILTIN_TOOLS.names())
    assert "s.toml: nodes[0].script[0].stop_reason: 'end_turn' is not one of pause_turn, refusal" in str(refused.value)
