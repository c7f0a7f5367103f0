"""``foldline bench``: the command's options, its output, its JSON, its refusals; the micro figures."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import anyio
import pytest

from runtime.bench import micro, workload_files, workloads
from runtime.bench.strategies import STRATEGIES
from runtime.cli import bench as command


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="foldline bench")
    command.add_arguments(parser)
    return parser.parse_args(list(argv))


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = command.run(parse(*argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_small_bench_prints_the_table_and_writes_the_same_figures_as_json(tmp_path: Path) -> None:
    target = tmp_path / "b.json"
    code, out, err = run("--small", "--provider", "scripted", "--workloads", "fits,staged-64", "--json", str(target))
    assert code == 0
    assert "== fits: lower bound" in out and "== staged-64: lower bound" in out and "== reading-20k" not in out
    assert "targets:" in out and "wall time:" in out
    assert "[bench] fits: naive done" in err
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["sizes"] == "small" and document["provider"] == "scripted"
    assert [w["workload"] for w in document["workloads"]] == ["fits", "staged-64"]
    for w in document["workloads"]:
        assert set(w["runs"]) | set(w["not_run"]) == set(STRATEGIES)
        assert w["floor"]["bit"] > 0 and w["runs"]["foldline"]["cost"]["floor_ratio"] > 0
        naive = w["runs"]["naive"]
        assert f"{naive['cost']['bit']:,.0f}" in out


def test_the_workload_files_are_found_and_run_from_a_directory(tmp_path: Path) -> None:
    workload_files.write_all(tmp_path, workloads.SMALL)
    code, out, _ = run(
        "--dir",
        str(tmp_path),
        "--provider",
        "scripted",
        "--workloads",
        "reading-40k",
        "--strategies",
        "naive,cache-only",
    )
    assert code == 0 and "== reading-40k" in out
    table = out.split("\nstrategy ", 1)[1].split("\n\n", 1)[0]  # the table's rows, up to the notes under it
    rows = [line.split()[0] for line in table.splitlines()[1:] if not line.startswith(" ")]
    assert {"naive", "cache-only"} <= set(rows) and "foldline" not in rows
    assert "foldline on reading-40k did not run: not selected" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--small", "--workloads", "fits,nope"), "--workloads: 'nope' is not one of fits"),
        (("--small", "--strategies", "naive,fold"), "unknown strategy 'fold'"),
        (("--small", "--workloads", " , "), "names nothing"),
        (("--dir", "no/such/dir"), "--dir: no/such/dir is not a directory"),
    ],
)
def test_bad_input_exits_2_naming_what_was_wrong(argv: tuple[str, ...], message: str) -> None:
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.startswith("foldline bench: ") and message in err


def test_a_broken_workload_file_is_refused_naming_the_file_and_key(tmp_path: Path) -> None:
    workload_files.write_all(tmp_path, workloads.SMALL)
    path = tmp_path / "fits.toml"
    path.write_text(path.read_text(encoding="utf-8").replace('tools = ["read_doc", "answer"]', 'tools = ["read_dog"]'))
    code, _, err = run("--dir", str(tmp_path), "--workloads", "fits")
    assert code == 2 and 'fits.toml: profiles.default.tools[0]: "read_dog" is not a known tool' in err


def test_the_micro_figures_measure_what_they_name() -> None:
    clone = anyio.run(micro.clone_figure, 300, 3)
    assert clone.measured and len(clone.samples) == 3 and "300-message branch" in clone.name
    compiled = micro.compile_measure_figure(tokens=6_000, runs=2)
    assert compiled.measured and "6k-token conversation" in compiled.name
    bus = anyio.run(micro.bus_figure, 2, 500, 2)
    assert bus.unit == "events/s" and all(rate > 0 for rate in bus.samples)
    imported = micro.import_figure("runtime.bench.facts", runs=1)
    assert imported.measured and imported.samples[0] > 0
    fold = micro.fold_figure(runs=1)
    assert fold.measured or fold.note.startswith("not built yet")
    line = clone.line()
    assert line.startswith("clone of a 300-message branch: median ") and "3 runs" in line
    assert micro.Figure("x", "ms", note="not built yet").to_json() == {
        "name": "x",
        "unit": "ms",
        "measured": False,
        "note": "not built yet",
    }


def test_a_failing_import_is_reported_not_timed() -> None:
    with pytest.raises(RuntimeError, match="importing runtime.no_such_module failed"):
        micro.import_figure("runtime.no_such_module", runs=1)


def test_the_light_name_lists_match_the_workloads_and_strategies() -> None:
    from runtime.bench.names import STRATEGY_NAMES, WORKLOAD_NAMES
    from runtime.bench.strategies import STRATEGIES
    from runtime.bench.workloads import WORKLOADS

    assert WORKLOAD_NAMES == tuple(WORKLOADS)
    assert STRATEGY_NAMES == tuple(STRATEGIES)
