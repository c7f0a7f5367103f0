"""``[provider] kind = "openai"`` on Temporal: the same requests as in process, the key never in history (issue 18).

quickstart.toml on the openai provider, with a reasoning dialect
(``reasoning_content``, ``reasoning_effort = "low"``), against the
simulator's chat-completions face, run twice: in process, and through
``foldline run --engine temporal`` on a dev server (the command's worker
opens the openai provider from the scenario's provider settings, reading the
key from the environment variable the scenario names). Each run has a
simulator of its own (a script's steps are used up by one run) at the same
address, so a reply's reasoning names the same origin in both. Asyncio only,
as every Temporal test.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("temporalio", reason="the Temporal engine needs the temporal extra: pip install -e '.[temporal]'")
pytest.importorskip("openai", reason="the openai provider needs the openai extra")

from temporal_dev import free_port
from test_temporal import BIN, ROOT, _digests, needs_server, server  # noqa: F401

KEY_ENV = "FOLDLINE_TEST_CHAT_KEY"
ALLOWED = {"FOLDLINE_ALLOW_KEY_ENV": KEY_ENV}  # the user allows the scenario's api_key_env
CHAT_KEY = "sk-chat-temporal-7c1d0e5a9b3f48e2a6d4c0b8"
DIALECT = 'reasoning = "reasoning_content"\nreasoning_effort = "low"\n'


def _scenario(tmp_path: Path, base_url: str) -> Path:
    """quickstart.toml on the openai kind at ``base_url``, in a reasoning dialect."""
    text = (ROOT / "scenarios" / "quickstart.toml").read_text(encoding="utf-8")
    provider = f'kind = "openai"\nbase_url = "{base_url}"\napi_key_env = "{KEY_ENV}"\n{DIALECT}'
    text = text.replace('kind = "simulated"\n', provider, 1)
    assert provider in text
    path = tmp_path / "quickstart-openai.toml"
    path.write_text(text, encoding="utf-8")
    return path


@contextmanager
def _chat_sim(scenario: Path, port: int) -> Iterator[list[int]]:
    """The simulator at ``port`` answering ``scenario``'s scripts on its chat face; yields the statuses served."""
    import queue

    import anyio

    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.providers.factory import sim_config_for
    from runtime.scenarios.run import build_policies
    from runtime.sim.server import serve_simulator

    loaded = load_scenario(scenario, tool_names=BUILTIN_TOOLS.names())
    ready: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    statuses: list[int] = []

    async def serve() -> None:
        config = sim_config_for(loaded.provider, api_key=CHAT_KEY, run_id="temporal-openai")  # one thinking key
        config = attrs.evolve(config, port=port)
        async with serve_simulator(config, build_policies(loaded), time.time) as simulator:
            simulator.app.chat.dialect = loaded.provider.reasoning
            ready.put(simulator.base_url)
            await anyio.to_thread.run_sync(stop.wait)
            statuses.extend(r.status for r in simulator.app.requests)

    thread = threading.Thread(target=anyio.run, args=(serve,), daemon=True)
    thread.start()
    ready.get(timeout=60)
    try:
        yield statuses
    finally:
        stop.set()
        thread.join(timeout=30)


def _local(scenario: Path, signals: Path) -> Any:
    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.scenarios.run import run_scenario

    loaded = load_scenario(scenario, tool_names=BUILTIN_TOOLS.names())
    return asyncio.run(run_scenario(loaded, signals_path=signals))


async def _histories(address: str, run_id: str) -> list[bytes]:
    """Every history of the run's workflows: its flow's (``foldline-RUN_ID``) and its nodes' (``.../NODE``); the
    server is the session's, which holds other tests' workflows too."""
    from temporalio.client import Client

    client = await Client.connect(address)
    out = []
    async for listed in client.list_workflows():
        if listed.id != f"foldline-{run_id}" and not listed.id.startswith(f"foldline-{run_id}/"):
            continue
        history = await client.get_workflow_handle(listed.id, run_id=listed.run_id).fetch_history()
        out.append(history.to_json().encode())
    return out


