"""The ``foldline`` command line.

- ``foldline run SCENARIO [--provider scripted|simulated|anthropic|openai]
  [--signals FILE.jsonl] [--report FILE.json] [--tools MODULE:NAME] [--otlp URL]``: run a scenario file
  (starting the MCP servers its ``[mcp]`` table names, runtime.cli.run_extras), show
  progress on stderr, print the report on stdout. Exit 0 when every node
  succeeded, 1 when the run finished with failed nodes, 2 on bad input.
- ``foldline run SCENARIO --engine temporal [--temporal HOST:PORT]``, ``foldline worker --temporal HOST:PORT``:
  flows on Temporal (runtime.cli.temporal, runtime.temporal.command; needs the ``temporal`` extra).
- ``foldline attach RUN_ID --temporal HOST:PORT --bodies DIR``: wait for a flow on Temporal, write its report.
- ``foldline sim [--port N] [--clock virtual] ...``: serve the simulated Anthropic server (runtime.cli.sim).
- ``foldline bench [--micro] [--json FILE]``: the benchmarks.
- ``foldline resume PATH``, ``replay PATH``, ``events PATH``, ``inspect PATH [--html F]``:
  the durable store of a run started with ``foldline run --store PATH``.
- ``foldline report SOURCE --html FILE``: a store, signals file or bench JSON as one HTML page.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence
from typing import TextIO

import anyio

from runtime.cli.progress import progress_printer
from runtime.errors import ConfigError, FoldlineError
from runtime.logs import configure_logging

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def _version() -> str:
    """The installed foldline's version (its distribution metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("foldline")
    except PackageNotFoundError:
        return "unknown (not installed as a distribution)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="foldline", description="Run multi-agent flows under an input ceiling.")
    parser.add_argument(
        "--log-level",
        default="warning",
        type=str.lower,
        choices=("debug", "info", "warning", "error"),
        help="debug, info, warning (default) or error",
    )
    parser.add_argument("--log-format", default="console", choices=("console", "json"))
    parser.add_argument("--version", action="version", version=f"foldline {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a scenario file")
    run.add_argument("scenario", help="path to a scenario TOML file")
    run.add_argument(
        "--provider", choices=("scripted", "simulated", "anthropic", "openai"), help="override the scenario's provider"
    )
    run.add_argument("--signals", metavar="FILE.jsonl", help="write every event, one JSON object per line")
    run.add_argument("--report", metavar="FILE.json", help="write the report as JSON")
    run.add_argument("--quiet", action="store_true", help="no progress lines")
    run.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal (no live view)")
    run.add_argument(
        "--store",
        metavar="PATH",
        help="store the run in SQLite at PATH as it goes (resumable); a directory PATH holds it as "
        "PATH/foldline-store.sqlite3",
    )
    run.add_argument(
        "--tools", metavar="MODULE:NAME", help="add the tools of a registry in your code (package.module:registry)"
    )
    run.add_argument(
        "--otlp", metavar="URL", help="export the run as OpenTelemetry traces to an OTLP/HTTP collector (otel extra)"
    )
    from runtime.cli import temporal as temporal_command

    temporal_command.add_engine_arguments(run)
    temporal_command.add_worker_arguments(sub.add_parser("worker", help="run a Temporal worker for foldline flows"))
    temporal_command.add_attach_arguments(
        sub.add_parser("attach", help="wait for a flow running on Temporal and write its report")
    )

    from runtime.cli import bench as bench_command
    from runtime.cli import store as store_commands

    bench_command.add_arguments(sub.add_parser("bench", help="run the benchmark workloads under every strategy"))
    store_commands.add_resume_arguments(sub.add_parser("resume", help="continue a stored run that stopped"))
    store_commands.add_replay_arguments(
        sub.add_parser("replay", help="rebuild stored requests and verify their digests (no model, no tool)")
    )
    store_commands.add_events_arguments(sub.add_parser("events", help="print a stored run's events"))
    inspect = sub.add_parser("inspect", help="show a stored branch's view as the model sees it")
    store_commands.add_inspect_arguments(inspect)
    from runtime.cli import report as display_commands

    display_commands.add_inspect_html_argument(inspect)
    display_commands.add_report_arguments(
        sub.add_parser("report", help="draw a run or a bench output as one HTML file")
    )

    from runtime.cli import sim as sim_command

    sim_command.add_arguments(sub.add_parser("sim", help="serve the simulated Anthropic server"))
    return parser


