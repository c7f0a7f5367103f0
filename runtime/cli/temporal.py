"""The Temporal engine's options: ``run --engine temporal ...``, ``worker`` and ``attach``.

runtime.temporal.command and runtime.temporal.attach run them.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from runtime.temporal import (
    DEFAULT_HEARTBEAT_S,
    DEFAULT_HISTORY_LIMIT,
    DEFAULT_RECONNECT_S,
    DEFAULT_TASK_QUEUE,
    DEFAULT_WORKER_WAIT_S,
    MAX_HEARTBEAT_S,
    MIN_HEARTBEAT_S,
)


def _add_reconnect_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--reconnect-for",
        type=float,
        metavar="SECONDS",
        help=f"how long to keep reconnecting to a server that went away mid-run (default {DEFAULT_RECONNECT_S:g})",
    )


def add_engine_arguments(run: argparse.ArgumentParser) -> None:
    """The options ``foldline run`` gains: where the flow runs."""
    run.add_argument("--engine", choices=("local", "temporal"), default="local", help="run in process or on Temporal")
    run.add_argument("--temporal", metavar="HOST:PORT", help="a Temporal server (default: start the dev server)")
    run.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=f"default {DEFAULT_TASK_QUEUE!r}")
    run.add_argument("--bodies", metavar="DIR", help="the body store every worker reaches (needed with --temporal)")
    run.add_argument(
        "--events-db",
        metavar="FILE|URL",
        help="also write the events into a store file (foldline events) or a Postgres table (postgresql://...)",
    )
    run.add_argument("--no-worker", action="store_true", help="submit and follow only: workers elsewhere do the work")
    run.add_argument(
        "--history-limit",
        type=int,
        metavar="EVENTS",
        help=f"a branch workflow continues as new at its next fold commit past this many history events "
        f"(default {DEFAULT_HISTORY_LIMIT})",
    )
    run.add_argument(
        "--heartbeat-timeout",
        type=float,
        metavar="SECONDS",
        help=f"a worker that stops heartbeating a provider attempt this long is taken as lost and the attempt moves "
        f"to another worker (from {MIN_HEARTBEAT_S:g} to {MAX_HEARTBEAT_S:g}; default {DEFAULT_HEARTBEAT_S:g})",
    )
    _add_reconnect_argument(run)


def local_engine_conflict(args: argparse.Namespace) -> str | None:
    """What a local run was given that only the Temporal engine takes (None: nothing)."""
    names = ("temporal", "bodies", "events_db", "history_limit", "reconnect_for", "heartbeat_timeout")
    given = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name) is not None]
    given += ["--no-worker"] if args.no_worker else []
    return f"{', '.join(given)}: only with --engine temporal" if given else None


def add_worker_arguments(worker: argparse.ArgumentParser) -> None:
    worker.add_argument("--temporal", metavar="HOST:PORT", required=True, help="the Temporal server")
    worker.add_argument("--task-queue", default=DEFAULT_TASK_QUEUE, help=f"default {DEFAULT_TASK_QUEUE!r}")
    worker.add_argument("--bodies", metavar="DIR", required=True, help="the body store every worker reaches")
    worker.add_argument("--sim-url", metavar="URL", help="serve the `simulated` provider from this simulator")
    worker.add_argument(
        "--provider-from",
        metavar="SCENARIO",
        help="also serve the provider this scenario's [provider] table describes (any kind, openai included; "
        "its key from the variable its api_key_env names, in this worker's environment)",
    )
    worker.add_argument(
        "--slots",
        metavar="N,N",
        help="the affinity task queues (QUEUE@N) this worker serves besides the shared one (default: all)",
    )
    worker.add_argument(
        "--wait-for-server",
        type=float,
        default=DEFAULT_WORKER_WAIT_S,
        metavar="SECONDS",
        help=f"wait this long for the server at the start (then exit 2; 0: at once) or after losing it "
        f"(then exit 1) (default {DEFAULT_WORKER_WAIT_S:g})",
    )


def add_attach_arguments(attach: argparse.ArgumentParser) -> None:
    attach.add_argument("run_id", metavar="RUN_ID", help="the run id `foldline run --engine temporal` printed")
    attach.add_argument("--temporal", metavar="HOST:PORT", required=True, help="the Temporal server the run is on")
    attach.add_argument("--bodies", metavar="DIR", required=True, help="the body store the run's workers reach")
    attach.add_argument("--report", metavar="FILE.json", help="write the report as JSON")
    attach.add_argument("--store", metavar="PATH", help="the run's --store: its final branches go in")
    _add_reconnect_argument(attach)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from runtime.temporal.command import EngineOptions, run_temporal

    options = EngineOptions(
        scenario=args.scenario,
        provider=args.provider,
        signals=args.signals,
        report=args.report,
        events_db=args.events_db,
        temporal=args.temporal,
        task_queue=args.task_queue,
        bodies=args.bodies,
        no_worker=args.no_worker,
        store=args.store,
        history_limit=DEFAULT_HISTORY_LIMIT if args.history_limit is None else args.history_limit,
        reconnect_s=DEFAULT_RECONNECT_S if args.reconnect_for is None else args.reconnect_for,
        heartbeat_s=DEFAULT_HEARTBEAT_S if args.heartbeat_timeout is None else args.heartbeat_timeout,
    )
    return run_temporal(options, out, err)


def attach(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from runtime.temporal.attach import AttachOptions, run_attach

    options = AttachOptions(
        run_id=args.run_id,
        temporal=args.temporal,
        bodies=args.bodies,
        report=args.report,
        store=args.store,
        reconnect_s=DEFAULT_RECONNECT_S if args.reconnect_for is None else args.reconnect_for,
    )
    return run_attach(options, out, err)


def worker(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from runtime.temporal.command import WorkerOptions, run_worker

    options = WorkerOptions(
        temporal=args.temporal,
        bodies=args.bodies,
        task_queue=args.task_queue,
        sim_url=args.sim_url,
        slots=args.slots,
        provider_from=args.provider_from,
        wait_s=args.wait_for_server,
    )
    return run_worker(options, out, err)
