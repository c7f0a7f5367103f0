"""The workloads as files: their names, loading them (the bench tools are known), writing them all.

``python -m runtime.bench.workload_files DIRECTORY`` writes every workload's
file (``scenarios/bench`` holds the full renderings; a test checks they are
the generators' output).
"""

from __future__ import annotations

from pathlib import Path

from runtime.bench.tools import BENCH_TOOLS
from runtime.bench.workloads import FULL, WORKLOADS, Sizes, render
from runtime.config import Scenario
from runtime.config.loader import load_scenario


def file_name(name: str) -> str:
    return f"{name}.toml"


def load(directory: str | Path, name: str) -> Scenario:
    """Load workload ``name`` from its file in ``directory`` (the bench tools are known)."""
    return load_file(Path(directory) / file_name(name))


def load_file(path: str | Path) -> Scenario:
    """Load any workload scenario file (the bench tools are known); the loader's errors name the file."""
    return load_scenario(Path(path), tool_names=BENCH_TOOLS.names())


def write_all(directory: str | Path, sizes: Sizes = FULL) -> list[Path]:
    """Write every workload's file into ``directory``; returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for name in WORKLOADS:
        (out / file_name(name)).write_text(render(name, sizes), encoding="utf-8")
    return [out / file_name(name) for name in WORKLOADS]


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        print("usage: python -m runtime.bench.workload_files DIRECTORY", file=sys.stderr)
        sys.exit(2)
    for written_path in write_all(sys.argv[1]):
        print(written_path)
