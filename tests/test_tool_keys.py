"""No key leaves by a side door (issue 28, items 9, 10, 11).

9. Every text that leaves a tool (its error, its output: text, JSON, an image
   result's text) is scrubbed of the provider's actual key and its masked and
   partial pieces, whatever variable the key was read from.
10. A scenario's ``api_key_env`` names a variable other than the kind's own
    only when the user allows it (``FOLDLINE_ALLOW_KEY_ENV``); otherwise the
    run exits 2 before anything is sent.
11. The ``x-foldline-node`` header goes only to the simulator: the built-in one,
    or a ``foldline sim`` on this machine (a loopback ``base_url``); never to the
    provider's API or another host.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.images import ImageOutput
from actors.tools import Tool, ToolContext, ToolFailed, ToolSpec
from actors.tools.executor import RoundTools, run_calls
from runtime.cli.main import main
from runtime.config import ProviderSpec
from runtime.contract.provider import ProviderError, scrubber_of
from runtime.errors import ConfigError
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.factory import open_provider
from runtime.providers.key_destination import ALLOW_KEY_VARIABLE, ALLOW_VARIABLE, check_key_variable
from runtime.request.compiler import RequestSettings, compile_request
from runtime.scenarios.defaults import default_policies
from runtime.values.messages import Instruction, ToolCall, ToolResult
from runtime.values.scrub import REDACTED, scrub_secret

KEY = "sk-ant-api03-SECRETkeyVALUE-Zq7Xw2Lk9Pm4Rt6Yb1Nc8Vd3-LUE123456"


def _windows(secret: str) -> list[str]:
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


def _leaks(text: str) -> list[str]:
    return [w for w in _windows(KEY) if w in text]


def _tool(name: str, body: Any) -> Tool:
    async def run(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        return body()

    return Tool(ToolSpec.create(name, name, {"type": "object", "properties": {}}), run)


def _raise(message: str) -> Any:
    def body() -> Any:
        raise ToolFailed(message)

    return body


def _crash() -> Any:
    raise RuntimeError(f"connect failed for {KEY}")


async def _results(context: ToolContext, tools: dict[str, Tool]) -> list[ToolResult]:
    setup = RoundTools(offered=frozenset(tools), tools=tools, context=context)
    out: list[ToolResult] = []
    calls = [ToolCall.create(f"c{i}", name, {}) for i, name in enumerate(tools)]
    await run_calls(calls, setup, out.append)
    return out


@pytest.mark.anyio
async def test_every_text_a_tool_returns_or_raises_is_scrubbed_of_the_providers_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CLAUDE_ACCESS", KEY)  # a name that does not look secret: only the key itself tells
    provider = AnthropicProvider.create(api_key=KEY, base_url="http://127.0.0.1:9")
    context = ToolContext(node_id=None, branch_id="b", scrub=scrubber_of(provider))
    tools = {
        "masked": _tool("masked", _raise(f"upstream refused {KEY[:13]}... (ends {KEY[-9:]})")),
        "whole": _tool("whole", lambda: f"the key is {KEY}"),
        "json": _tool("json", lambda: {KEY[-12:]: [f"head {KEY[:20]}", 5, {"tail": KEY[30:]}]}),
        "image": _tool("image", lambda: ImageOutput(f"loaded with {KEY[10:40]}", ())),
        "crash": _tool("crash", _crash),
    }
    results = await _results(context, tools)
    texts = [r.output if isinstance(r.output, str) else json.dumps(r.output) for r in results]
    assert [_leaks(t) for t in texts] == [[]] * 5, texts
    assert texts[0] == f"upstream refused {REDACTED}... (ends {REDACTED})"
    assert texts[4] == f"RuntimeError: connect failed for {REDACTED}"
    assert texts[1] == f"the key is {REDACTED}"
    assert results[0].is_error and not results[1].is_error
    await provider.aclose()


@pytest.mark.anyio
async def test_a_failing_node_does_not_carry_the_key_out_in_its_error() -> None:
    provider = AnthropicProvider.create(api_key=KEY, base_url="http://127.0.0.1:9")
    context = ToolContext(node_id=None, branch_id="b", scrub=scrubber_of(provider))
    tools = {"masked": _tool("masked", _raise(f"refused key ...{KEY[-9:]}"))}
    setup = RoundTools(offered=frozenset(tools), tools=tools, context=context, tool_errors="fail")
    out: list[ToolResult] = []
    with pytest.raises(ToolFailed) as failed:
        await run_calls([ToolCall.create("c0", "masked", {})], setup, out.append)
    assert not _leaks(str(failed.value)) and failed.value.__cause__ is None
    assert not _leaks(out[0].output)
    await provider.aclose()


def test_a_provider_without_a_key_has_no_scrubber() -> None:
    from runtime.providers.scripted import ScriptedProvider

    assert scrubber_of(ScriptedProvider(default_policies(), clock=lambda: 0.0)) is None


def _reference_scrub(text: str, secret: str) -> str:
    """The rule stated plainly: every position covered by an 8-character window of the secret is redacted."""
    windows = set(_windows(secret))
    covered = [False] * len(text)
    for i in range(len(text) - 7):
        if text[i : i + 8] in windows:
            covered[i : i + 8] = [True] * 8
    out, i = [], 0
    while i < len(text):
        if covered[i]:
            while i < len(text) and covered[i]:
                i += 1
            out.append(REDACTED)
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


@given(
    pieces=st.lists(
        st.one_of(st.text(max_size=12), st.tuples(st.integers(0, len(KEY) - 1), st.integers(1, 30))), max_size=8
    )
)
def test_the_fast_scrub_is_the_stated_rule(pieces: list[Any]) -> None:
    text = "".join(p if isinstance(p, str) else KEY[p[0] : p[0] + p[1]] for p in pieces)
    assert scrub_secret(text, KEY) == _reference_scrub(text, KEY)


# -- item 10: which variable the key is read from -----------------------------------


@pytest.mark.parametrize("name", ["AWS_SECRET_ACCESS_KEY", "PATH", "CLAUDE_ACCESS"])
def test_a_scenario_cannot_name_another_variable_without_the_users_word(name: str) -> None:
    with pytest.raises(ConfigError) as refused:
        check_key_variable(name, "ANTHROPIC_API_KEY", {})
    message = str(refused.value)
    assert message.startswith(f"provider.api_key_env: {name!r} is not ANTHROPIC_API_KEY")
    assert f"set {ALLOW_KEY_VARIABLE}={name}" in message
    check_key_variable(name, "ANTHROPIC_API_KEY", {ALLOW_KEY_VARIABLE: f"OTHER, {name} "})
    check_key_variable(None, "ANTHROPIC_API_KEY", {})
    check_key_variable("ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY", {})


class _Recorder(BaseHTTPRequestHandler):
    """Records each request's headers and answers a non-retryable 400."""

    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:
        type(self).seen.append({k.lower(): v for k, v in self.headers.items()})
        self.rfile.read(int(self.headers.get("content-length", "0")))
        body = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "no"}}).encode()
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []
    handler = type("Recorder", (_Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_run_naming_another_secret_exits_2_and_sends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recorder: tuple[str, list[dict[str, str]]]
) -> None:
    url, seen = recorder
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEY)
    monkeypatch.delenv(ALLOW_KEY_VARIABLE, raising=False)
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        f'schema = "foldline.scenario/v1"\n[provider]\nkind = "anthropic"\nbase_url = "{url}"\n'
        'api_key_env = "AWS_SECRET_ACCESS_KEY"\n[[nodes]]\nid = "a"\ninstruction = "Hello."\n',
        encoding="utf-8",
    )
    out, err = io.StringIO(), io.StringIO()
    code = main(["run", str(scenario), "--quiet"], out=out, err=err)
    assert code == 2, err.getvalue()
    assert "provider.api_key_env: 'AWS_SECRET_ACCESS_KEY' is not ANTHROPIC_API_KEY" in err.getvalue()
    assert seen == [] and not _leaks(out.getvalue() + err.getvalue())


