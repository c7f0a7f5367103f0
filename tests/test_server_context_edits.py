"""A foldline branch under Anthropic's server-side context management (the profile key ``server_context_edits``).

A scenario file runs against the simulator through the real SDK over HTTP:
one node reads three 6,000-character files with ``clear_tool_uses_20250919``
(trigger 3,000 input tokens, keep 1 tool use), its twin reads the same files
without edits. The provider sends the edits as ``context_management`` on the
SDK's beta stream with the ``context-management-2025-06-27`` beta (the
simulator refuses the edits without it), the simulator clears the older
results, so the edited node's later requests bill fewer input tokens, and
every response's ``applied_edits`` is on its ``ResponseReceived`` event.
The scripted provider is the simulator in process: it applies the same edits
and reports the same usage. asyncio and trio.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from sdk_sim import default_model_client

from actors.tools import BUILTIN_TOOLS
from runtime.config import Profile
from runtime.config.loader import load_scenario
from runtime.contract.provider import ProviderError
from runtime.errors import ConfigError
from runtime.providers.openai_wire import ChatDialect, chat_body
from runtime.scenarios.run import run_scenario

pytestmark = pytest.mark.anyio

EDIT = (
    '{ type = "clear_tool_uses_20250919", trigger = { type = "input_tokens", value = 3000 }, '
    'keep = { type = "tool_uses", value = 1 } }'
)
SCRIPT = """script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a.md", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "b.md", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "c.md", size = 6000 } }] },
  { text = "done" },
]"""
SCENARIO = """schema = "foldline.scenario/v1"
name = "server-edits"

[provider]
kind = "simulated"
model = "claude-sonnet-4-6"

[profiles.default]
tools = ["synthetic_read"]
{edits}

