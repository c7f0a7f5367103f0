"""``foldline worker`` and ``foldline run --engine temporal``.

- ``foldline worker --temporal HOST:PORT --bodies DIR [--task-queue Q] [--sim-url URL]``
  runs a worker until interrupted. Its providers: ``anthropic`` when
  ``ANTHROPIC_API_KEY`` is set, ``simulated`` when ``--sim-url`` names a running
  simulator (``foldline sim``; key from ``FOLDLINE_SIM_KEY``).
- ``foldline run SCENARIO --engine temporal [--temporal HOST:PORT --bodies DIR]``
  submits the scenario's flow and follows it to its report. The command also
  runs a worker of its own on the task queue, holding the provider it opened
  (the simulator, by default); other workers on the queue share the work.
  Without ``--temporal`` it starts the Temporal dev server from the installed
  ``temporal`` binary, with bodies in a temporary directory, and stops both
  afterwards. ``--no-worker`` only submits and follows: other workers do the work.
  The run and workflow ids are said on stderr once the flow has started
  (``foldline attach``, :mod:`runtime.temporal.attach`, gets back to it); a
  server lost mid-run is called again for ``--reconnect-for`` seconds, and no
  server at all is a one-line error, exit 2 (:mod:`runtime.temporal.reconnect`).

The Temporal SDK's native threads can abort the interpreter at exit
(temporalio/sdk-python#300), so the console command ends its process with
``os._exit`` once its output is flushed.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import attrs

from runtime.config.checks import check_int
from runtime.errors import ConfigError, FoldlineError
from runtime.store.errors import StoreInUse, StorePathRefused
from runtime.temporal import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_RECONNECT_S,
    DEFAULT_TASK_QUEUE,
    DEFAULT_WORKER_WAIT_S,
    MAX_HEARTBEAT_S,
    MAX_HISTORY_LIMIT,
    MAX_RECONNECT_S,
    MIN_HEARTBEAT_S,
    require_temporal,
)
from runtime.temporal.histories import branch_histories, run_histories, say_histories
from runtime.temporal.reconnect import (
    Patience,
    ServerLost,
    ServerUnreachable,
    connect_or_wait,
    first_line,
    is_transport_error,
    sole_error,
)


class FlowFailed(FoldlineError):
    """The flow workflow failed (its message says why); the command exits 1."""


@attrs.frozen
class EngineOptions:
    """What ``foldline run --engine temporal`` was asked (runtime.cli.temporal parses them)."""

    scenario: str
    provider: str | None = None
    signals: str | None = None
    report: str | None = None
    events_db: str | None = None
    temporal: str | None = None
    """HOST:PORT of a server; None: start the dev server."""
    task_queue: str = DEFAULT_TASK_QUEUE
    bodies: str | None = None
    no_worker: bool = False
    store: str | None = None
    history_limit: int | None = DEFAULT_HISTORY_LIMIT
    """A branch workflow continues as new at its next fold commit once its history holds this many events."""
    reconnect_s: float = DEFAULT_RECONNECT_S
    """How long the client keeps trying to reach a server it lost before it gives up."""
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    """How long a worker may go without heartbeating an attempt before the attempt moves to another worker."""


@attrs.frozen
class WorkerOptions:
    """What ``foldline worker`` was asked."""

    temporal: str
    bodies: str
    task_queue: str = DEFAULT_TASK_QUEUE
    sim_url: str | None = None
    slots: str | None = None
    """Comma-separated affinity slots (None: all)."""
    provider_from: str | None = None
    """A scenario whose ``[provider]`` table the worker also serves (any kind; its key from its ``api_key_env``)."""
    wait_s: float = DEFAULT_WORKER_WAIT_S
    """How long the worker waits for its server: at the start (then exit 2; 0: at once), and after losing it (exit 1)."""


def parse_slots(text: str | None) -> list[int] | None:
    """``--slots 0,2`` as slot numbers (None: all); refuse anything else, naming it."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts):
        raise ConfigError(f"--slots: {text!r} is not a comma-separated list of slot numbers (e.g. 0,2)")
    return [int(p) for p in parts]


