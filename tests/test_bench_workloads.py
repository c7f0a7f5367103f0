"""The workloads: the committed files are the generator's output and have the shapes the issue asks for."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.bench import workload_files, workloads
from runtime.bench.reader import recalls_of
from runtime.bench.tools import BENCH_TOOLS
from runtime.measuring.tokenizer import count_tokens

BENCH_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "bench"


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_the_committed_file_is_the_generators_full_rendering(name: str) -> None:
    path = BENCH_DIR / workload_files.file_name(name)
    assert path.read_text(encoding="utf-8") == workloads.render(name, workloads.FULL), (
        f"{path.name} differs from runtime/bench/workloads.py; regenerate with "
        "python -m runtime.bench.workload_files scenarios/bench"
    )
    scenario = workload_files.load(BENCH_DIR, name)
    assert scenario.name == name and scenario.provider.kind == "simulated"


def test_only_registered_tools_are_named() -> None:
    for name in workloads.WORKLOADS:
        for sizes in (workloads.FULL, workloads.SMALL):
            scenario = workloads.build(name, sizes)
            for profile in scenario.profiles.values():
                assert set(profile.tools) <= BENCH_TOOLS.names()


def _calls(name: str, node: str = "") -> list:
    scenario = workloads.build(name)
    spec = scenario.node(node) if node else scenario.nodes[0]
    return [call for step in spec.script for call in step.tool_calls]


def test_fits_has_about_20k_tokens_of_system_and_2k_per_round_for_50_rounds() -> None:
    scenario = workloads.build("fits")
    (worker,) = scenario.nodes
    assert len(worker.script) == 50
    stable = count_tokens(scenario.profiles["default"].system) + sum(
        count_tokens(spec.piece()) for spec in BENCH_TOOLS.specs(scenario.profiles["default"].tools)
    )
    assert 18_000 <= stable <= 22_000
    reads = [c.arguments["size"] for c in _calls("fits") if c.name == "read_doc"]
    assert len(reads) == 49 and all(6_500 <= size <= 7_600 for size in reads)  # about 2k tokens each


@pytest.mark.parametrize(("name", "reads", "ceiling"), [("reading-20k", 40, 20_000), ("reading-40k", 24, 40_000)])
def test_the_reading_workloads_read_enough_mixed_documents_under_their_ceiling(
    name: str, reads: int, ceiling: int
) -> None:
    scenario = workloads.build(name)
    sizes = [c.arguments["size"] for c in _calls(name) if c.name == "read_doc"]
    assert len(sizes) >= reads
    assert min(sizes) >= 2_000 and max(sizes) <= 30_000 and max(sizes) - min(sizes) > 15_000
    assert scenario.profiles["default"].max_input_tokens == ceiling
    probes = [fact for step in scenario.nodes[0].script for fact, kind in recalls_of(step) if kind == "probe"]
    assert len(probes) >= reads // 4


def test_staged_64_chains_64_stages_by_their_keys_under_100k() -> None:
    scenario = workloads.build("staged-64")
    stages = [c for c in _calls("staged-64") if c.name == "stage"]
    assert [c.arguments["n"] for c in stages] == list(range(1, 65))
    assert all(c.arguments["key"] == {"recall": f"S{c.arguments['n'] - 1}"} for c in stages[1:])
    assert scenario.profiles["default"].max_input_tokens == 100_000
    assert sum(c.arguments["size"] for c in stages) > 2 * 4 * 100_000  # over two ceilings of bulk, at ~4 chars a token


def test_fanout_spawns_8_children_some_iterative_some_bounded_below_the_lead() -> None:
    scenario = workloads.build("fanout")
    children = scenario.children_of("lead")
    assert len(children) == 8
    iterative = [c for c in children if c.operation == "iterative"]
    bounded = [c for c in children if c.operation == "bounded"]
    assert len(iterative) == 5 and len(bounded) == 3
    lead_chars = sum(c.arguments["size"] for c in _calls("fanout", "lead") if c.name == "read_doc")
    lead_tokens = lead_chars // 4
    assert all(c.inherit == "view" for c in children)
    assert scenario.profiles["child"].max_input_tokens < lead_tokens
    assert all(isinstance(c.max_input_tokens, int) and c.max_input_tokens < lead_tokens for c in bounded)


def test_rendering_is_deterministic_and_unknown_workloads_are_refused() -> None:
    assert workloads.render("staged-64", workloads.SMALL) == workloads.render("staged-64", workloads.SMALL)
    with pytest.raises(ValueError, match="workload 'stage-64' is not one of fits, reading-20k"):
        workloads.render("stage-64")


def test_write_all_writes_every_file(tmp_path: Path) -> None:
    written = workload_files.write_all(tmp_path, workloads.SMALL)
    assert sorted(p.name for p in written) == sorted(workload_files.file_name(n) for n in workloads.WORKLOADS)
    assert workload_files.load(tmp_path, "fanout").node("lead").script
