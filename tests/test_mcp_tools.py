"""Tools from MCP servers, against real servers over stdio (the ``mcp`` extra).

Two real servers: ``mcp-server-time``, published on PyPI and started as its
users start it (its console script, found on PATH or beside this Python), and ``tests/mcp_fixture_server.py``,
written here with the SDK's own server API, whose tools raise, sleep past the
timeout, return large results and exit mid-run. The async tests run on asyncio
and trio (the SDK is anyio-based and supports both).
"""

from __future__ import annotations

import io
import json
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the mcp extra is not installed (pip install 'foldline[mcp]')")
pytest.importorskip("mcp_server_time", reason="mcp-server-time (the mcp extra) is not installed")

from actors.tools import ToolContext, ToolFailed
from actors.tools.mcp import MAX_RESULT_CHARS, McpServerError, _Server, _tool, mcp_servers
from runtime.cli.main import main
from runtime.cli.run_extras import run_with_mcp
from runtime.config.loader import ScenarioError, load_mcp_servers, loads_scenario
from runtime.config.mcp import McpServerSpec, mcp_servers_from_obj
from runtime.errors import ConfigError
from runtime.scenarios.tools import run_tools

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "mcp_fixture_server.py"
CONTEXT = ToolContext(node_id="n", branch_id="b")


# -- the [mcp] table --------------------------------------------------------------------------------


HEAD = 'schema = "foldline.scenario/v1"\n'
NODE = '[[nodes]]\nid = "a"\ninstruction = "x"\n'


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[mcp.t]\ncommand = "mcp-server-time"\n', 'mcp.t.command: "mcp-server-time" is a string, not an array'),
        ("[mcp.t]\n", "mcp.t: give exactly one of command"),
        ('[mcp.t]\ncommand = ["a"]\nurl = "http://127.0.0.1:1/mcp"\n', "mcp.t: give exactly one of command"),
        ('[mcp.t]\nurl = "file:///etc/passwd"\n', 'mcp.t.url: "file:///etc/passwd" is not an http:// or https:// URL'),
        ('[mcp.t]\ncommand = ["a"]\ntimeout_s = 0\n', "mcp.t.timeout_s: 0.0 is not a number of seconds > 0"),
        ('[mcp.t]\ncommand = ["a"]\ntimeout_s = 1e9\n', "mcp.t.timeout_s: 1000000000.0 is not a number of seconds"),
        ('[mcp.t]\ncommand = ["a"]\nenv = { "1X" = "v" }\n', 'mcp.t.env.1X: "1X" is not an environment variable name'),
        ('[mcp.t]\ncommand = ["a"]\nenv = { X = 1 }\n', "mcp.t.env.X: 1 is an integer, not a string"),
        ("[mcp.t]\ncommand = []\n", "mcp.t.command: [] is not a program and at most"),
        ('[mcp.t]\ncommand = ["a"]\nargs = ["b"]\n', "mcp.t.args: unknown key; expected one of command, cwd, env"),
        ('[mcp.t]\nurl = "http://127.0.0.1:1/mcp"\ncwd = "."\n', "mcp.t: env and cwd apply to a command"),
        ('[mcp."a b"]\ncommand = ["a"]\n', 'mcp."a b": "a b" is not a server name'),
        ("mcp = 3\n", "mcp: 3 is an integer, not a table"),
    ],
)
def test_the_mcp_table_is_checked_with_key_paths(table: str, message: str) -> None:
    with pytest.raises(ScenarioError) as info:
        loads_scenario(HEAD + table + NODE, path_label="s.toml", tool_names=set())
    assert str(info.value).startswith(f"s.toml: {message}"), str(info.value)


def test_the_mcp_table_is_read_alone_and_kept_on_the_scenario(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(HEAD + '[mcp.time]\ncommand = ["mcp-server-time"]\nenv = { TZ = "UTC" }\n' + NODE)
    servers = load_mcp_servers(path)
    assert servers == {"time": McpServerSpec(command=("mcp-server-time",), env={"TZ": "UTC"})}
    assert loads_scenario(path.read_text(), path_label="s.toml", tool_names=set()).mcp == servers
    path.write_text(HEAD + NODE)
    assert load_mcp_servers(path) == {}


@given(
    st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True), st.text(max_size=40), max_size=5),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), min_size=1, max_size=3),
)
def test_an_env_table_is_kept_exactly_or_refused_naming_the_variable(
    good: dict[str, str], other: dict[str, str]
) -> None:
    good = {k: v for k, v in good.items() if "\x00" not in v}
    assert dict(McpServerSpec(command=["a"], env=good).env) == good
    bad = {k: v for k, v in other.items() if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) or "\x00" in v}
    for name, value in bad.items():
        with pytest.raises(ConfigError, match=r"^mcp\.s\.env\."):
            mcp_servers_from_obj({"s": {"command": ["a"], "env": {name: value}}})


