"""Ids from one factory: a run's message, branch, run and request ids come from its id source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.values.ids import CountingIds, RandomIds, current_ids, use_ids
from runtime.values.messages import Instruction
from tests.support import calls, flow, iterative, node, read, runtime_for, scripted, text


def test_the_random_source_is_in_force_outside_every_scope() -> None:
    assert isinstance(current_ids(), RandomIds)
    a, b = Instruction("x"), Instruction("x")
    assert a.id != b.id and len(a.id) == 16


def test_a_scope_installs_a_source_and_restores_the_one_before() -> None:
    with use_ids(CountingIds("t")):
        first = Instruction("x")
        with use_ids(CountingIds("u")):
            inner = Instruction("x")
        second = Instruction("x")
    assert (first.id, inner.id, second.id) == ("t-m000001", "u-m000001", "t-m000002")
    assert isinstance(current_ids(), RandomIds)


async def _run(tmp_path: Path, name: str) -> tuple[list[str], list[str], str]:
    provider = scripted({"n": [calls(read("a.md")), calls(read("b.md")), text("done")]})
    signals = tmp_path / f"{name}.jsonl"
    async with runtime_for(provider, ids=CountingIds("det"), signals_path=signals) as rt:
        result = await rt.run(flow(node("n", iterative("Read a.md and b.md."))))
        branch = result.branches["n"]
        message_ids = [m.id for m in branch.record_messages()]
        run_id = rt.run_id
    events = [json.loads(line) for line in signals.read_text().splitlines()]
    request_ids = [e["request_id"] for e in events if e["type"] == "RequestSent"]
    return message_ids, request_ids, run_id + " " + branch.id


@pytest.mark.anyio
async def test_a_run_with_a_deterministic_source_makes_the_same_ids_every_time(tmp_path: Path) -> None:
    first = await _run(tmp_path, "one")
    second = await _run(tmp_path, "two")
    assert first == second
    message_ids, request_ids, names = first
    assert all(mid.startswith("det-m") for mid in message_ids) and len(set(message_ids)) == len(message_ids)
    run_id, branch_id = names.split()
    assert run_id.startswith("run-det-") and branch_id.startswith("br-det-")
    assert request_ids == [f"{branch_id}:1", f"{branch_id}:2", f"{branch_id}:3"]


@pytest.mark.anyio
async def test_a_branch_made_outside_a_run_takes_its_ids_from_the_runtimes_source() -> None:
    provider = scripted({"n": [text("hi")]})
    async with runtime_for(provider, ids=CountingIds("rt")) as rt:
        branch = rt.new_branch(node("n", iterative("x")))
    assert branch.id.startswith("br-rt-") and branch.system is not None and branch.system.id.startswith("rt-m")
