"""``foldline bench`` wherever foldline is installed: built-in workloads, ``--workload FILE``, ``--model``."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from runtime.bench import workloads
from runtime.bench.strategies import STRATEGIES
from runtime.cli import bench as command


def run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="foldline bench")
    command.add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    code = command.run(parser.parse_args(list(argv)), out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_built_in_workloads_run_from_a_directory_without_scenario_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no scenarios/bench here; the workloads are rendered in memory
    target = tmp_path / "b.json"
    code, out, err = run(
        "--provider", "scripted", "--workloads", "reading-20k", "--strategies", "naive", "--json", str(target)
    )
    assert code == 0, err
    assert "== reading-20k: lower bound" in out and "peer compaction (replayed" in out
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["model"] == workloads.MODEL == "claude-opus-5"
    assert "platform.claude.com/docs/en/about-claude/pricing" in document["pricing"]
    (workload,) = document["workloads"]
    naive = workload["runs"]["naive"]
    assert naive["cost"]["output_priced"] is True and naive["cost"]["usd"] > 0
    variants = workload["peer_compaction"]["variants"]
    assert [v["variant"] for v in variants] == ["hit/1k", "hit/4k", "hit/16k", "miss/1k", "miss/4k", "miss/16k"]


def test_workload_files_run_under_every_strategy_and_repeat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "mine.toml"
    first.write_text(workloads.render("fits", workloads.SMALL).replace('name = "fits"', 'name = "mine"'))
    second = tmp_path / "theirs.toml"
    second.write_text(
        workloads.render("staged-curl", workloads.SMALL).replace('name = "staged-curl"', 'name = "theirs"')
    )
    target = tmp_path / "b.json"
    code, out, err = run(
        "--provider", "scripted", "--workload", str(first), "--workload", str(second), "--json", str(target)
    )
    assert code == 0, err
    assert "== mine: lower bound" in out and "== theirs: lower bound" in out and "== fits" not in out
    document = json.loads(target.read_text(encoding="utf-8"))
    for w in document["workloads"]:
        assert set(w["runs"]) | set(w["not_run"]) == set(STRATEGIES)


def test_model_picks_another_priced_model(tmp_path: Path) -> None:
    target = tmp_path / "b.json"
    code, _, err = run(
        "--small",
        "--provider",
        "scripted",
        "--workloads",
        "fits",
        "--strategies",
        "naive",
        "--model",
        "claude-sonnet-4-5",
        "--json",
        str(target),
    )
    assert code == 0, err
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["model"] == "claude-sonnet-4-5" and "Sonnet 4.5" in document["pricing"]
    cost = document["workloads"][0]["runs"]["naive"]["cost"]
    assert cost["output_priced"] and cost["usd"] == pytest.approx(cost["bit"] * 3 / 1_000_000, rel=1e-6)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--small", "--model", "nope"), "'nope' is not in the pricing table"),
        (("--workload", "no/such.toml"), "--workload: no/such.toml is not a file"),
    ],
)
def test_bad_models_and_files_exit_2_naming_them(argv: tuple[str, ...], message: str) -> None:
    code, out, err = run(*argv)
    assert code == 2 and out == "" and message in err


# A workload's own [pricing] entry that knows no output price (the bench needs every price).
NO_OUTPUT = """
[pricing.models.claude-opus-4-7]
source = "a test's own figures"
read_on = 2026-12-04
[[pricing.models.claude-opus-4-7.tiers]]
input = 5.0
cache_read = 0.5
cache_write_5m = 6.25
"""


def test_a_workload_file_on_an_unpriced_model_is_refused_unless_a_model_is_given(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text(workloads.render("fits", workloads.SMALL).replace(workloads.MODEL, "claude-opus-4-7") + NO_OUTPUT)
    code, _, err = run("--provider", "scripted", "--workload", str(path))
    assert code == 2 and "workload 'fits' (from --workload): --model: 'claude-opus-4-7' has no output price" in err
    code, out, err = run(
        "--provider", "scripted", "--workload", str(path), "--strategies", "naive", "--model", "claude-opus-5"
    )
    assert code == 0, err
    assert "== fits" in out