# -- item 11: the node header --------------------------------------------------------


def _request() -> Any:
    return compile_request(
        system=None, tools=(), view=[Instruction("hi")], settings=RequestSettings(model="claude-haiku-5-5")
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("node_header", "expected"), [(False, None), (True, "reader")])
async def test_the_node_header_goes_only_where_asked(
    recorder: tuple[str, list[dict[str, str]]], node_header: bool, expected: str | None
) -> None:
    url, seen = recorder
    provider = AnthropicProvider.create(api_key="k-test-0000", base_url=url, node_header=node_header)
    with pytest.raises(ProviderError):
        await provider.send(_request(), node_id="reader")
    await provider.aclose()
    assert [h.get("x-foldline-node") for h in seen] == [expected]


def test_by_default_the_header_goes_to_loopback_only() -> None:
    for url, expected in [(None, False), ("https://api.anthropic.com", False), ("http://127.0.0.1:8765", True)]:
        assert AnthropicProvider.create(api_key="k-test-0000", base_url=url).node_header is expected


@pytest.mark.anyio
async def test_only_the_simulator_is_opened_with_the_node_header(
    monkeypatch: pytest.MonkeyPatch, recorder: tuple[str, list[dict[str, str]]]
) -> None:
    url, _ = recorder
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-test-0000")
    policies = default_policies()
    async with open_provider(ProviderSpec(kind="simulated"), policies, clock=lambda: 0.0) as simulated:
        assert getattr(simulated, "node_header", None) is True
    # A `foldline sim` the user runs is on this machine: a loopback base_url keeps the header (its scripts).
    async with open_provider(ProviderSpec(kind="anthropic", base_url=url), policies, clock=lambda: 0.0) as local:
        assert getattr(local, "node_header", None) is True
    async with open_provider(ProviderSpec(kind="anthropic"), policies, clock=lambda: 0.0) as official:
        assert getattr(official, "node_header", None) is False
    remote = ProviderSpec(kind="anthropic", base_url="https://api.anthropic.com")
    async with open_provider(remote, policies, clock=lambda: 0.0) as official_by_url:
        assert getattr(official_by_url, "node_header", None) is False
    monkeypatch.setenv(ALLOW_VARIABLE, "gateway.example")
    gateway = ProviderSpec(kind="anthropic", base_url="https://gateway.example/anthropic")
    async with open_provider(gateway, policies, clock=lambda: 0.0) as elsewhere:
        assert getattr(elsewhere, "node_header", None) is False


