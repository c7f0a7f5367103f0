"""A child folds the round its emitter carried fresh to fold next (actors.inherit_fold, issue 31 item 6).

Under fold after read the emitter's request carrying its newest round places no
cache mark after it; when the reply spawns a child, the child inherits that round
uncached. The child folds it before its first request, as the emitter's next
request would, and reads the rest of its first request from the emitter's cache.

The runs use the scripted provider (the simulator's cache engine and counts) with a
store, so the same run is replayed and resumed. Async tests run on asyncio and trio
(the ``anyio_backend`` fixture); the Temporal engine's test runs on asyncio only, as Temporal does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_caching_send import strip
from test_resume import cut_stored_run, load, stored_run
from test_temporal import _assert_same_contract, _local_report, _run, needs_server, server  # noqa: F401

from actors.branch import Branch
from actors.context_state import ContextState
from actors.inherit_fold import pending_inherited
from actors.record import Record
from runtime.fold.recovery import verify_note
from runtime.store.codec import decode_value, encode_value
from runtime.store.reader import StoreReader
from runtime.store.replay import Replayed, replay_all
from runtime.store.run import resume_stored_run, run_scenario_stored
from runtime.temporal.seed import branch_from_seed, seed_of
from runtime.values.messages import Instruction, Note, ToolResult
from signals.sinks import read_jsonl

# An agent's system text is long (its rules and tool guidance); the emitter's cached prefix is mostly that,
# as on the bench's emitter workload.
RULES = " ".join(f"Rule {i}: read each document once, cite it by path, and keep its key line." for i in range(120))

SCENARIO = f"""
schema = "foldline.scenario/v1"
name = "checker"
[provider]
kind = "scripted"
model = "claude-haiku-5-5"
[profiles.default]
system = "You read the documents one at a time, then hand the checking to children. {RULES}"
tools = ["synthetic_read", "spawn"]
max_input_tokens = 60000
context_management = true
prompt_caching = true
fold_tail = "after-read"
[profiles.checker]
system = "You check a reading. Answer in one paragraph."
tools = ["synthetic_read"]
prompt_caching = true
[[nodes]]
id = "emitter"
max_rounds = 12
instruction = "Read the four documents, then spawn the checker."
script = [
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "a0.md", size = 9000 }} }}] }},
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "a1.md", size = 6000 }} }}] }},
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "a2.md", size = 6000 }} }}] }},
  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "a3.md", size = 12000 }} }}] }},
  {{ tool_calls = [{{ name = "spawn", arguments = {{ node = "checker" }} }}] }},
  {{ text = "Spawned the checker." }},
]
[[nodes]]
id = "checker"
spawned_by = "emitter"
inherit = "view"
profile = "checker"
operation = "bounded"
instruction = "In one answer, say whether the reading is complete."
script = [{{ text = "The reading is complete." }}]
"""

OWN = SCENARIO.replace("[profiles.checker]\n", '[profiles.checker]\ninherited_setup = "own"\n')


def scenario_at(tmp_path: Path, text: str = SCENARIO) -> Path:
    path = tmp_path / "checker.toml"
    path.write_text(text, encoding="utf-8")
    return path


async def run_stored(path: Path, store: Path) -> tuple[dict[str, Any], list[Any]]:
    events: list[Any] = []
    run = await run_scenario_stored(load(path), store_path=store, progress=events.append)
    return run.report, events


def of_node(events: list[Any], kind: str, node: str) -> list[dict[str, Any]]:
    return [e.data for e in events if getattr(e, "type", None) == kind and e.node_id == node]


@pytest.mark.anyio
async def test_a_bounded_checker_folds_the_round_its_emitter_read_fresh_and_reads_the_rest_from_its_cache(
    tmp_path: Path,
) -> None:
    report, events = await run_stored(scenario_at(tmp_path), tmp_path / "run.db")
    assert report["status"] == "ok", report["nodes"]
    checker = report["nodes"]["checker"]
    assert checker["first_request_cached_share"] >= 0.9, checker
    # The emitter's request carrying a3.md (the one whose reply spawned the checker) placed no mark after it.
    emitter_replies = of_node(events, "ResponseReceived", "emitter")
    assert emitter_replies[4]["cache"]["tail_skip"]["reason"] == "fold_next"
    # The checker folded that round before its first request, recorded as a fold.
    (commit,) = of_node(events, "FoldCommitted", "checker")
    assert list(commit["stages"]) == ["tool_io"] and commit["tokens_freed"] > 3_000  # a3.md: 12,000 characters
    (decision,) = of_node(events, "ContextDecision", "checker")
    assert decision["action"] == "fold" and list(decision["stages"]) == ["tool_io"] and decision["folded_ids"]
    assert decision["reason"].startswith("the inherited view folded as its emitter's next request would")
    assert decision["estimate_before"] == commit["estimate_before"]
    assert report["rewrites"]["unexplained"] == 0 and report["bytes_unrecoverable"] == 0
    # Lossless: the note names the a3.md round, whose originals stay in the checker's record, intact.
    with StoreReader(tmp_path / "run.db") as reader:
        branches = reader.restore_branches()
        (row,) = [r for r in reader.requests() if r.node_id == "checker"]
        emitter_branch = next(r.branch_id for r in reader.requests() if r.node_id == "emitter")
    branch = branches[row.branch_id]
    sent = [branch.message_at(branch.index_of(mid) or 0) for mid in row.view_ids]
    note = sent[-3]
    assert isinstance(note, Note) and "a3.md" in note.text
    verify_note(note, branch)
    folded = [branch.message_at(branch.index_of(mid) or 0) for mid in note.replaced]
    assert any(isinstance(m, ToolResult) and len(m.output) >= 12_000 for m in folded)
    assert isinstance(sent[-2], Instruction) and sent[-2].text.startswith("Your setup from here on")
    # The stored states: the emitter's last request carried the spawn's result fresh (pending), the checker's
    # request ended with its instruction (nothing pending).
    emitter = branches[emitter_branch]
    spawned = [m.id for m in emitter.view() if isinstance(m, ToolResult) and m.name == "spawn"]
    assert emitter.state.fold_next == frozenset(spawned) and len(spawned) == 1
    assert branch.state.fold_next == frozenset()


@pytest.mark.anyio
async def test_a_child_with_its_own_stable_segment_folds_nothing_it_inherited(tmp_path: Path) -> None:
    report, events = await run_stored(scenario_at(tmp_path, OWN), tmp_path / "own.db")
    assert report["status"] == "ok", report["nodes"]
    assert of_node(events, "FoldCommitted", "checker") == []
    assert report["nodes"]["checker"]["first_request_cached_share"] == 0.0


@pytest.mark.anyio
async def test_a_child_of_an_emitter_keeping_a_verbatim_tail_folds_nothing_and_reads_its_cache(tmp_path: Path) -> None:
    # Far under its fold line (a near line skips the turn mark for another reason, tail_skip's "line": not this case).
    verbatim = SCENARIO.replace('fold_tail = "after-read"', 'fold_tail = "verbatim"').replace("60000", "400000")
    report, events = await run_stored(scenario_at(tmp_path, verbatim), tmp_path / "verbatim.db")
    assert report["status"] == "ok", report["nodes"]
    assert not any(r["cache"].get("tail_skip") for r in of_node(events, "ResponseReceived", "emitter"))
    assert of_node(events, "FoldCommitted", "checker") == []  # the emitter marked its newest round: nothing pending
    assert report["nodes"]["checker"]["first_request_cached_share"] >= 0.9


def test_the_checkers_requests_replay_exactly(tmp_path: Path) -> None:
    anyio.run(run_stored, scenario_at(tmp_path), tmp_path / "r.db")
    with StoreReader(tmp_path / "r.db") as reader:
        results = replay_all(reader)
    assert results and all(isinstance(r, Replayed) for r in results), results


def _sent_bytes(store: Path) -> dict[str, list[Any]]:
    """Each node's sent requests as replayed from the store (each verified against the digest it was sent
    with), without their cache marks: a resumed ledger has no evidence, so a resumed request may mark
    elsewhere; what the model reads must be the same."""
    with StoreReader(store) as reader:
        results = replay_all(reader)
    out: dict[str, list[Any]] = {}
    for result in results:
        assert isinstance(result, Replayed), result
        if result.row.status == "sent" and result.row.node_id:
            out.setdefault(result.row.node_id, []).append(strip(result.request.payload()))
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("cut_at", [5, 6, 7])
async def test_a_run_cut_before_or_during_the_checkers_first_request_resumes_to_the_same_bytes(
    tmp_path: Path, cut_at: int
) -> None:
    path = scenario_at(tmp_path)
    await stored_run(path, tmp_path / "full.db")
    await cut_stored_run(path, tmp_path / "cut.db", cut_at=cut_at, reply="lost")
    await resume_stored_run(tmp_path / "cut.db")
    assert _sent_bytes(tmp_path / "cut.db") == _sent_bytes(tmp_path / "full.db")


def record_of(messages: list[ToolResult]) -> Record:
    record = Record()
    for message in messages:
        record.append(message)
    return record


@given(upto=st.integers(min_value=0, max_value=6), fresh=st.sets(st.integers(min_value=0, max_value=5)))
def test_a_clone_keeps_the_pending_fold_of_the_results_it_sees_and_a_seed_carries_it(
    upto: int, fresh: set[int]
) -> None:
    results = [
        ToolResult(call_id=f"c{i}", name="synthetic_read", arguments_json="{}", output=f"r{i}") for i in range(6)
    ]
    ids = frozenset(results[i].id for i in fresh)
    emitter = Branch(record=record_of(results), view=[r.id for r in results], state=ContextState(fold_next=ids))
    clone = emitter.clone(upto=upto, cache=True)
    assert clone.state.fold_next == ids & frozenset(clone.view_ids())
    seed, bodies = seed_of(clone)
    assert branch_from_seed(seed, bodies, "br-child").state.fold_next == clone.state.fold_next
    # A state stored before the field existed decodes with nothing pending.
    stored = encode_value(ContextState(), "state")
    stored["fields"].pop("fold_next", None)
    assert decode_value(stored, "state").fold_next == frozenset()


def test_nothing_is_pending_for_a_branch_that_was_not_cloned_with_its_emitters_cache() -> None:
    result = ToolResult(call_id="c1", name="synthetic_read", arguments_json="{}", output="text")
    state = ContextState(fold_next=frozenset({result.id}), delivered=frozenset({result.id}))
    emitter = Branch(record=record_of([result]), view=[result.id], state=state)
    assert pending_inherited(emitter) == frozenset()  # no parent
    assert pending_inherited(emitter.clone()) == frozenset()  # no ledger: the "own" layout


@needs_server
@pytest.mark.slow
def test_on_temporal_the_checker_folds_and_sends_what_it_sends_in_process(server: str, tmp_path: Path) -> None:  # noqa: F811
    """The Temporal engine (asyncio only, as Temporal) clones the emitter into a seed that carries the pending fold."""
    scenario = scenario_at(tmp_path, SCENARIO.replace('kind = "scripted"', 'kind = "simulated"'))
    local_signals = tmp_path / "local.jsonl"
    local = _local_report(scenario, local_signals)
    # An absolute path: the helper's scenarios directory joined with it is the path itself.
    remote, signals, _ = _run(str(scenario), tmp_path, "--temporal", server, "--bodies", str(tmp_path / "bodies"))
    _assert_same_contract(remote, local, signals, local_signals)  # the checker's request included, byte for byte
    assert remote["nodes"]["checker"]["first_request_cached_share"] >= 0.9, remote["nodes"]["checker"]
    commits = [e.data for e in read_jsonl(signals) if e.type == "FoldCommitted" and e.node_id == "checker"]
    assert [list(c["stages"]) for c in commits] == [["tool_io"]]