def test_code_and_files_refuse_the_same_server() -> None:
    with pytest.raises(ConfigError, match=r"^McpServerSpec\.timeout_s: -1\.0 is not"):
        McpServerSpec(command=["a"], timeout_s=-1)
    with pytest.raises(ConfigError, match=r"^mcp\.x\.timeout_s: -1\.0 is not"):
        mcp_servers_from_obj({"x": {"command": ["a"], "timeout_s": -1}})


# -- what a server lists is bounded -----------------------------------------------------------------


def _listed(name: str = "ok", description: str = "d", schema: dict[str, Any] | None = None) -> Any:
    # A listed tool as the SDK's mcp_types.Tool carries it (its fields, read by attribute).
    from mcp_types import Tool as McpTool

    return McpTool(name=name, description=description, input_schema=schema or {"type": "object"})


@pytest.mark.parametrize(
    ("listed", "message"),
    [
        (lambda: _listed(name="has space"), "tool 'has space': the name is not 1 to 64 letters"),
        (lambda: _listed(name="x" * 65), "the name is not 1 to 64 letters"),
        (lambda: _listed(description="d" * 20_000), "a description of 20000 characters is above 16384"),
        (
            lambda: _listed(schema={"type": "object", "description": "s" * 70_000}),
            "an input schema of 70034 bytes is above 65536",
        ),
    ],
)
def test_a_listed_tool_out_of_bounds_is_refused_naming_the_server(listed: Any, message: str) -> None:
    server = _Server("srv", McpServerSpec(command=["x"]), None)
    with pytest.raises(McpServerError) as info:
        _tool(server, listed())
    assert str(info.value).startswith("mcp.srv: tool ") and message in str(info.value), str(info.value)


# -- the fixture server: errors, timeouts, large results, death -------------------------------------


def _fixture(**kw: Any) -> dict[str, McpServerSpec]:
    return {"fx": McpServerSpec(command=[sys.executable, str(FIXTURE)], **kw)}


@pytest.mark.anyio
async def test_fixture_server_tools_answer_fail_and_bound_their_results(anyio_backend: str) -> None:
    async with mcp_servers(_fixture()) as mcp:
        assert mcp.by_server == {"fx": ("echo", "explode", "sleepy", "big", "die")}
        tools = {t.name: t for t in mcp.tools}
        assert tools["echo"].spec.description == "Return the text unchanged."
        assert json.loads(tools["echo"].spec.input_schema_json)["required"] == ["text"]
        assert tools["echo"].timeout_s == 60.0
        assert await tools["echo"].func({"text": "héllo"}, CONTEXT) == "héllo"
        with pytest.raises(ToolFailed, match=r"^explode: Error executing tool explode: the disk is full$"):
            await tools["explode"].func({"message": "the disk is full"}, CONTEXT)
        assert len(await tools["big"].func({"size": MAX_RESULT_CHARS}, CONTEXT)) == MAX_RESULT_CHARS
        with pytest.raises(ToolFailed, match=rf"above the bound of {MAX_RESULT_CHARS}"):
            await tools["big"].func({"size": MAX_RESULT_CHARS + 1}, CONTEXT)
        with pytest.raises(ToolFailed, match=r"(?s)^echo: .*Field required"):  # the server validates its own arguments
            await tools["echo"].func({"txt": "x"}, CONTEXT)


SCENARIO = """
schema = "foldline.scenario/v1"
name = "mcp_faults"

[provider]
kind = "simulated"
model = "claude-haiku-5-5"

[mcp.fx]
command = [{python}, {fixture}]
timeout_s = 1.5

[profiles.default]
tools = ["echo", "explode", "sleepy", "big", "die"]

[[nodes]]
id = "n"
instruction = "Use every tool."
script = [
  {{ tool_calls = [{{ name = "echo", arguments = {{ text = "first" }} }}] }},
  {{ tool_calls = [{{ name = "explode", arguments = {{ message = "no space left" }} }}] }},
  {{ tool_calls = [{{ name = "sleepy", arguments = {{ seconds = 30 }} }}] }},
  {{ tool_calls = [{{ name = "echo", arguments = {{ text = "after the timeout" }} }}] }},
  {{ tool_calls = [{{ name = "die", arguments = {{ code = 3 }} }}] }},
  {{ tool_calls = [{{ name = "echo", arguments = {{ text = "after the death" }} }}] }},
  {{ text = "Done." }},
]
"""


def _results(run: Any) -> list[tuple[str, bool, str]]:
    from runtime.values.messages import ToolResult

    messages = run.result.branches["n"].record_messages()
    return [(m.name, m.is_error, m.output) for m in messages if isinstance(m, ToolResult)]