def finish(code: int, out: TextIO, err: TextIO) -> int:
    """Return ``code``; as the console command, end the process now (see the module docstring)."""
    out.flush()
    err.flush()
    if out is sys.__stdout__ and err is sys.__stderr__:
        os._exit(code)
    return code


def check_seconds(value: float, flag: str, maximum: float, minimum: float = 0.0) -> float:
    """A number of seconds from ``minimum`` to ``maximum`` (a flag's value), or a ConfigError naming the flag."""
    if not minimum <= value <= maximum:  # NaN fails both comparisons
        raise ConfigError(f"{flag}: {value!r} is not a number of seconds from {minimum:g} to {maximum:g}")
    return value


async def connect_to(address: str, bodies: str, err: TextIO, *, wait_s: float = 0.0, role: str = "foldline") -> Any:
    """A client to the server at ``address`` with its body store; ServerUnreachable (one line) if none answers."""
    from runtime.temporal.bodies import open_body_store
    from runtime.temporal.worker import connect

    store = open_body_store(bodies)
    return await connect_or_wait(lambda: connect(address, store), address, wait_s, err, role=role)


@asynccontextmanager
async def _client(args: EngineOptions, err: TextIO) -> AsyncIterator[Any]:
    """A client: to ``--temporal`` with ``--bodies``, else to a dev server started here with bodies in a temp dir."""
    from runtime.temporal.bodies import open_body_store
    from runtime.temporal.worker import local_server

    if args.temporal:
        if not args.bodies:
            raise ConfigError(
                "--engine temporal --temporal HOST:PORT needs --bodies DIR (a store every worker reaches)"
            )
        yield await connect_to(args.temporal, args.bodies, err)
        return
    with tempfile.TemporaryDirectory(prefix="foldline-bodies-") as scratch:
        async with local_server(open_body_store(args.bodies or scratch)) as client:
            yield client


def _events_location(events_db: str | None) -> str | None:
    """Where the workers write the events: a Postgres URL as given, a SQLite file as an absolute path."""
    from runtime.temporal.sinks import is_postgres

    if not events_db:
        return None
    return events_db if is_postgres(events_db) else str(Path(events_db).resolve())


def started_line(run_id: str, workflow_id: str, args: EngineOptions) -> str:
    """What the command says when the flow has started: its ids, and how to get back to it."""
    if not args.temporal:
        return f"temporal: run {run_id}, workflow {workflow_id} on a dev server this command started (stops with it)"
    return (
        f"temporal: run {run_id}, workflow {workflow_id} at {args.temporal}; if this command stops, "
        f"`foldline attach {run_id} --temporal {args.temporal} --bodies {args.bodies}` waits for it and writes its report"
    )


async def follow_flow(client: Any, workflow_id: str, patience: Patience, store: str | None) -> dict[str, Any]:
    """Wait for a started flow's result (riding out server restarts); add its history sizes; store its branches.

    ``store``: a store created for the run; every node's final branch goes in
    (:mod:`runtime.temporal.stored`; a branch stored already is left as it is).
    """
    from temporalio.client import WorkflowFailureError

    handle = client.get_workflow_handle(workflow_id, result_type=dict)
    try:
        result: dict[str, Any] = await patience.call("waiting for the flow's result", handle.result)
    except WorkflowFailureError as failure:
        cause = failure.cause
        raise FlowFailed(
            f"the flow workflow {workflow_id} failed: {getattr(cause, 'message', None) or cause}"
        ) from None
    flow_runs = await patience.call("reading the flow's history", lambda: run_histories(client, workflow_id))
    result["history"] = max(flow_runs, key=lambda h: h["events"]) | {"runs": len(flow_runs)}
    result["branches"] = await patience.call(
        "reading the branches' histories", lambda: branch_histories(client, workflow_id, result["report"])
    )
    if store:
        from runtime.temporal.stored import store_branches

        ran = any(node["status"] != "skipped" for node in result["report"]["nodes"].values())
        if ran and not result["final_branches"]:
            raise ConfigError(f"--store {store}: the run was started without --store; no final branch was kept")
        await store_branches(store, result["final_branches"], client.data_converter.payload_codec.store)
    return result


