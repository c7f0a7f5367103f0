"""The Branch actor: record, view, lock, clone."""

from __future__ import annotations

import anyio
import pytest

from actors.branch import Branch, BranchBusy
from actors.record import Record
from runtime.errors import InputCeilingExceeded
from runtime.values.messages import Instruction, Note
from runtime.values.usage import Usage


async def fill(branch: Branch, n: int) -> None:
    async with branch.turn() as turn:
        for i in range(n):
            turn.append(Instruction(f"m{i}"))


def test_record_is_append_only_and_forks_share_messages() -> None:
    record = Record()
    first = Instruction("a")
    assert record.append(first) == 0
    fork = record.fork()
    record.append(Instruction("b"))
    fork.append(Instruction("c"))
    assert len(record) == 2 and len(fork) == 2
    assert fork[0] is first  # shared, not copied
    assert record[1].text == "b" and fork[1].text == "c"
    with pytest.raises(ValueError):
        record.append(first)
    with pytest.raises(IndexError):
        record[5]


@pytest.mark.anyio
async def test_clone_view_equals_emitter_view_then_is_independent() -> None:
    emitter = Branch.create(system="sys")
    await fill(emitter, 5)
    clone = emitter.clone()
    assert clone.view_ids() == emitter.view_ids()
    assert all(a is b for a, b in zip(clone.view(), emitter.view(), strict=True))
    await fill(emitter, 1)
    async with clone.turn() as turn:
        turn.append(Instruction("only in the clone"))
    assert len(emitter.view()) == 6 and len(clone.view()) == 6
    assert emitter.view()[-1].text == "m0" and clone.view()[-1].text == "only in the clone"
    assert clone.parent_id == emitter.id and clone.id != emitter.id


@pytest.mark.anyio
async def test_clone_keeps_scale_and_not_refusal_or_ledger() -> None:
    emitter = Branch.create()
    async with emitter.turn() as turn:
        turn.append(Instruction("x"))
        turn.calibrate(4000, Usage(input_tokens=5200))
        turn.refuse(InputCeilingExceeded(estimate=10, ceiling=5, counted=9, scale=1.3, largest_parts=[]))
        turn.set_ledger(object())
    clone = emitter.clone()
    assert clone.scale == 1.3
    assert clone.refusal is None and emitter.refusal is not None
    assert clone.ledger is None


@pytest.mark.anyio
async def test_clone_of_a_view_not_the_record() -> None:
    emitter = Branch.create()
    await fill(emitter, 4)
    ids = emitter.view_ids()
    async with emitter.turn() as turn:
        note = Note("folded m0..m2", ids[:3], 0, "tool_io")
        turn.add_to_record(note)
        turn.set_view([note.id, ids[3]])
    clone = emitter.clone()
    assert clone.view_ids() == (note.id, ids[3])
    # the originals are still reachable by their full-record index
    assert clone.message_at(0).text == "m0"


@pytest.mark.anyio
async def test_one_turn_at_a_time_and_handles_expire() -> None:
    branch = Branch.create()
    order: list[str] = []

    async def hold(name: str) -> None:
        async with branch.turn() as turn:
            order.append(name + " in")
            await anyio.sleep(0.01)
            turn.append(Instruction(name))
            order.append(name + " out")

    async with anyio.create_task_group() as tg:
        tg.start_soon(hold, "a")
        tg.start_soon(hold, "b")
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])
    async with branch.turn() as turn:
        pass
    with pytest.raises(BranchBusy):
        turn.append(Instruction("late"))


@pytest.mark.anyio
async def test_configure_is_refused_during_a_turn() -> None:
    branch = Branch.create(system="one")
    async with branch.turn():
        with pytest.raises(BranchBusy):
            branch.configure(system="two")
    branch.configure(system="two")
    assert branch.system is not None and branch.system.text == "two"
    assert branch.message_at(0).text == "one"  # the old system text stays in the record


@pytest.mark.anyio
async def test_set_view_refuses_ids_outside_the_record() -> None:
    branch = Branch.create()
    async with branch.turn() as turn:
        with pytest.raises(KeyError):
            turn.set_view(["nope"])


@pytest.mark.anyio
async def test_a_branch_at_rest_keeps_no_lock_and_turns_still_take_turns() -> None:
    # A run of thousands of branches keeps them all; a lock each (with its waiters' queue) was kept too.
    branch = Branch.create()
    assert branch._lock is None and not branch.busy
    inside: list[int] = []
    overlaps: list[int] = []

    async def hold(i: int) -> None:
        for _ in range(3):
            async with branch.turn() as turn:
                if inside:
                    overlaps.append(i)
                inside.append(i)
                assert branch.busy
                await anyio.sleep(0)  # the others wait for this turn here
                turn.append(Instruction(f"{i}"))
                inside.remove(i)
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(hold, i)
    assert overlaps == [] and branch.record_length() == 15
    assert branch._lock is None and not branch.busy  # let go once no turn held or waited for it
    with anyio.CancelScope() as scope:  # a turn cancelled while it waits leaves no lock behind either
        async with anyio.create_task_group() as tg:
            async with branch.turn():
                tg.start_soon(hold, 9)
                await anyio.sleep(0)
                scope.cancel()
    assert branch._lock is None and branch.record_length() == 15
