"""The store's commands, for the ``foldline`` command line.

For each command, ``add_<cmd>_arguments(parser)`` declares its arguments and
``run_<cmd>(args, out, err) -> int`` runs it (exit 0 ok, 1 failed or a
verification failed, 2 bad input):

- ``run SCENARIO --store PATH``: :func:`add_run_arguments` adds ``--store``;
  :func:`run_run` runs the scenario storing it as it goes (the CLI may call
  :func:`runtime.store.run.run_scenario_stored` itself).
- ``resume PATH``: continue a stored run that stopped; print its report.
- ``replay PATH (--request ID | --all)``: rebuild stored requests and verify
  their digests; ``--request`` prints the request (canonical JSON) only if it
  matches. ``ID`` is a request id, or ``#N`` for the store's row N.
- ``events PATH [--type T] [--follow]``: print stored events, one canonical
  JSON object per line; ``--follow`` keeps printing while a run writes (a
  Temporal run's store: until its ``RunFinished``, whoever writes it).
- ``inspect PATH [--branch B]``: list the branches, or show one branch's view
  (``B`` is a branch id or a node id).

``python -m runtime.cli.store CMD ...`` runs them on their own.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio

from runtime.errors import ConfigError, FoldlineError
from runtime.store.errors import (
    NotAStore,
    NothingToResume,
    ReplayError,
    StoreCorrupt,
    StoreError,
    StoreInUse,
    StorePathRefused,
)
from runtime.values.canonical import canonical_json

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
FOLLOW_POLL_SECONDS = 0.2


def _fail(err: TextIO, message: str, code: int) -> int:
    print(f"foldline: {message}", file=err)
    return code


def _progress(args: argparse.Namespace, err: TextIO) -> Any:
    if getattr(args, "quiet", False):
        return None
    from runtime.cli.progress import progress_printer  # shared by run and resume

    return progress_printer(err)


def _print_report(report: dict[str, Any], args: argparse.Namespace, out: TextIO) -> int:
    from runtime.display.terminal import shown
    from runtime.report import format_report

    print(shown(format_report(report)), file=out)
    if getattr(args, "report", None):
        from runtime.cli.outputs import write_output

        write_output("--report", args.report, json.dumps(report, indent=2, sort_keys=True) + "\n")
    return EXIT_OK if report["status"] == "ok" else EXIT_FAILED


# -- run --store ------------------------------------------------------------------------------------


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """``--store PATH`` for ``foldline run`` (a file, or a directory to put the store in)."""
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="store the run in SQLite at PATH as it goes (resumable); a directory PATH holds it as "
        "PATH/foldline-store.sqlite3",
    )


def run_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``foldline run SCENARIO --store PATH [--tools M:N] [--provider K] [--signals F] [--report F] [--quiet]``.

    The run loads the same tools as one without a store (the built-ins,
    ``read_image`` beside the file, the workspace tools, ``--tools``); the
    store keeps the ``--tools`` spec so ``foldline resume`` loads them again.
    """
    from runtime.config.loader import load_scenario
    from runtime.scenarios.tools import run_tools, tools_meta
    from runtime.store.run import run_scenario_stored

    try:
        tools = run_tools(args.scenario, getattr(args, "tools", None))
        scenario = load_scenario(args.scenario, tool_names=tools.names())
        registry = tools.registry(scenario)
    except ConfigError as exc:
        label = "" if str(exc).startswith((args.scenario, "--tools")) else f"{args.scenario}: "
        return _fail(err, f"{label}{exc}", EXIT_BAD_INPUT)
    from runtime.cli.progress import progress_printer
    from runtime.display.live import progress_view
    from runtime.store.schema import resolve_store_path

    if resolve_store_path(args.store) != Path(args.store):  # a directory: say which file the run is stored in
        print(
            f"foldline: --store {args.store} is a directory: storing the run in {resolve_store_path(args.store)}",
            file=err,
        )
    quiet, plain = getattr(args, "quiet", False), getattr(args, "plain", False)
    try:
        with progress_view(err, quiet=quiet, plain=plain, plain_printer=progress_printer) as progress:
            run = anyio.run(
                lambda: run_scenario_stored(
                    scenario,
                    store_path=args.store,
                    provider_kind=getattr(args, "provider", None),
                    signals_path=getattr(args, "signals", None),
                    progress=progress,
                    registry=registry,
                    tools_meta=tools_meta(tools),
                )
            )
    except ConfigError as exc:
        return _fail(err, f"{args.scenario}: {exc}", EXIT_BAD_INPUT)
    except (StorePathRefused, StoreInUse, NotAStore) as exc:
        return _fail(err, str(exc), EXIT_BAD_INPUT)
    return _print_report(run.report, args, out)