[[nodes]]
id = "reader"
instruction = "Read the files."
{script}
"""


async def run(tmp_path: Path, *, edits: bool, kind: str | None = None) -> list[dict[str, Any]]:
    """The ``ResponseReceived`` data of the scenario's one node, in order (the node's ids are the same either way)."""
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "edits.toml"
    text = SCENARIO.format(edits=f"server_context_edits = [{EDIT}]" if edits else "", script=SCRIPT)
    path.write_text(text, encoding="utf-8")
    signals = tmp_path / "signals.jsonl"
    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    done = await run_scenario(scenario, signals_path=signals, provider_kind=kind)
    assert done.report["status"] == "ok", done.report
    events = [json.loads(line) for line in signals.read_text(encoding="utf-8").splitlines()]
    return [event["data"] for event in events if event["type"] == "ResponseReceived"]


def billed(data: dict[str, Any]) -> int:
    usage = data["usage"]
    return usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_write_5m_tokens"]


async def test_a_scenario_branch_runs_with_server_side_clearing(tmp_path: Path) -> None:
    edited = await run(tmp_path / "edited", edits=True)
    plain = await run(tmp_path / "plain", edits=False)
    assert len(edited) == len(plain) == 4
    assert all(r["context_management"] is None for r in plain)  # no edits asked: none reported
    applied = [r["context_management"]["applied_edits"] for r in edited]
    # Request 1 holds no result, request 2 one (under the trigger); 3 and 4 clear all but the latest result.
    assert applied[:2] == [[], []]
    assert [a[0]["cleared_tool_uses"] for a in applied[2:]] == [1, 2]
    assert all(a[0]["type"] == "clear_tool_uses_20250919" for a in applied[2:])
    for n in (2, 3):  # the edited request bills what the unedited one did, less what the edit cleared
        assert billed(edited[n]) == billed(plain[n]) - applied[n][0]["cleared_input_tokens"]
        assert billed(edited[n]) < billed(plain[n])
    assert billed(edited[0]) == billed(plain[0]) and billed(edited[1]) == billed(plain[1])


async def test_the_scripted_provider_applies_the_same_edits(tmp_path: Path) -> None:
    over_http = await run(tmp_path / "http", edits=True)
    in_process = await run(tmp_path / "scripted", edits=True, kind="scripted")
    assert [r["context_management"] for r in in_process] == [r["context_management"] for r in over_http]
    assert [r["usage"] for r in in_process] == [r["usage"] for r in over_http]


async def test_the_simulator_refuses_edits_without_their_beta() -> None:
    edits = [{"type": "clear_tool_uses_20250919"}]
    async with default_model_client() as (_, client):
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=100,
                messages=[{"role": "user", "content": "hi"}],
                extra_body={"context_management": {"edits": edits}},
            )
    assert "context_management.edits.0.type: clear_tool_uses_20250919 needs the anthropic-beta header" in str(
        raised.value
    )
    assert "context-management-2025-06-27" in str(raised.value)


def test_a_chat_completions_payload_with_server_edits_is_refused() -> None:
    payload = {"model": "m", "max_tokens": 10, "messages": [], "context_management": {"edits": []}}
    with pytest.raises(ProviderError, match="server_context_edits: Anthropic's server-side context management"):
        chat_body(payload, ChatDialect(), "origin")


def test_the_profile_holds_the_edits_as_canonical_json() -> None:
    profile = Profile.from_obj(
        {"server_context_edits": [{"type": "compact_20260112", "pause_after_compaction": True}]}, "profiles.p"
    )
    assert profile.server_context_edits == '[{"pause_after_compaction":true,"type":"compact_20260112"}]'


@pytest.mark.parametrize(
    ("edits", "thinking", "message"),
    [
        ("x", None, 'profiles.p.server_context_edits: "x" is a string, not an array of edit tables'),
        ([], None, "profiles.p.server_context_edits: [] is not a non-empty array"),
        ([{"type": "clear_everything"}], None, 'profiles.p.server_context_edits[0].type: "clear_everything" is not'),
        (
            [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": -1}}],
            None,
            "profiles.p.server_context_edits[0].keep.value: -1 is not an integer >= 0",
        ),
        (
            [{"type": "clear_tool_uses_20250919", "trigger": {"type": "turns", "value": 3}}],
            None,
            'profiles.p.server_context_edits[0].trigger.type: "turns" is not one of',
        ),
        (
            [{"type": "clear_tool_uses_20250919", "placeholder": "x"}],
            None,
            "profiles.p.server_context_edits[0].placeholder: not a key of a clear_tool_uses_20250919 edit",
        ),
        (
            [{"type": "clear_tool_uses_20250919", "exclude_tools": ["read", 3]}],
            None,
            "profiles.p.server_context_edits[0].exclude_tools[1]: 3 is an integer, not a tool name",
        ),
        (
            [{"type": "clear_thinking_20251015"}],
            None,
            "profiles.p.server_context_edits[0].type: clear_thinking_20251015 needs the profile's thinking",
        ),
        (
            [{"type": "clear_tool_uses_20250919"}, {"type": "clear_thinking_20251015"}],
            {"type": "enabled", "budget_tokens": 1024},
            "profiles.p.server_context_edits[1].type: clear_thinking_20251015 must be the first edit",
        ),
        (
            [{"type": "clear_tool_uses_20250919"}, {"type": "clear_tool_uses_20250919"}],
            None,
            'profiles.p.server_context_edits[1].type: "clear_tool_uses_20250919" is listed twice',
        ),
        (
            [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 10_000}}],
            None,
            "profiles.p.server_context_edits[0].trigger.value: 10000 is not an integer >= 50000",
        ),
        (
            [{"type": "compact_20260112", "pause_after_compaction": "yes"}],
            None,
            'profiles.p.server_context_edits[0].pause_after_compaction: "yes" is a string, not a boolean',
        ),
    ],
)
def test_bad_edits_are_refused_at_load_with_their_key_path(edits: Any, thinking: Any, message: str) -> None:
    table: dict[str, Any] = {"server_context_edits": edits, "max_tokens": 4096}
    if thinking is not None:
        table["thinking"] = thinking
    with pytest.raises(ConfigError) as raised:
        Profile.from_obj(table, "profiles.p")
    assert message in str(raised.value)


async def test_an_edited_reply_calibrates_nothing(tmp_path: Path) -> None:
    """Request 4 (over 4,000 counted tokens, the least that calibrates) is billed after the server cleared two
    results: its usage counts another request than foldline measured, so the branch's book takes no sample."""
    samples = {}
    for edits in (False, True):
        path = tmp_path / f"{edits}.toml"
        text = SCENARIO.format(edits=f"server_context_edits = [{EDIT}]" if edits else "", script=SCRIPT)
        path.write_text(text.replace('kind = "simulated"', 'kind = "scripted"'), encoding="utf-8")
        done = await run_scenario(load_scenario(path, tool_names=BUILTIN_TOOLS.names()))
        [branch] = done.result.branches.values()
        calibration = branch.calibrations.get("claude-sonnet-4-6")
        samples[edits] = (calibration.samples, calibration.low)
    assert samples[False][0] == 1 and samples[False][1] is not None and samples[False][1] > 1.0
    assert samples[True] == (0, samples[True][1]) and (samples[True][1] is None or samples[True][1] > 1.0)