async def submit(
    args: EngineOptions,
    scenario_text: str,
    label: str,
    providers: Any,
    *,
    run_id: str | None = None,
    err: TextIO | None = None,
) -> dict[str, Any]:
    """Run one flow on Temporal with a worker of this process on the queue (``providers``; None: no worker).

    Return the workflow's result (see :func:`submit_on`).
    """
    err = err if err is not None else sys.stderr
    async with _client(args, err) as client:
        return await submit_on(client, args, scenario_text, label, providers, run_id, err)


async def submit_on(
    client: Any, args: EngineOptions, scenario_text: str, label: str, providers: Any, run_id: str | None, err: TextIO
) -> dict[str, Any]:
    """Start the flow on ``client``'s server, say its ids on ``err``, and follow it to its result.

    With ``args.store`` (created already, for ``run_id``), the events go into the store and, once the flow
    has finished, every node's final branch (:mod:`runtime.temporal.stored`). A server that restarts
    meanwhile is waited for (``args.reconnect_s``).
    """
    from temporalio.common import WorkflowIDConflictPolicy

    from actors.tools import BUILTIN_TOOLS
    from runtime.temporal.activities import ActivityHost
    from runtime.temporal.worker import build_worker
    from runtime.temporal.workflows import FLOW_WORKFLOW

    run_id = run_id or "run-" + secrets.token_hex(6)
    events_db = args.store or args.events_db
    arg = {
        "scenario_text": scenario_text,
        "scenario_label": label,
        "provider": args.provider,
        "run_id": run_id,
        "signals_path": str(Path(args.signals).resolve()) if args.signals else None,
        "events_db": _events_location(events_db),
        "history_limit": args.history_limit,
        "keep_branch": bool(args.store),
        "heartbeat_s": args.heartbeat_s,
    }
    if args.signals:
        Path(args.signals).write_text("", encoding="utf-8")
    workflow_id = f"foldline-{run_id}"
    patience = Patience(args.temporal or "the dev server", args.reconnect_s, err)

    async def start(eager: bool) -> None:
        await patience.call(
            "starting the flow",  # made again after a lost answer: the flow already started is the one
            lambda: client.start_workflow(
                FLOW_WORKFLOW,
                arg,
                id=workflow_id,
                task_queue=args.task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                request_eager_start=eager,
            ),
        )
        print(started_line(run_id, workflow_id, args), file=err, flush=True)

    if providers is None:
        await start(eager=False)
        return await follow_flow(client, workflow_id, patience, args.store)
    # The worker first: the start's reply hands it the flow's first workflow task (eager start; a server that
    # does not offer it queues the task as before).
    async with build_worker(client, ActivityHost(providers, BUILTIN_TOOLS), task_queue=args.task_queue):
        await start(eager=True)
        return await follow_flow(client, workflow_id, patience, args.store)


def _check_engine_options(args: EngineOptions) -> None:
    """Refuse options that do not go together or are out of bounds (a ConfigError naming the flag)."""
    if args.temporal and not args.bodies:
        raise ConfigError("--engine temporal --temporal HOST:PORT needs --bodies DIR (a store every worker reaches)")
    if args.no_worker and not args.temporal:
        raise ConfigError("--no-worker needs --temporal HOST:PORT (a server other workers serve)")
    if args.history_limit is not None:
        check_int(
            args.history_limit,
            "--history-limit",
            minimum=1,
            maximum=MAX_HISTORY_LIMIT,
            expected=f"a number of history events from 1 to {MAX_HISTORY_LIMIT}",
        )
    check_seconds(args.reconnect_s, "--reconnect-for", MAX_RECONNECT_S)
    check_seconds(args.heartbeat_s, "--heartbeat-timeout", MAX_HEARTBEAT_S, MIN_HEARTBEAT_S)
    if args.store and args.events_db:
        raise ConfigError("--events-db: not with --store (the store holds the run's events)")
    if args.events_db is not None:
        from runtime.temporal.sinks import open_event_sink

        open_event_sink(args.events_db)  # a location it can name (connected only by the workers)