# -- resume ----------------------------------------------------------------------------------------------


def add_resume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="the store of a run that stopped (crash, kill, Ctrl-C)")
    parser.add_argument(
        "--provider",
        choices=("scripted", "simulated", "anthropic", "openai"),
        help="override the provider the run was stored with",
    )
    parser.add_argument("--report", metavar="FILE.json", help="write the report as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")


def run_resume(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``foldline resume PATH``: continue the run; print the whole run's report."""
    from runtime.store.reader import StoreReader
    from runtime.store.run import report_from_store, resume_stored_run

    progress = _progress(args, err)
    try:
        run = anyio.run(lambda: resume_stored_run(args.path, provider_kind=args.provider, progress=progress))
    except NothingToResume as exc:
        print(f"foldline: {exc}", file=err)
        with StoreReader(args.path) as reader:
            scenario = _stored_scenario(reader)
            verification = _verify_store(reader)  # report only on what verifies (as replay --all)
        if not verification.ok:
            for failure in verification.failures:
                print(f"foldline: resume: verification failed: {failure}", file=err)
            return _fail(
                err, f"{args.path}: {verification.summary()}; not reporting on an unverified store", EXIT_FAILED
            )
        print(f"foldline: {verification.summary()} (every stored request rebuilt to its digest)", file=err)
        report = report_from_store(args.path, scenario.provider.model_config.name, scenario.prices())
        return _print_report(report, args, out)
    except (NotAStore, StoreInUse, ConfigError) as exc:
        return _fail(err, str(exc), EXIT_BAD_INPUT)
    except StoreError as exc:
        return _fail(err, f"{args.path}: cannot resume: {exc}", EXIT_FAILED)
    return _print_report(run.report, args, out)


def _verify_store(reader: Any) -> Any:
    from runtime.store.replay import replay_all
    from runtime.store.resume import verify_stored_requests

    try:
        return verify_stored_requests(replay_all(reader))
    except StoreCorrupt as exc:
        return verify_stored_requests([exc])


def _stored_scenario(reader: Any) -> Any:
    from runtime.config.loader import loads_scenario
    from runtime.scenarios.tools import stored_tool_names
    from runtime.store.integrity import stored_scenario_label

    meta = reader.meta()
    scenario = loads_scenario(
        meta["scenario_text"], path_label=stored_scenario_label(reader.label, meta), tool_names=stored_tool_names(meta)
    )
    return scenario


# -- replay ---------------------------------------------------------------------------------------------------


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a run's store")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--request", metavar="ID", help="one request: its id, or #N for the store's row N")
    which.add_argument("--all", action="store_true", help="every stored request")


def run_replay(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Rebuild and verify; never calls a model or runs a tool."""
    from runtime.store.reader import StoreReader
    from runtime.store.replay import Replayed, replay_all

    try:
        reader = StoreReader(args.path)
    except NotAStore as exc:
        return _fail(err, str(exc), EXIT_BAD_INPUT)
    with reader:
        try:
            rows = reader.requests(None if args.all else args.request)
            if not args.all:
                if not rows:
                    return _fail(err, f"{args.path}: no stored request {args.request!r}", EXIT_BAD_INPUT)
                if len(rows) > 1:
                    labels = ", ".join(f"#{row.rid}" for row in rows)
                    return _fail(
                        err,
                        f"{args.path}: request id {args.request!r} names {len(rows)} stored requests ({labels}); "
                        "pick one with --request #N",
                        EXIT_BAD_INPUT,
                    )
            results = replay_all(reader, rows)
        except StoreCorrupt as exc:
            return _fail(err, f"{args.path}: malformed store: {exc}", EXIT_FAILED)
    failures = [r for r in results if isinstance(r, ReplayError)]
    for result in results:
        if isinstance(result, Replayed):
            if args.all:
                print(f"ok {result.row.label} {result.digest}", file=out)
            else:
                print(result.request.payload_text(), file=out)
        else:
            print(f"foldline: replay failed: {result}", file=err)
    if args.all:
        print(f"{len(results) - len(failures)} of {len(results)} requests verified", file=err if failures else out)
    return EXIT_FAILED if failures else EXIT_OK


# -- events ----------------------------------------------------------------------------------------------------------


def add_events_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", help="a run's store (or a file a SqliteSink wrote), or a Temporal run's postgresql://... events table"
    )
    parser.add_argument("--run", metavar="RUN_ID", help="with a postgresql://... table: the run whose events to print")
    parser.add_argument(
        "--type",
        action="append",
        metavar="T",
        dest="types",
        help="only events of type T (repeat for several, or T1,T2)",
    )
    parser.add_argument(
        "--follow",
        action="store_true",
        help="keep printing new events while a run or resume writes the store "
        "(a Temporal run's store or table: until the run's final event)",
    )


def run_events(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from runtime.store.events_sink import read_events
    from runtime.store.lock import writer_active
    from runtime.store.schema import resolve_store_path
    from signals.envelope import InvalidEventError

    types = None
    if args.types:
        types = {name.strip() for entry in args.types for name in entry.split(",") if name.strip()}
        from signals.events import EVENT_TYPES

        if unknown := sorted(types - set(EVENT_TYPES)):
            return _fail(
                err,
                f"--type {unknown[0]!r}: not an event type; types: {', '.join(sorted(EVENT_TYPES))}",
                EXIT_BAD_INPUT,
            )
    if args.path.startswith(("postgres://", "postgresql://")):
        return _postgres_events(args, types, out, err)
    if args.run is not None:
        return _fail(
            err, f"--run {args.run!r}: only a postgresql://... events table holds several runs", EXIT_BAD_INPUT
        )
    try:
        if args.follow:
            from runtime.cli.follow import follow_to_finish, stored_engine

            if stored_engine(args.path) != "local":
                return follow_to_finish(args.path, types, out, FOLLOW_POLL_SECONDS)
        last = 0
        order = "rowid" if args.follow else "seq"
        while True:
            # Whether a writer was active is read before the events, so nothing it wrote is missed.
            active = args.follow and writer_active(resolve_store_path(args.path))
            polled = read_events(args.path, types=types, after_rowid=last, order=order, check_types=last == 0)
            for rowid, event in polled:
                print(canonical_json(event.to_json()), file=out, flush=args.follow)
                last = max(last, rowid)
            if not active:
                return EXIT_OK
            time.sleep(FOLLOW_POLL_SECONDS)
    except NotAStore as exc:
        return _fail(err, str(exc), EXIT_BAD_INPUT)
    except InvalidEventError as exc:
        return _fail(err, f"malformed store: {exc}", EXIT_FAILED)
    except KeyboardInterrupt:
        return EXIT_OK


def _postgres_events(args: argparse.Namespace, types: set[str] | None, out: TextIO, err: TextIO) -> int:
    """A Temporal run's events from the Postgres table its ``--events-db postgresql://...`` wrote, in seq order.

    ``--follow``: print them as the run writes them, until its final event (``RunFinished``) or Ctrl-C.
    """
    if not args.run:
        return _fail(
            err, "events: a postgresql://... table holds many runs: name one with --run RUN_ID", EXIT_BAD_INPUT
        )
    try:
        from runtime.temporal.sinks import PostgresEventSink
    except ImportError:
        return _fail(
            err,
            "events: a postgresql://... table needs the temporal extra: pip install -e '.[temporal]'",
            EXIT_BAD_INPUT,
        )
    sink = PostgresEventSink(args.path)
    seen = False
    try:
        for event in sink.follow(args.run, FOLLOW_POLL_SECONDS) if args.follow else sink.events(args.run):
            seen = True
            if types is None or event.get("type") in types:
                print(canonical_json(event), file=out, flush=args.follow)
    except ConfigError as exc:
        return _fail(err, str(exc), EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        sink.close()
    if not seen:
        return _fail(err, f"events: no events of run {args.run!r} in that table", EXIT_FAILED)
    return EXIT_OK


# -- inspect -----------------------------------------------------------------------------------------------------------


def add_inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", help="a run's store")
    parser.add_argument("--branch", metavar="B", help="a branch id or a node id (default: list the branches)")


def _projection_of(branch: Any, bounds: dict[str, int | None]) -> Any:
    """The result bound the branch's latest request compiled under, as a projection."""
    from runtime.store.replay import result_projection

    return result_projection(bounds.get(branch.id), branch, branch.state.protected_round)


def run_inspect(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from runtime.measuring.tokenizer import count_tokens
    from runtime.store.inspect import describe_branch, format_branch, format_branches, side_prompt_ids
    from runtime.store.reader import StoreReader

    try:
        reader = StoreReader(args.path)
    except NotAStore as exc:
        return _fail(err, str(exc), EXIT_BAD_INPUT)
    with reader:
        try:
            branches = reader.restore_branches()
            nodes = reader.node_of_branches()
            requests = reader.requests()
            bounds = {row.branch_id: row.result_bound for row in requests if row.intent != "side"}
        except StoreCorrupt as exc:
            return _fail(err, f"{args.path}: malformed store: {exc}", EXIT_FAILED)
    if args.branch is None:
        from runtime.store.inspect import message_chars

        rows = [
            (
                b.id,
                nodes.get(b.id),
                b.parent_id,
                b.record_length(),
                len(b.view_ids()),
                sum(message_chars(m) for m in b.view()),
            )
            for b in branches.values()
        ]
        print(format_branches(rows), file=out)
        return EXIT_OK
    branch = branches.get(args.branch)
    if branch is None:
        matching = [bid for bid, node in nodes.items() if node == args.branch]
        if len(matching) != 1:
            known = ", ".join(sorted(set(nodes.values()))) or "none"
            what = "several branches" if matching else "no branch or node"
            return _fail(err, f"{args.path}: {args.branch!r} names {what}; nodes: {known}", EXIT_BAD_INPUT)
        branch = branches[matching[0]]
    picture = describe_branch(
        branch,
        count_tokens=count_tokens,
        node_id=nodes.get(branch.id),
        projection=_projection_of(branch, bounds),
        side_prompts=side_prompt_ids(requests),
    )
    from runtime.display.terminal import shown

    print(shown(format_branch(picture)), file=out)
    return EXIT_OK


# -- on its own --------------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m runtime.cli.store", description="foldline's store commands")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a scenario, storing it")
    run.add_argument("scenario")
    run.add_argument("--provider", choices=("scripted", "simulated", "anthropic", "openai"))
    run.add_argument("--signals", metavar="FILE.jsonl")
    run.add_argument("--report", metavar="FILE.json")
    run.add_argument("--quiet", action="store_true")
    run.add_argument("--tools", metavar="MODULE:NAME")
    add_run_arguments(run)
    add_resume_arguments(sub.add_parser("resume", help="continue a stored run"))
    add_replay_arguments(sub.add_parser("replay", help="rebuild and verify stored requests"))
    add_events_arguments(sub.add_parser("events", help="print a store's events"))
    add_inspect_arguments(sub.add_parser("inspect", help="show a branch's view"))
    return parser


COMMANDS = {
    "run": run_run,
    "resume": run_resume,
    "replay": run_replay,
    "events": run_events,
    "inspect": run_inspect,
}


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    from runtime.logs import configure_logging

    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)
    configure_logging(level="warning", fmt="console", stream=err)
    if args.command == "run" and not args.store:
        return _fail(err, "run: --store PATH is required here", EXIT_BAD_INPUT)
    try:
        return COMMANDS[args.command](args, out, err)
    except FoldlineError as exc:
        return _fail(err, str(exc), EXIT_FAILED)


if __name__ == "__main__":
    sys.exit(main())
