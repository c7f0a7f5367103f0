"""``foldline bench``: every workload under every strategy, one table.

- ``foldline bench [--json FILE]``: runs the built-in workloads (rendered in
  memory by :mod:`runtime.bench.workloads`, so the command runs wherever
  foldline is installed) under each strategy in one process against the
  simulated Anthropic server, prints the table, the peer compaction
  sensitivity table and the targets, and writes the same figures as JSON.
- ``--workload FILE`` (repeatable): run that scenario file under every
  strategy instead (with ``--workloads`` too: both).
- ``--model MODEL``: run and price on another model (default
  :data:`runtime.bench.workloads.MODEL`); the model needs every price in the
  pricing table, output included.
- ``foldline bench --micro [--json FILE]``: the micro figures instead.

The command line wires this module in with :func:`add_arguments` and
:func:`run`. Exit status: 0 when the benchmark ran (a missed target is a
finding, not an error), 2 on bad input (an unknown workload or strategy, a
missing or invalid workload file).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from runtime.bench.names import MODEL, STRATEGY_NAMES, WORKLOAD_NAMES
from runtime.errors import ConfigError

if TYPE_CHECKING:
    from runtime.bench.harness import WorkloadResult
    from runtime.bench.micro import Figure
    from runtime.config import Scenario

# The workloads, the harness and the micro figures import the whole runtime (and
# the harness the provider factory): they are imported when a benchmark runs, so
# that ``foldline --help`` and argument errors answer at once.

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``foldline bench``'s options to its subcommand parser."""
    parser.add_argument("--micro", action="store_true", help="print the micro benchmarks instead of the table")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--wide", action="store_true", help="every column of the table (by default it fits 100 columns)"
    )
    parser.add_argument(
        "--scaling",
        dest="scaling_only",
        action="store_true",
        help="with --micro: only the scaling table (each cost at several sizes, against its target)",
    )
    parser.add_argument("--no-scaling", action="store_true", help="with --micro: leave the scaling table out")
    parser.add_argument(
        "--workloads",
        metavar="NAMES",
        help=f"comma-separated workloads to run (default: all of {', '.join(WORKLOAD_NAMES)})",
    )
    parser.add_argument(
        "--strategies",
        metavar="NAMES",
        help=f"comma-separated strategies (default: all of {', '.join(STRATEGY_NAMES)}); naive always runs, "
        "it is the lower bound's request sequence",
    )
    parser.add_argument(
        "--dir",
        metavar="DIRECTORY",
        help="load the built-in workloads from their files in DIRECTORY instead of rendering them in memory",
    )
    parser.add_argument(
        "--workload",
        metavar="FILE",
        action="append",
        help="a workload scenario file to run under every strategy (repeatable)",
    )
    parser.add_argument(
        "--model",
        metavar="MODEL",
        help=f"the model to run and price on (default: {MODEL} for the built-in workloads, the "
        "file's own for --workload); it needs every price in the pricing table, output included",
    )
    parser.add_argument(
        "--provider",
        choices=("simulated", "scripted", "openai"),
        default="simulated",
        help="the simulated server over HTTP through the SDK (default), the same server in process, or its "
        "chat-completions face through the openai SDK (automatic prefix caching, no marks)",
    )
    parser.add_argument(
        "--small",
        action="store_true",
        help="run the small versions of the workloads (built in memory) instead of the files",
    )


def _names(value: str | None) -> list[str] | None:
    if value is None:
        return None
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        raise ConfigError(f"{value!r} names nothing; give comma-separated names")
    return names


def workload_directory(given: str) -> Path:
    """The directory ``--dir`` names; ConfigError when it is not one."""
    directory = Path(given)
    if not directory.is_dir():
        raise ConfigError(f"--dir: {given} is not a directory")
    return directory


def _workload_file(given: str) -> Scenario:

    path = Path(given)
    if not path.is_file():
        raise ConfigError(f"--workload: {given} is not a file")
    from runtime.bench.workload_files import load_file

    return load_file(path)


def _scenarios(args: argparse.Namespace) -> list[Scenario]:
    from runtime.bench import workloads
    from runtime.bench.harness import priced_model, with_model

    files = list(getattr(args, "workload", None) or [])
    named = _names(args.workloads)
    names = named if named is not None else ([] if files else list(workloads.WORKLOADS))
    unknown = [n for n in names if n not in workloads.WORKLOADS]
    if unknown:
        raise ConfigError(f"--workloads: {unknown[0]!r} is not one of {', '.join(workloads.WORKLOADS)}")
    if args.small:
        scenarios = [workloads.build(name, workloads.SMALL) for name in names]
    elif args.dir is not None:
        directory = workload_directory(args.dir)
        from runtime.bench.workload_files import load

        scenarios = [load(directory, name) for name in names]
    else:
        scenarios = [workloads.build(name) for name in names]
    built_in = len(scenarios)
    scenarios.extend(_workload_file(given) for given in files)
    model = getattr(args, "model", None)
    out = []
    for i, scenario in enumerate(scenarios):
        if model is not None:
            scenario = with_model(scenario, model)
        try:
            priced_model(scenario.prices(), scenario.provider.model)
        except ConfigError as exc:
            where = f"workload {scenario.name!r}" + ("" if i < built_in else " (from --workload)")
            raise ConfigError(f"{where}: {exc}") from None
        out.append(scenario)
    return out