@pytest.mark.anyio
async def test_a_server_that_raises_hangs_and_dies_gives_error_results_and_the_run_completes(
    anyio_backend: str, tmp_path: Path
) -> None:
    path = tmp_path / "faults.toml"
    path.write_text(SCENARIO.format(python=json.dumps(sys.executable), fixture=json.dumps(str(FIXTURE))))
    run = await run_with_mcp(str(path), run_tools(path), load_mcp_servers(path))
    assert run.report["status"] == "ok"
    results = _results(run)
    assert [(name, error) for name, error, _ in results] == [
        ("echo", False),
        ("explode", True),
        ("sleepy", True),
        ("echo", False),
        ("die", True),
        ("echo", True),
    ]
    outputs = [output for _, _, output in results]
    assert outputs[0] == "first" and outputs[3] == "after the timeout"
    assert "no space left" in outputs[1]
    assert "timed out after 1.5 s" in outputs[2]
    assert "MCP server 'fx'" in outputs[4] and "fixture: exiting on request" in outputs[4]
    assert "MCP server 'fx'" in outputs[5]


@pytest.mark.anyio
async def test_a_server_that_cannot_start_is_refused_by_name(anyio_backend: str, tmp_path: Path) -> None:
    missing = {"gone": McpServerSpec(command=[str(tmp_path / "no-such-server")])}
    with pytest.raises(McpServerError, match=r"^mcp\.gone: the server could not be started: "):
        async with mcp_servers(missing):
            raise AssertionError("not reached")
    # A server that reads its requests and never answers; it exits once its stdin closes, so the refusal is not
    # followed by the SDK's 2 s grace for a child that ignores the closed pipe (a sleeping one waited it out).
    never = [sys.executable, "-c", "import sys; sys.stdin.read()"]
    silent = {"mute": McpServerSpec(command=never, startup_timeout_s=1)}
    with pytest.raises(McpServerError, match=r"^mcp\.mute: the server did not start .* startup_timeout_s = 1 s"):
        async with mcp_servers(silent):
            raise AssertionError("not reached")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.anyio
async def test_a_streamable_http_server_by_url(anyio_backend: str) -> None:
    import anyio

    port = _free_port()
    process = await anyio.open_process([sys.executable, str(FIXTURE), "--http", str(port)])
    try:
        with anyio.fail_after(60):  # until the server listens
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.2)
        async with mcp_servers({"web": McpServerSpec(url=f"http://127.0.0.1:{port}/mcp", timeout_s=5)}) as mcp:
            tools = {t.name: t for t in mcp.tools}
            assert await tools["echo"].func({"text": "over http"}, CONTEXT) == "over http"
            with pytest.raises(ToolFailed, match="over the wire"):
                await tools["explode"].func({"message": "over the wire"}, CONTEXT)
    finally:
        process.terminate()
        await process.wait()
        await process.aclose()


def test_without_servers_nothing_starts() -> None:
    import anyio

    async def empty() -> Any:
        async with mcp_servers({}) as mcp:
            return mcp

    assert anyio.run(empty).tools == ()


# -- the published server, from the command line ----------------------------------------------------


def test_the_mcp_time_scenario_calls_the_published_server_and_answers(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    signals = tmp_path / "s.jsonl"
    code = main(
        ["run", str(ROOT / "scenarios" / "mcp_time.toml"), "--quiet", "--signals", str(signals)], out=out, err=err
    )
    assert code == 0, err.getvalue()
    finished = [json.loads(line)["data"] for line in signals.read_text().splitlines() if '"ToolCallFinished"' in line]
    assert sorted((d["name"], d["is_error"]) for d in finished) == [
        ("convert_time", False),
        ("get_current_time", False),
    ]
    assert all(d["output_bytes"] > 50 for d in finished)
    assert "get_current_time: 1 call" in out.getvalue()


def test_a_profile_naming_a_tool_no_server_lists_is_refused_with_its_key_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    text = (ROOT / "scenarios" / "mcp_time.toml").read_text()
    path.write_text(text.replace('tools = ["get_current_time", "convert_time"]', 'tools = ["get_current_tim"]'))
    err = io.StringIO()
    assert main(["run", str(path), "--quiet"], out=io.StringIO(), err=err) == 2
    assert f'{path}: profiles.default.tools[0]: "get_current_tim" is not a known tool' in err.getvalue()
    assert 'did you mean "get_current_time"' in err.getvalue()


def test_mcp_servers_with_store_or_temporal_are_refused_as_not_built(tmp_path: Path) -> None:
    scenario = str(ROOT / "scenarios" / "mcp_time.toml")
    err = io.StringIO()
    assert main(["run", scenario, "--store", str(tmp_path / "s.db")], out=io.StringIO(), err=err) == 2
    assert "MCP servers ([mcp]) with --store are not built yet" in err.getvalue()


def test_listing_a_sdk_object_shape() -> None:
    # The result conversion reads the SDK's own result type.
    from mcp_types import CallToolResult, ImageContent, TextContent

    from actors.tools.mcp import result_text

    assert result_text("t", CallToolResult(content=[TextContent(text="a"), TextContent(text="b")])) == "a\nb"
    assert result_text("t", CallToolResult(content=[], structured_content={"b": 1, "a": 2})) == '{"a":2,"b":1}'
    image = CallToolResult(content=[ImageContent(data="AAAA", mime_type="image/png")])
    with pytest.raises(ToolFailed, match="image content is not built yet"):
        result_text("t", image)