LEAKY_SCENARIO = """
schema = "foldline.scenario/v1"

[provider]
kind = "anthropic"
base_url = "http://127.0.0.1:{port}"
api_key_env = "CLAUDE_ACCESS"
max_retries = 0

[profiles.default]
tools = ["refuse", "echo_auth"]

[[nodes]]
id = "n"
instruction = "Use the tools."
script = [
  {{ tool_calls = [{{ name = "refuse", arguments = {{}} }}, {{ name = "echo_auth", arguments = {{}} }}] }},
  {{ text = "done" }},
]
"""


def _leaky_tools() -> list[Tool]:
    import os as _os

    from actors.tools import tool

    @tool
    def refuse() -> str:
        """Fail the way a gateway does: quoting the key masked."""
        key = _os.environ["CLAUDE_ACCESS"]
        raise ToolFailed(f"gateway refused {key[:13]}... (ends {key[-9:]})")

    @tool
    def echo_auth() -> dict[str, str]:
        """Return what a debugging endpoint returns: the auth header's middle."""
        return {"authorization": f"Bearer ...{_os.environ['CLAUDE_ACCESS'][5:30]}..."}

    return [refuse, echo_auth]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.anyio
async def test_a_run_keeps_no_piece_of_the_key_in_its_record_events_or_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path: the real SDK against the simulator, the key read from a variable the user allowed."""
    import time as _time

    import attrs

    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.providers.factory import sim_config_for
    from runtime.scenarios.run import build_policies, run_scenario
    from runtime.sim.server import serve_simulator

    monkeypatch.setenv("CLAUDE_ACCESS", KEY)
    monkeypatch.setenv(ALLOW_KEY_VARIABLE, "CLAUDE_ACCESS")
    port = _free_port()
    path = tmp_path / "leaky.toml"
    path.write_text(LEAKY_SCENARIO.format(port=port), encoding="utf-8")
    registry = BUILTIN_TOOLS.with_tools(_leaky_tools())
    scenario = load_scenario(path, tool_names=registry.names())
    config = attrs.evolve(sim_config_for(scenario.provider, api_key=KEY), port=port)
    signals = tmp_path / "signals.jsonl"
    async with serve_simulator(config, build_policies(scenario), _time.time):
        run = await run_scenario(scenario, signals_path=signals, registry=registry)
    assert run.report["status"] == "ok", run.report
    from runtime.store.codec import message_content_json

    record = [message_content_json(m) for b in run.result.branches.values() for m in b.view()]
    assert any("gateway refused" in r for r in record) and any("Bearer ..." in r for r in record)
    for text in [*record, signals.read_text(encoding="utf-8"), json.dumps(run.report)]:
        assert _leaks(text) == [], text[:500]