def pricing_note(scenarios: Sequence[Scenario]) -> str:
    """Where the prices of the scenarios' models come from (the pricing table's source and read_on)."""
    notes = []
    for scenario in {s.provider.model: s for s in scenarios}.values():
        model = scenario.provider.model
        entry = scenario.prices().entry(model)
        if entry is not None:
            notes.append(f"{model}: {entry.source} (read on {entry.read_on.isoformat()})")
    return "; ".join(notes)


def _run_table(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import anyio

    from runtime.bench.harness import run_workload_set, strategies_named
    from runtime.bench.table import bench_json, format_table

    try:
        strategies = strategies_named(_names(args.strategies))
        scenarios = _scenarios(args)
    except ConfigError as exc:
        print(f"foldline bench: {exc}", file=err)
        return EXIT_BAD_INPUT

    def progress(line: str) -> None:
        print(f"[bench] {line}", file=err, flush=True)

    async def main() -> list[WorkloadResult]:
        results = []
        for scenario in scenarios:
            results.append(await run_workload_set(scenario, strategies, provider_kind=args.provider, progress=progress))
        return results

    started = time.perf_counter()
    results = anyio.run(main)
    wall_s = time.perf_counter() - started
    print(format_table(results, wall_s=wall_s, wide=args.wide), file=out)
    if args.json:
        model = scenarios[0].provider.model if scenarios else MODEL
        document = bench_json(
            results,
            provider=args.provider,
            model=model,
            wall_s=wall_s,
            sizes="small" if args.small else "full",
            pricing_note=pricing_note(scenarios),
        )
        Path(args.json).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return EXIT_OK


def _run_micro(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    import anyio

    from runtime.bench.micro import run_micro
    from runtime.bench.scaling import Row, run_scaling

    def progress(figure: Figure) -> None:
        print(figure.line(), file=out, flush=True)

    def row_done(row: Row) -> None:
        print(row.line(), file=out, flush=True)

    started = time.perf_counter()
    figures: list[Figure] = []
    rows: list[Row] = []
    if not args.scaling_only:
        figures = anyio.run(run_micro, progress)
    if not args.no_scaling:
        # What the micro figures left in module memos lives on: keep the collector off it, as the CLI
        # does for what it imported, so the table's allocation-heavy rows are not charged for it.
        gc.collect()
        gc.freeze()
        print("scaling (CPU time, medians):", file=out, flush=True)
        rows = anyio.run(run_scaling, row_done)
    wall_s = time.perf_counter() - started
    print(f"wall time: {wall_s:.1f} s", file=out)
    if rows:
        missed = [row.name for row in rows if row.met is False]
        print(
            f"scaling targets: {sum(1 for row in rows if row.met)} met, {len(missed)} missed"
            + (f" ({'; '.join(missed)})" if missed else ""),
            file=out,
        )
    if args.json:
        document = {
            "schema": "foldline.bench.micro/v1",
            "wall_s": round(wall_s, 3),
            "figures": [f.to_json() for f in figures],
            "scaling": [row.to_json() for row in rows],
        }
        Path(args.json).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return EXIT_OK


_TABLE_ONLY: tuple[tuple[str, str], ...] = (
    ("workloads", "--workloads"),
    ("strategies", "--strategies"),
    ("dir", "--dir"),
    ("workload", "--workload"),
    ("model", "--model"),
    ("small", "--small"),
)
_MICRO_ONLY = (("scaling_only", "--scaling"), ("no_scaling", "--no-scaling"))


def _mode_conflict(args: argparse.Namespace) -> str | None:
    """An option of the table given with --micro, or one of --micro given without it (it would be ignored)."""
    named = _TABLE_ONLY if args.micro else _MICRO_ONLY
    given = [flag for attribute, flag in named if getattr(args, attribute, None)]
    if args.micro and args.provider != "simulated":
        given.append("--provider")
    if not given:
        return None
    return f"{given[0]}: only with --micro" if not args.micro else f"{given[0]}: not with --micro (the table's option)"


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``foldline bench`` with parsed ``args``; the table goes to ``out``, progress to ``err``."""
    if conflict := _mode_conflict(args):
        print(f"foldline bench: {conflict}", file=err)
        return EXIT_BAD_INPUT
    if args.micro:
        return _run_micro(args, out, err)
    return _run_table(args, out, err)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m runtime.cli.bench``: the same command without the foldline CLI around it."""
    import sys

    from runtime.logs import configure_logging

    configure_logging(level="warning", stream=sys.stderr)
    parser = argparse.ArgumentParser(prog="foldline bench", description="Run the foldline benchmark.")
    add_arguments(parser)
    return run(parser.parse_args(argv), sys.stdout, sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
