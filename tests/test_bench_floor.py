"""The floor of a lossless policy (runtime/bench/floor.py): its arithmetic, its invariants, and a real run."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.bench import workloads
from runtime.bench.floor import FloorRequest, lossless_floor
from runtime.bench.harness import run_workload_set, strategies_named
from runtime.bench.reader import recalls_of
from runtime.bench.table import bench_json, evaluate_targets, format_table


def test_each_part_is_priced_as_the_derivation_says() -> None:
    requests = [
        FloorRequest("a", total_tokens=100, head_tokens=100, written=100),
        FloorRequest("a", total_tokens=300, head_tokens=100, written=200, shown={"F1": 10, "F2": 7}),
        FloorRequest("a", total_tokens=500, head_tokens=100, written=200, recalled=("F1",)),
        FloorRequest("a", total_tokens=600, head_tokens=100, written=100, recalled=("F1",)),
    ]
    floor = lossless_floor(requests, output_tokens=40, output_ratio=5.0)
    # F1 is needed again twice: written once, read twice; F2 never again: fresh.
    assert (floor.first_written_tokens, floor.first_read_tokens) == (100, 0)
    assert floor.head_read_tokens == 3 * 100
    assert floor.needed_written_tokens == 10 and floor.needed_read_tokens == 2 * 10 and floor.needed_lines == 1
    assert floor.fresh_tokens == (200 - 10) + 200 + 100
    expected = 1.25 * (100 + 10) + 0.1 * (300 + 20) + 1.0 * 490 + 5.0 * 40
    assert floor.bit == pytest.approx(expected)
    unpriced = lossless_floor(requests, output_tokens=40, output_ratio=None)
    assert unpriced.bit == pytest.approx(expected - 200) and not unpriced.output_priced


def test_a_line_used_where_it_is_shown_is_not_needed_again() -> None:
    requests = [
        FloorRequest("a", 50, 50, 50),
        FloorRequest("a", 150, 50, 100, shown={"K1": 12}, recalled=("K1",)),
    ]
    floor = lossless_floor(requests, output_tokens=0, output_ratio=5.0)
    assert floor.needed_lines == floor.needed_written_tokens == floor.needed_read_tokens == 0
    assert floor.fresh_tokens == 100


def test_a_child_reads_what_its_emitter_wrote_and_lines_it_inherits() -> None:
    requests = [
        FloorRequest("lead", 100, 100, 100),
        FloorRequest("lead", 400, 100, 300, shown={"F1": 10}),
        # the child's first request inherits the lead's 400 tokens (written by the lead) plus 30 of its own:
        # it reads its 100-token head, writes its own 30, and needs none of the rest shown again
        FloorRequest("child", 430, 100, 30, shown={"F1": 10}),
        FloorRequest("child", 530, 100, 100, recalled=("F1",)),
    ]
    floor = lossless_floor(requests, output_tokens=0, output_ratio=5.0)
    assert (floor.first_written_tokens, floor.first_read_tokens) == (100 + 30, 100)
    assert floor.needed_read_tokens == 10 and floor.needed_written_tokens == 0
    assert floor.fresh_tokens == 300 + 100


def test_bad_inputs_are_refused_with_where() -> None:
    with pytest.raises(ValueError, match=r"output_tokens: -1 is not a non-negative integer"):
        lossless_floor([], output_tokens=-1, output_ratio=None)
    with pytest.raises(ValueError, match=r"requests\[0\]\.total_tokens: -5"):
        lossless_floor([FloorRequest("a", -5, 0, 0)], output_tokens=0, output_ratio=None)


@st.composite
def _sequences(draw: st.DrawFn) -> list[FloorRequest]:
    head = draw(st.integers(1, 500))
    count = draw(st.integers(1, 12))
    requests = [FloorRequest("n", head, head, head)]
    total = head
    shown_ids: list[str] = []
    for i in range(1, count):
        new = draw(st.integers(20, 800))
        total += new
        shown = {f"F{i}": draw(st.integers(1, 20))} if draw(st.booleans()) else {}
        recalled = tuple(draw(st.lists(st.sampled_from(shown_ids), max_size=3, unique=True))) if shown_ids else ()
        shown_ids.extend(shown)
        requests.append(FloorRequest("n", total, head, new, shown, recalled))
    return requests


def _bound_bit(requests: list[FloorRequest]) -> float:
    """What the lower bound charges an append-only sequence: every new token written, every carried one read."""
    carried = sum(r.total_tokens for r in requests[:-1])
    return 1.25 * requests[-1].total_tokens + 0.1 * carried


@settings(max_examples=200, deadline=None)
@given(_sequences())
def test_the_floor_is_at_most_the_bound_and_recalls_only_raise_it(requests: list[FloorRequest]) -> None:
    floor = lossless_floor(requests, output_tokens=0, output_ratio=5.0)
    assert floor.bit <= _bound_bit(requests) + 1e-6
    without = lossless_floor(
        [r.__class__(r.node, r.total_tokens, r.head_tokens, r.written, r.shown) for r in requests],
        output_tokens=0,
        output_ratio=5.0,
    )
    assert without.bit <= floor.bit + 1e-9
    # every new token is priced exactly once, fresh or written
    new = requests[-1].total_tokens - requests[0].total_tokens
    assert floor.fresh_tokens + floor.needed_written_tokens == new


@pytest.mark.anyio
async def test_a_real_run_has_a_floor_from_its_own_recalls_in_the_table_and_json() -> None:
    scenario = workloads.build("reading-20k", workloads.SMALL)
    result = await run_workload_set(scenario, strategies_named(["naive", "foldline"]), provider_kind="scripted")
    floor = result.floor
    assert floor is not None and floor.requests == result.runs["naive"].requests
    (node,) = scenario.nodes
    # the lines needed again are the probed facts shown before the step that recalls them
    probed = {fact for i, step in enumerate(node.script) for fact, kind in recalls_of(step) if kind == "probe"}
    assert floor.needed_lines == len(probed) > 0
    assert 0 < floor.bit < result.bound.bit
    document = json.loads(json.dumps(bench_json([result], provider="scripted", model="m", wall_s=0, sizes="small")))
    (entry,) = document["workloads"]
    assert entry["floor"]["bit"] == pytest.approx(floor.bit, abs=0.001)
    assert entry["floor"]["needed_lines"] == floor.needed_lines
    for name, run in entry["runs"].items():
        assert run["cost"]["floor_ratio"] == pytest.approx(result.runs[name].cost_bit / floor.bit, abs=1e-4)
    assert "floor of a lossless policy" in format_table([result])
    (target,) = [t for t in evaluate_targets([result]) if "x the floor" in t.name]
    assert target.detail.startswith(f"{result.runs['foldline'].cost_bit / floor.bit:.2f} x floor")
