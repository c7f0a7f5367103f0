"""The scaling table's rows: what each measures, its target and its verdict (small sizes here)."""

from __future__ import annotations

import anyio

from runtime.bench import scaling


def test_a_row_judges_its_median_against_its_target() -> None:
    row = scaling.Row("x", "ms", (1.0, 3.0, 2.0), 2.5)
    assert row.median == 2.0 and row.met is True
    assert scaling.Row("x", "ms", (3.0,), 2.5).met is False
    rate = scaling.Row("bus", "events/s", (150.0, 250.0, 210.0), 200.0, at_most=False)
    assert rate.met is True and "target >= 200" in rate.line()
    unset = scaling.Row("clone", "ms", (0.5,), None)
    assert unset.met is None and unset.line().startswith("[reported]")
    assert unset.to_json()["target"] == "no target set" and unset.to_json()["met"] is None
    assert scaling.Row("x", "ms", (3.0,), 2.5).to_json() | {"note": ""} == {
        "name": "x",
        "unit": "ms",
        "median": 3.0,
        "min": 3.0,
        "max": 3.0,
        "runs": 1,
        "target": "<= 2.50 ms",
        "met": False,
        "note": "",
    }


def test_the_one_turn_row_measures_a_conversation_of_the_size_it_names() -> None:
    row = scaling.after_one_turn(6_000, 2.0, runs=2)
    assert len(row.samples) == 2 and all(s > 0 for s in row.samples)
    assert "6k tokens" in row.name and "messages" in row.note


def test_the_scratch_fold_clone_and_bus_rows_run() -> None:
    assert len(scaling.from_scratch(tokens=4_000, runs=2).samples) == 2
    fold = scaling.fold(10_000, 25.0, runs=1)
    assert fold.name == "one tool_io fold at 10k tokens"
    clone = anyio.run(scaling.clone, 200, None, 2)
    assert clone.met is None and "200-message" in clone.name
    bus = anyio.run(scaling.bus, 2, 1.0, 300, 2)
    assert bus.unit == "events/s" and bus.met is True


def test_the_start_up_rows_run_the_commands_they_name(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('schema = "foldline.scenario/v1"\n', encoding="utf-8")
    assert scaling.cli("help", ["--help"], 0, 300.0, runs=1).samples[0] > 0
    assert scaling.cli("bad", ["run", str(bad)], 2, 300.0, runs=1).samples[0] > 0
    load = scaling.in_child(
        "tokenizer load", "tokenizer.encoding()", 100.0, runs=1, prelude="from runtime.measuring import tokenizer\n"
    )
    assert load.samples[0] > 0


def test_a_child_row_runs_with_the_environment_it_is_given() -> None:
    # The "rank cache off" row really turns the cache off in the child (the probe fails otherwise).
    row = scaling.in_child(
        "cache off",
        "assert tokenizer.ranks_cache_path() is None, tokenizer.ranks_cache_path()",
        None,
        runs=1,
        prelude="from runtime.measuring import tokenizer\n",
        env={"FOLDLINE_CACHE_DIR": ""},
        note="the rank file parsed",
    )
    assert row.met is None and row.note == "in a fresh interpreter; the rank file parsed"
