"""A foldline branch under Anthropic's server-side compaction, run to completion against the simulator.

A scenario node reads four 60,000-character files (about 15,000 simulator
tokens each) with ``server_context_edits = [compact_20260112]`` at its least
trigger, 50,000 input tokens, through the real SDK over HTTP. The fourth
request holds three results, over the trigger: its response carries a
``compaction`` block (the summary the script's fourth step gives); the branch's record keeps it as an assistant block, byte-exact, and
every later request sends it back, so the simulator reads the conversation
from it on and later requests bill far fewer input tokens. With
``pause_after_compaction`` the paused reply (``stop_reason`` ``"compaction"``)
is sent back as it is and the model continues, as after ``pause_turn``.
asyncio and trio.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from actors.tools import BUILTIN_TOOLS
from runtime.config.loader import load_scenario
from runtime.scenarios.run import run_scenario
from runtime.values.canonical import canonical_json
from runtime.values.messages import AssistantResponse, CompactionPart

pytestmark = pytest.mark.anyio

SCENARIO = """schema = "foldline.scenario/v1"
name = "server-compaction"

[provider]
kind = "{kind}"
model = "claude-sonnet-4-6"

[profiles.default]
tools = ["synthetic_read"]
server_context_edits = [{{ type = "compact_20260112", trigger = {{ type = "input_tokens", value = 50000 }}, pause_after_compaction = {pause} }}]

[[nodes]]
id = "reader"
instruction = "Read the four ledgers, then say what the last one ends with."
script = [
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "a.md", size = 60000 }} }}] }},
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "b.md", size = 60000 }} }}] }},
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "c.md", size = 60000 }} }}] }},
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "d.md", size = 60000 }} }}], compaction = "<summary>Read ledgers a to c; d is next.</summary>" }},
  {{ text = "Noted the last ledger." }},
]
"""


async def run(tmp_path: Path, *, pause: bool, kind: str = "simulated") -> tuple[Any, list[dict[str, Any]]]:
    path = tmp_path / "compaction.toml"
    path.write_text(SCENARIO.format(kind=kind, pause=str(pause).lower()), encoding="utf-8")
    signals = tmp_path / "signals.jsonl"
    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    done = await run_scenario(scenario, signals_path=signals, provider_kind=kind)
    assert done.report["status"] == "ok", done.report
    events = [json.loads(line) for line in signals.read_text(encoding="utf-8").splitlines()]
    return done, [e["data"] for e in events if e["type"] == "ResponseReceived"]


def billed(data: dict[str, Any]) -> int:
    usage = data["usage"]
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_write_5m_tokens"]


def compactions(done: Any) -> list[CompactionPart]:
    [branch] = done.result.branches.values()
    return [
        part
        for message in branch.record_messages()
        if isinstance(message, AssistantResponse)
        for part in message.parts
        if isinstance(part, CompactionPart)
    ]


def answer(done: Any) -> str:
    result = done.result.outcomes["reader"].result
    assert result is not None
    return result.answer


SUMMARY = "<summary>Read ledgers a to c; d is next.</summary>"


async def test_a_branch_keeps_and_resends_the_compaction_block(tmp_path: Path) -> None:
    done, responses = await run(tmp_path, pause=False)
    assert [r["stop_reason"] for r in responses] == ["tool_use"] * 4 + ["end_turn"]
    [part] = compactions(done)
    assert part.block_json == canonical_json({"type": "compaction", "content": SUMMARY, "encrypted_content": None})
    # Request 4 was over the trigger: its usage holds the compaction pass (the whole prompt) and the answer.
    assert billed(responses[3]) > 50_000
    # Request 5 sends the whole record, block included; the server reads from the block on: d's result and little else.
    assert billed(responses[4]) < 25_000
    assert answer(done) == "Noted the last ledger."


async def test_a_paused_compaction_is_continued_and_the_branch_completes(tmp_path: Path) -> None:
    done, responses = await run(tmp_path, pause=True)
    assert [r["stop_reason"] for r in responses] == ["tool_use"] * 3 + ["compaction", "tool_use", "end_turn"]
    [part] = compactions(done)
    assert part.summary == SUMMARY
    paused, continued = responses[3], responses[4]
    assert paused["usage"]["output_tokens"] > 0  # the compaction pass's summary, billed through iterations
    # The continuation is read from the block on: a small request, however long the record.
    assert billed(continued) < 2_000
    assert billed(responses[5]) < 25_000
    assert answer(done) == "Noted the last ledger."


async def test_the_scripted_provider_compacts_the_same(tmp_path: Path) -> None:
    (tmp_path / "http").mkdir()
    (tmp_path / "scripted").mkdir()
    _, over_http = await run(tmp_path / "http", pause=True)
    done, in_process = await run(tmp_path / "scripted", pause=True, kind="scripted")
    assert [r["usage"] for r in in_process] == [r["usage"] for r in over_http]
    assert [r["stop_reason"] for r in in_process] == [r["stop_reason"] for r in over_http]
    assert [p.summary for p in compactions(done)] == [SUMMARY]