def _cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from runtime.cli.run_extras import extras_refusal

    if (refusal := extras_refusal(args)) is not None:
        print(f"foldline: {refusal}", file=err)
        return EXIT_BAD_INPUT
    if args.engine == "temporal":
        from runtime.cli import temporal as temporal_command

        return temporal_command.run(args, out, err)
    from runtime.cli.temporal import local_engine_conflict

    if (conflict := local_engine_conflict(args)) is not None:
        print(f"foldline: {conflict}", file=err)
        return EXIT_BAD_INPUT
    if args.store:
        from runtime.cli.store import run_run

        return run_run(args, out, err)  # the same tools, kept in the store for resume
    from runtime.config.loader import load_mcp_servers, load_scenario
    from runtime.scenarios.tools import run_tools

    try:
        tools = run_tools(args.scenario, args.tools)  # built-ins, read_image (next to the file), --tools
        servers = load_mcp_servers(args.scenario)  # [mcp]: started in the run, their tools checked at load there
        scenario = None if servers else load_scenario(args.scenario, tool_names=tools.names())
        registry = tools.registry(scenario) if scenario is not None else None
    except ConfigError as exc:
        label = "" if str(exc).startswith((args.scenario, "--tools")) else f"{args.scenario}: "
        print(f"foldline: {label}{exc}", file=err)
        return EXIT_BAD_INPUT
    from runtime.cli.run_extras import otlp_export, run_with_mcp
    from runtime.display.live import progress_view
    from runtime.report import format_report
    from runtime.scenarios.run import run_scenario

    try:
        with progress_view(err, quiet=args.quiet, plain=args.plain, plain_printer=progress_printer) as progress:
            with otlp_export(args.otlp, err) as attach:
                options = {
                    "provider_kind": args.provider,
                    "signals_path": args.signals,
                    "attach": attach,
                    "tune_gc": True,  # the process is the command's own
                }
                run = anyio.run(
                    lambda: (
                        run_scenario(scenario, progress=progress, registry=registry, **options)
                        if scenario is not None and registry is not None
                        else run_with_mcp(args.scenario, tools, servers, progress=progress, **options)
                    )
                )
    except ConfigError as exc:
        label = "" if str(exc).startswith(args.scenario) else f"{args.scenario}: "
        print(f"foldline: {label}{exc}", file=err)
        return EXIT_BAD_INPUT
    report = run.report
    from runtime.display.terminal import shown

    print(shown(format_report(report)), file=out)
    if args.report:
        from runtime.cli.outputs import write_output

        write_output("--report", args.report, json.dumps(report, indent=2, sort_keys=True) + "\n")
    return EXIT_OK if report["status"] == "ok" else EXIT_FAILED


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    args = _parser().parse_args(argv)
    configure_logging(level=args.log_level, fmt=args.log_format, stream=err)
    from runtime.cli.outputs import OutputNotWritten, output_path_problems

    for problem in output_path_problems(args):  # before anything runs, so nothing is sent
        print(f"foldline: {problem}", file=err)
        return EXIT_BAD_INPUT
    # Everything imported so far (the SDK, pydantic, ...) lives as long as the process:
    # move it out of the collector's view so allocation-heavy paths (the signal bus)
    # do not pay for scanning it again and again (measured: ~80k -> ~120k events/s).
    if gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
    try:
        if args.command == "run":
            return _cmd_run(args, out, err)
        if args.command == "worker":
            from runtime.cli import temporal as temporal_command

            return temporal_command.worker(args, out, err)
        if args.command == "attach":
            from runtime.cli import temporal as temporal_command

            return temporal_command.attach(args, out, err)
        if args.command == "sim":
            from runtime.cli.sim import run as run_sim

            return run_sim(args, out, err)
        if args.command == "bench":
            from runtime.cli.bench import run as run_bench

            return run_bench(args, out, err)
        if args.command == "report" or (args.command == "inspect" and args.html):
            from runtime.cli import report as display_commands

            run_display = display_commands.run_report if args.command == "report" else display_commands.run_inspect_html
            return run_display(args, out, err)
        if args.command in ("resume", "replay", "events", "inspect"):
            from runtime.cli import store as store_commands

            return getattr(store_commands, f"run_{args.command}")(args, out, err)
    except (FoldlineError, OutputNotWritten) as exc:
        print(f"foldline: {exc}", file=err)
        return EXIT_FAILED
    except KeyboardInterrupt:
        from runtime.cli.interrupt import EXIT_INTERRUPTED, interrupted_line

        print(interrupted_line(args), file=err)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (e.g. `foldline events ... | head`): stop quietly.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    raise AssertionError(f"unhandled command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