@needs_server
@pytest.mark.slow
def test_an_openai_scenario_on_temporal_sends_what_it_sends_in_process(server: str, tmp_path: Path) -> None:  # noqa: F811
    port = free_port()
    scenario = _scenario(tmp_path, f"http://127.0.0.1:{port}/v1")
    os.environ.update({KEY_ENV: CHAT_KEY, **ALLOWED})
    try:
        with _chat_sim(scenario, port) as local_served:
            local_run = _local(scenario, tmp_path / "local.jsonl")
    finally:
        del os.environ[KEY_ENV], os.environ["FOLDLINE_ALLOW_KEY_ENV"]
    bodies, signals, report = tmp_path / "bodies", tmp_path / "temporal.jsonl", tmp_path / "temporal.json"
    argv = [sys.executable, "-m", "runtime.cli", "--log-level", "error", "run", str(scenario), "--engine", "temporal"]
    argv += ["--temporal", server, "--bodies", str(bodies), "--quiet", "--signals", str(signals)]
    argv += ["--report", str(report)]
    with _chat_sim(scenario, port) as remote_served:
        done = subprocess.run(
            argv,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, KEY_ENV: CHAT_KEY, **ALLOWED},
        )
    assert done.returncode == 0, done.stderr[-3000:]
    local, remote = local_run.report, json.loads(report.read_text())
    assert remote["status"] == local["status"] == "ok"
    # The same requests, in order, per node: the dialect reached the worker (reasoning came back and went back).
    assert _digests(signals) == _digests(tmp_path / "local.jsonl")
    for key in ("usage", "requests", "attempts", "refusals", "bytes_unrecoverable"):
        assert remote[key] == local[key], key
    assert local["usage"]["cache_read_input_tokens"] > 0  # cached_tokens came back, the same in both
    assert local_served == remote_served and set(local_served) == {200}
    from runtime.store.codec import message_content_json

    views = [message_content_json(m) for b in local_run.result.branches.values() for m in b.view()]
    assert any("foldline-chat-reasoning/1:" in v for v in views)  # replies carried reasoning, kept and given back
    # The key is the worker's alone: not in any workflow history, body, event or report.
    histories = asyncio.run(_histories(server, remote["run_id"]))
    assert len(histories) > len(remote["nodes"]) and all(CHAT_KEY.encode() not in h for h in histories)
    stored = [p.read_bytes() for p in bodies.rglob("*") if p.is_file()]
    assert stored and all(CHAT_KEY.encode() not in b for b in stored)
    assert CHAT_KEY not in signals.read_text() + report.read_text() + done.stderr + done.stdout


def test_a_standalone_worker_serves_the_provider_a_scenario_describes(tmp_path: Path, monkeypatch: Any) -> None:
    """`foldline worker --provider-from SCENARIO` opens that scenario's provider (kind openai here), key from its env."""
    from runtime.providers.openai import OpenAIProvider
    from runtime.temporal.command import WorkerOptions, _worker_providers

    scenario = _scenario(tmp_path, "http://127.0.0.1:9/v1")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv(KEY_ENV, CHAT_KEY)
    monkeypatch.setenv("FOLDLINE_ALLOW_KEY_ENV", KEY_ENV)
    options = WorkerOptions(temporal="127.0.0.1:1", bodies=str(tmp_path), provider_from=str(scenario))

    async def opened() -> tuple[list[str], Any]:
        async with _worker_providers(options) as providers:
            return sorted(providers), providers["openai"]

    kinds, provider = asyncio.run(opened())
    assert kinds == ["openai"] and isinstance(provider, OpenAIProvider)
    assert provider.base_url == "http://127.0.0.1:9/v1" and CHAT_KEY not in repr(provider)


def test_a_worker_given_a_bad_provider_scenario_exits_2_naming_it(tmp_path: Path, monkeypatch: Any) -> None:
    """The command's exit code and its line, from ``main`` in process (what ``python -m runtime.cli`` exits with;
    a subprocess here only re-imported the package, twice)."""
    from runtime.cli.main import main

    scenario = _scenario(tmp_path, "http://127.0.0.1:9/v1")
    for name in (KEY_ENV, "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in ALLOWED.items():
        monkeypatch.setenv(name, value)
    cases = [
        (tmp_path / "missing.toml", "missing.toml"),
        (scenario, f"the environment variable {KEY_ENV} is not set"),  # its key from the worker's environment
    ]
    for path, expected in cases:
        argv = ["worker", "--temporal", "127.0.0.1:1", "--bodies", str(tmp_path), "--provider-from", str(path)]
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out=out, err=err) == 2, err.getvalue()
        assert expected in err.getvalue() and "Traceback" not in err.getvalue() and out.getvalue() == ""
