"""The Temporal engine's options: ``run --engine temporal ...`` and ``worker`` (runtime.temporal.command runs them)."""

from __future__ import annotations

import argparse
from typing import TextIO

from runtime.temporal import DEFAULT_HISTORY_LIMIT, DEFAULT_TASK_QUEUE


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


def local_engine_conflict(args: argparse.Namespace) -> str | None:
    """What a local run was given that only the Temporal engine takes (None: nothing)."""
    names = ("temporal", "bodies", "events_db", "history_limit")
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
    )
    return run_temporal(options, out, err)


def worker(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from runtime.temporal.command import WorkerOptions, run_worker

    options = WorkerOptions(
        temporal=args.temporal,
        bodies=args.bodies,
        task_queue=args.task_queue,
        sim_url=args.sim_url,
        slots=args.slots,
        provider_from=args.provider_from,
    )
    return run_worker(options, out, err)