def engine_error(raised: BaseException) -> FoldlineError | None:
    """The one error a command reports in a line (no server, a lost server, a failed flow, bad input), or None.

    A task group (the simulator's, a worker's) wraps what it raised in an exception group: the error is
    taken out of a group that holds nothing else.
    """
    raised = sole_error(raised)
    if isinstance(raised, (ServerUnreachable, ServerLost, FlowFailed, ConfigError)):
        return raised
    return None


def write_outcome(report: dict[str, Any], report_path: str | None, out: TextIO) -> int:
    """Print the report, write it as JSON to ``report_path``; the exit code (0 every node ok, 1 otherwise)."""
    from runtime.report import format_report

    print(format_report(report), file=out)
    if report_path:
        Path(report_path).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0 if report["status"] == "ok" else 1


def run_temporal(args: EngineOptions, out: TextIO, err: TextIO) -> int:
    """``foldline run SCENARIO --engine temporal``: exit 0 all nodes ok, 1 failed nodes, 2 bad input or no server."""
    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario

    try:
        require_temporal()
        scenario = load_scenario(args.scenario, tool_names=BUILTIN_TOOLS.names())
        _check_engine_options(args)
        spec = scenario.provider if args.provider is None else scenario.provider.with_kind(args.provider)
        if spec.kind == "scripted":
            raise ConfigError("provider.kind: 'scripted' runs in process only; use simulated or anthropic on Temporal")
        text = Path(args.scenario).read_text(encoding="utf-8")
        run_id = "run-" + secrets.token_hex(6)
        if args.store:
            from runtime.temporal.stored import create_store

            stored = {
                "run_id": run_id,
                "scenario_text": text,
                "scenario_path": args.scenario,
                "provider_kind": spec.kind,
            }
            args = attrs.evolve(args, store=anyio.run(lambda: create_store(str(args.store), **stored)))
        elif args.events_db is not None:
            from runtime.temporal.sinks import prepare_event_sink

            prepare_event_sink(args.events_db)  # a store file exists (a Temporal run's) before any worker writes
    except (ConfigError, StorePathRefused, StoreInUse) as exc:
        print(f"foldline: {exc}", file=err)
        return finish(2, out, err)
    try:
        report = anyio.run(_run_with_provider, args, scenario, spec, text, err, run_id)
    except BaseException as raised:
        error = engine_error(raised)
        if error is None:
            raise
        later = (
            f"; the flow runs on: `foldline attach {run_id}` gets its report" if isinstance(error, ServerLost) else ""
        )
        print(f"foldline: {error}{later}", file=err)
        return finish(2 if isinstance(error, (ServerUnreachable, ConfigError)) else 1, out, err)
    return finish(write_outcome(report, args.report, out), out, err)


async def _run_with_provider(
    args: EngineOptions, scenario: Any, spec: Any, text: str, err: TextIO, run_id: str
) -> dict[str, Any]:
    from runtime.providers.factory import open_provider
    from runtime.scenarios.run import build_policies

    async with _client(args, err) as client:  # no server: a one-line error before any provider opens
        if args.no_worker:
            result = await submit_on(client, args, text, args.scenario, None, run_id, err)
        else:
            async with open_provider(spec, build_policies(scenario), clock=time.time) as provider:
                result = await submit_on(client, args, text, args.scenario, {spec.kind: provider}, run_id, err)
    say_histories(result, err)
    report: dict[str, Any] = result["report"]
    return report


