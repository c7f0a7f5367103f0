"""The branch keeps its own invariants: each context-state change is a named turn method."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.branch import Branch, StateSet
from runtime.errors import InputCeilingExceeded
from runtime.fold.marks import FoldMark
from runtime.fold.protected import ProtectedRound
from runtime.values.messages import Instruction, Note
from runtime.values.usage import Usage


def refusal(estimate: int = 10) -> InputCeilingExceeded:
    return InputCeilingExceeded(estimate=estimate, ceiling=5, counted=estimate, scale=1.0, largest_parts=[])


def test_the_turn_offers_no_untyped_state_update() -> None:
    from actors.branch import Turn

    assert not hasattr(Turn, "update_state")


@given(st.lists(st.tuples(st.integers(0, 50_000), st.integers(0, 200_000)), max_size=12))
def test_the_scale_never_falls(responses: list[tuple[int, int]]) -> None:
    import anyio

    async def run() -> None:
        branch = Branch.create()
        async with branch.turn() as turn:
            previous = branch.scale
            for counted, total in responses:
                scale = turn.calibrate(counted, Usage(input_tokens=total))
                assert scale == branch.scale >= previous >= 1.0
                previous = scale

    anyio.run(run)


@pytest.mark.anyio
async def test_a_refusal_is_sticky_and_only_the_caller_clears_it() -> None:
    branch = Branch.create()
    first, second = refusal(10), refusal(20)
    async with branch.turn() as turn:
        turn.refuse(first)
        turn.refuse(second)
        with pytest.raises(TypeError, match="InputCeilingExceeded, not a RuntimeError"):
            turn.refuse(RuntimeError("no"))  # type: ignore[arg-type]
    assert branch.refusal is first
    branch.clear_refusal()
    assert branch.refusal is None


@pytest.mark.anyio
async def test_deliver_marks_delivered_and_ends_the_recovered_protection() -> None:
    branch = Branch.create()
    async with branch.turn() as turn:
        turn.append(Instruction("a"))
        turn.recover({"x"})
        assert branch.state.recovered == {"x"}
        turn.deliver(branch.view_ids())
    assert branch.state.delivered == set(branch.view_ids()) and branch.state.recovered == frozenset()


@pytest.mark.anyio
async def test_the_first_round_is_decided_once() -> None:
    branch = Branch.create()
    decision = ProtectedRound(True, ("a", "b"), "d", 100, 10, 5, 1.0, None, 0.0, "r:1")
    async with branch.turn() as turn:
        turn.protect_first_round(decision)
        with pytest.raises(ValueError, match="already decided its protected first round"):
            turn.protect_first_round(decision)
    assert branch.state.protected_round is decision


@pytest.mark.anyio
async def test_request_serials_count_up_and_turn_progress_opens_and_closes() -> None:
    branch = Branch.create()
    async with branch.turn() as turn:
        assert [turn.next_request_serial() for _ in range(3)] == [1, 2, 3]
        turn.open_turn(1, 0)
        assert branch.state.open_turn == (1, 0)
        with pytest.raises(ValueError, match="must not be negative"):
            turn.open_turn(-1, 0)
        turn.close_turn()
    assert branch.state.open_turn is None and branch.state.request_serial == 3


class RecordingJournal:
    """A branch journal that keeps each batch of changes it is given."""

    def __init__(self) -> None:
        self.batches: list[tuple[object, ...]] = []

    def branch_created(self, branch: Branch) -> None:
        pass

    def changed(self, branch: Branch, changes: object) -> None:
        self.batches.append(tuple(changes))  # type: ignore[call-overload]


@pytest.mark.anyio
async def test_a_fold_commit_lands_whole_and_rewrite_causes_add_up_until_a_send() -> None:
    branch = Branch.create()
    journal = RecordingJournal()
    branch.attach_journal(journal)
    seen = journal.batches
    async with branch.turn() as turn:
        for i in range(3):
            turn.append(Instruction(f"m{i}"))
        ids = branch.view_ids()
        turn.explain_rewrite("restore #1")
        note = Note("folded", ids[:2], 0, "tool_io")
        seen.clear()
        turn.commit_fold((note,), (note.id, ids[2]), (FoldMark(0, 0),), "fold f1 (tool_io)")
        assert len(seen) == 1, "a fold commit is one journal batch"
        kinds = [type(change).__name__ for change in seen[0]]
        assert kinds == ["MessageAdded", "ViewSet", "StateSet"]
        assert branch.view_ids() == (note.id, ids[2])
        assert branch.state.rewrite_cause == "restore #1; fold f1 (tool_io)"
        assert branch.state.pending_marks == (FoldMark(0, 0),)
        turn.sent_prefix(("t", "s", "m"), ("d1", "d2"))
    assert branch.state.rewrite_cause is None and branch.state.last_request_digests == ("d1", "d2")


@pytest.mark.anyio
async def test_state_changes_in_a_row_reach_the_journal_as_one() -> None:
    branch = Branch.create()
    journal = RecordingJournal()
    branch.attach_journal(journal)
    seen = journal.batches
    async with branch.turn() as turn:
        with turn.batch():
            turn.calibrate(4000, Usage(input_tokens=6000))
            turn.deliver(())
            turn.open_turn(0, 1)
    (batch,) = seen
    assert len(batch) == 1 and isinstance(batch[0], StateSet)
    assert batch[0].state == branch.state and branch.state.scale == 1.5
