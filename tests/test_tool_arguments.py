"""Issue 11, case 6: tool arguments are untrusted; scripts call only the tools their profile offers."""

from __future__ import annotations

import pytest
from support import (
    READER,
    calls,
    flow,
    iterative,
    node,
    read,
    runtime_for,
    scripted,
    text,
)

from actors.tools import BUILTIN_TOOLS, ToolArgumentError, ToolContext
from actors.tools.registry import MAX_SYNTHETIC_CHARS
from runtime.config import loads_scenario
from runtime.config.loader import ScenarioError
from runtime.values.messages import ToolResult

CONTEXT = ToolContext(node_id="n", branch_id="b")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("synthetic_read", {"path": "a", "size": 10**30}, "argument 'size' must be an integer from 0 to 2000000"),
        ("synthetic_read", {"path": "a", "size": MAX_SYNTHETIC_CHARS + 1}, "got 2000001"),
        ("synthetic_read", {"path": "a", "size": -1}, "got -1"),
        ("synthetic_read", {"path": "a", "size": "9"}, "got '9'"),
        ("synthetic_read", {"path": "a", "size": True}, "got True"),
        ("synthetic_read", {"size": 10}, "missing argument 'path'"),
        ("synthetic_read", {"path": 7}, "argument 'path' must be a non-empty string"),
        ("synthetic_read", {"path": "x" * 5000}, "5000 characters, above the bound of 4096"),
        ("synthetic_read", {"path": "a", "offset": 3}, "unknown argument 'offset'; it takes path, size"),
        ("synthetic_search", {"query": "q", "size": 10**30}, "argument 'size' must be an integer from 0 to 2000000"),
        ("spawn", {"node": ""}, "argument 'node' must name a child node"),
        ("fail", {"message": ["x"]}, "argument 'message' must be a non-empty string"),
    ],
)
async def test_out_of_bound_arguments_are_refused_at_once(tool: str, arguments: dict, says: str) -> None:
    with pytest.raises(ToolArgumentError) as info:
        await BUILTIN_TOOLS.get(tool).func(arguments, CONTEXT)
    assert says in str(info.value)
    assert len(str(info.value)) < 300  # bounded, whatever the value


@pytest.mark.anyio
async def test_a_huge_read_is_an_error_result_the_model_sees_and_the_node_goes_on() -> None:
    provider = scripted(
        {"n": [calls(("synthetic_read", {"path": "big", "size": 10**30})), calls(read("small", 100)), text("ok")]}
    )
    async with runtime_for(provider) as rt:
        result = await rt.run(flow(node("n", iterative("read"))))
    assert result["n"].status == "ok" and result["n"].result.answer == "ok"
    branch = result.branches["n"]
    results = [m for m in branch.view() if isinstance(m, ToolResult)]
    assert results[0].is_error and "argument 'size' must be an integer from 0 to 2000000" in results[0].output
    assert not results[1].is_error and len(results[1].output) == 100


def test_a_script_calling_a_tool_the_profile_does_not_offer_is_refused_at_load() -> None:
    text_ = """
schema = "foldline.scenario/v1"
[profiles.default]
tools = ["synthetic_read"]
[[nodes]]
id = "a"
instruction = "x"
script = [{ text = "fine" }, { tool_calls = [{ name = "synthetic_read" }, { name = "rm_rf", arguments = { path = "/" } }] }]
"""
    with pytest.raises(ScenarioError) as info:
        loads_scenario(text_, path_label="s.toml", tool_names=BUILTIN_TOOLS.names() | {"rm_rf"})
    assert str(info.value) == (
        's.toml: nodes[0].script[1].tool_calls[1].name: "rm_rf" is not a tool profile "default" offers; '
        "it offers: synthetic_read"
    )


def test_the_context_tool_counts_as_offered_under_context_management() -> None:
    text_ = """
schema = "foldline.scenario/v1"
[profiles.default]
context_management = true
[[nodes]]
id = "a"
instruction = "x"
script = [{ tool_calls = [{ name = "context", arguments = { action = "fold", start = 1, end = 2 } }] }]
"""
    assert loads_scenario(text_, path_label="s.toml", tool_names=BUILTIN_TOOLS.names())
    assert READER.tools  # the shared test profile offers synthetic_read, spawn and fail