def _worker_providers(args: WorkerOptions) -> AbstractAsyncContextManager[dict[str, Any]]:
    """The providers a ``foldline worker`` serves, by kind: from its environment, ``--sim-url``, ``--provider-from``."""
    from runtime.providers.anthropic import AnthropicProvider

    @asynccontextmanager
    async def opened() -> AsyncIterator[dict[str, Any]]:
        providers: dict[str, Any] = {}
        async with AsyncExitStack() as stack:
            if os.environ.get("ANTHROPIC_API_KEY"):
                providers["anthropic"] = AnthropicProvider.create(api_key=os.environ["ANTHROPIC_API_KEY"])
            if args.sim_url:
                key = os.environ.get("FOLDLINE_SIM_KEY", "sim-worker")
                providers["simulated"] = AnthropicProvider.create(
                    api_key=key, base_url=args.sim_url, name="simulated", node_header=True
                )
            for provider in providers.values():
                stack.push_async_callback(provider.aclose)
            if args.provider_from is not None:
                kind, provider = await _scenario_provider(args.provider_from, providers, stack)
                providers[kind] = provider
            if not providers:
                raise ConfigError(
                    "foldline worker: no provider (set ANTHROPIC_API_KEY, pass --sim-url URL or --provider-from SCENARIO)"
                )
            yield providers

    return opened()


async def _scenario_provider(path: str, served: dict[str, Any], stack: AsyncExitStack) -> tuple[str, Any]:
    """The provider a scenario's ``[provider]`` table describes, opened as ``foldline run`` opens it (its kind too)."""
    from actors.tools import BUILTIN_TOOLS
    from runtime.config.loader import load_scenario
    from runtime.providers.factory import open_provider
    from runtime.scenarios.run import build_policies

    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    spec = scenario.provider
    if spec.kind in served:
        raise ConfigError(
            f"--provider-from {path}: provider.kind {spec.kind!r} is served already (from the environment or --sim-url)"
        )
    provider = await stack.enter_async_context(open_provider(spec, build_policies(scenario), clock=time.time))
    return spec.kind, provider


async def _serve(args: WorkerOptions, err: TextIO) -> None:
    """Serve until interrupted; a server lost meanwhile is waited for (``--wait-for-server``), then served again."""
    from temporalio.api.workflowservice.v1 import GetSystemInfoRequest

    from actors.tools import BUILTIN_TOOLS
    from runtime.temporal.activities import ActivityHost
    from runtime.temporal.worker import build_worker

    check_seconds(args.wait_s, "--wait-for-server", MAX_RECONNECT_S)
    async with _worker_providers(args) as providers:
        client = await connect_to(args.temporal, args.bodies, err, wait_s=args.wait_s, role="foldline worker")
        host = ActivityHost(providers, BUILTIN_TOOLS)
        patience = Patience(args.temporal, args.wait_s, err, role="foldline worker", flag="--wait-for-server")
        while True:
            worker = build_worker(client, host, task_queue=args.task_queue, slots=parse_slots(args.slots))
            print(f"foldline worker: serving task queue {args.task_queue!r} at {args.temporal}", file=err, flush=True)
            try:
                await worker.run()
                return
            except Exception as raised:  # a task group's exception group too
                if not is_transport_error(cause := sole_error(raised)):
                    raise
            print(f"foldline worker: lost the server at {args.temporal} ({first_line(cause)})", file=err, flush=True)
            await patience.call(  # ServerLost past the bound: the worker exits 1
                "waiting to serve again", lambda: client.workflow_service.get_system_info(GetSystemInfoRequest())
            )


def run_worker(args: WorkerOptions, out: TextIO, err: TextIO) -> int:
    """``foldline worker``: serve until interrupted (exit 0); 2 on bad input or no server within
    ``--wait-for-server``, 1 when a server lost mid-run stays away longer than that."""
    try:
        require_temporal()
        anyio.run(_serve, args, err)
    except KeyboardInterrupt:
        return finish(0, out, err)
    except BaseException as raised:
        error = sole_error(raised)
        if not isinstance(error, (ConfigError, ServerUnreachable, ServerLost)):
            raise
        print(f"foldline: {error}", file=err)
        return finish(1 if isinstance(error, ServerLost) else 2, out, err)
    return finish(0, out, err)
