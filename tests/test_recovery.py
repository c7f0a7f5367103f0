"""Exact recovery: read_result pages through originals; restore puts them back in place (verified)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, fold_input, measurer_for, run_planner
from runtime.fold.formats import parse_read_result
from runtime.fold.planner import FoldPlanner
from runtime.fold.projection import clipped_copy
from runtime.fold.recovery import RecoveryCorrupted, RecoveryError, plan_restore, read_result, verify_note
from runtime.fold.settings import FoldSettings
from runtime.fold.units import units_of
from runtime.measuring.measure import TokenCounter
from runtime.values.messages import Note, ToolResult

COUNTER = TokenCounter()


def read(path: str, size: int) -> tuple[str, dict, str]:
    return ("read_file", {"path": path, "size": size}, synthetic_text(path, size))


def page_through(branch, index: int, limit: int = 16_000) -> str:
    got, offset = [], 0
    while True:
        page = parse_read_result(read_result(branch, index, offset=offset, limit=limit).text)
        assert page.offset == offset and page.index == index
        got.append(page.text)
        if page.next_offset is None:
            return "".join(got)
        assert page.next_offset == offset + len(page.text)
        offset = page.next_offset


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=0, max_size=3000), st.integers(min_value=1, max_value=700))
def test_read_result_pages_through_any_original_exactly_unicode_included(text: str, limit: int) -> None:
    c = Conversation()
    c.task("t")
    _, (result,) = c.round([("echo", {"n": 1}, text)])
    branch = c.branch()
    assert page_through(branch, branch.index_of(result.id), limit) == text


def test_read_result_caps_the_limit_and_reports_total_and_next_offset() -> None:
    c = Conversation()
    c.task("t")
    _, (result,) = c.round([read("big.md", 40_000)])
    branch = c.branch()
    index = branch.index_of(result.id)
    page = parse_read_result(read_result(branch, index, offset=100, limit=50_000).text)
    assert page.limit == 16_000 and len(page.text) == 16_000 and page.total == 40_000
    assert page.next_offset == 16_100 and page.text == result.output[100:16_100]
    last = parse_read_result(read_result(branch, index, offset=39_990).text)
    assert last.text == result.output[39_990:] and last.next_offset is None


def test_under_a_bound_a_read_result_answer_fits_it_whole() -> None:
    c = Conversation()
    c.task("t")
    _, (result,) = c.round([read("big.md", 40_000)])
    branch = c.branch()
    answer = read_result(branch, branch.index_of(result.id), offset=0, limit=16_000, bound=4000)
    assert len(answer.text) <= 4000 and answer.limit < 4000
    page = parse_read_result(answer.text)
    assert page.limit == answer.limit and page.text == result.output[: answer.limit]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"index": 99}, "index 99 is not a full-record index"),
        ({"index": -1}, "index -1 is not a full-record index"),
        ({"index": 3, "offset": 10**6}, "offset 1000000 is outside the original #3"),
        ({"index": 3, "limit": 0}, "limit 0 is not a positive integer"),
    ],
)
def test_bad_recovery_requests_name_the_value_and_the_expectation(kwargs: dict, message: str) -> None:
    c = Conversation()
    c.task("t")
    c.round([read("a.md", 500)])
    branch = c.branch()
    rest = {key: value for key, value in kwargs.items() if key != "index"}  # the parameter itself is shared
    with pytest.raises(RecoveryError, match=message):
        read_result(branch, kwargs["index"], **rest)


def test_a_corrupted_original_is_an_error_naming_what_failed_never_wrong_text() -> None:
    c = Conversation()
    c.task("t")
    _, (result,) = c.round([read("a.md", 4000)])
    for i in range(5):
        c.round([read(f"b{i}.md", 4000)])
    c.deliver()
    c.round([read("newest.md", 4000)])
    fold_then(c)
    assert result.id not in c.view
    branch = c.branch()
    index = branch.index_of(result.id)
    object.__setattr__(result, "output", result.output.replace("a.md", "b.md", 1))  # corrupt the stored bytes
    with pytest.raises(
        RecoveryCorrupted, match=rf"record message #{index} \(id {result.id}, tool_result\) fails its SHA-256"
    ):
        read_result(branch, index)
    with pytest.raises(RecoveryCorrupted, match=f"#{index}"):
        plan_restore(branch.view(), branch, start=index)


def fold_then(c: Conversation, ceiling_share: float = 0.85, **kw) -> None:
    branch = c.branch()
    estimate = measurer_for(branch, counter=COUNTER).estimate(branch.view())
    plan, _ = run_planner(
        FoldPlanner(
            fold_input(branch, FoldSettings(ceiling=int(estimate / ceiling_share)), **kw),
            measurer_for(branch, counter=COUNTER),
        )
    )
    assert plan.landed
    c.land(plan)


def test_restore_of_a_clipped_original_twice_and_over_a_range_leaves_one_form_at_its_place() -> None:
    c = Conversation()
    c.task("Read.")
    _, (big,) = c.round([read("big.md", 30_000)])
    c.round([read("after.md", 2000)])
    branch = c.branch()
    index = branch.index_of(big.id)
    copy = clipped_copy(big, index=index, allowance=5000, bound=None)
    c.add(copy, in_view=False)
    position = c.view.index(big.id)
    c.view[position] = copy.id
    branch = c.branch()
    first = plan_restore(branch.view(), branch, start=index)
    assert first.restored == (big.id,) and first.replaced_copies == (copy.id,)
    assert first.view_ids[position] == big.id and copy.id not in first.view_ids
    c.view = list(first.view_ids)
    branch = c.branch()
    again = plan_restore(branch.view(), branch, start=index)
    assert not again.changed and again.already == (big.id,) and again.view_ids == tuple(c.view)
    # A range holding both the original and its copy: one form, at the original's place.
    c.view[position] = copy.id
    branch = c.branch()
    ranged = plan_restore(branch.view(), branch, start=index, end=branch.index_of(copy.id))
    assert ranged.view_ids.count(big.id) == 1 and copy.id not in ranged.view_ids
    assert ranged.view_ids[position] == big.id


def test_restore_puts_a_folded_round_back_at_its_chronological_place_after_notes_and_copies() -> None:
    c = Conversation()
    c.task("Read.")
    rounds = [c.round([read(f"d/{i}.md", 4000)]) for i in range(8)]
    c.deliver()
    c.round([read("newest.md", 4000)])
    fold_then(c)
    view = c.messages()
    note = next(m for m in view if isinstance(m, Note))
    branch = c.branch()
    verify_note(note, branch)
    target_response, (target,) = rounds[2]
    assert target.id not in c.view
    plan = plan_restore(branch.view(), branch, start=branch.index_of(target.id))
    assert plan.restored == (target_response.id, target.id)  # the call comes back with its result
    restored_view = list(plan.view_ids)
    position = restored_view.index(target_response.id)
    assert restored_view[position + 1] == target.id
    keys = [u.key for u in units_of([branch.message_at(branch.index_of(m)) for m in restored_view], branch)]
    assert keys == sorted(keys)  # everything, the note at its first index, in time order
    assert restored_view.index(note.id) < position
    assert note.id in plan.view_ids  # the note still stands for the rounds not restored


def test_restoring_a_notes_own_index_expands_it_and_the_note_leaves_the_view() -> None:
    c = Conversation()
    c.task("Read.")
    folded = [c.round([read(f"d/{i}.md", 4000)]) for i in range(6)]
    c.deliver()
    c.round([read("newest.md", 4000)])
    before = list(c.view)
    fold_then(c)
    note = next(m for m in c.messages() if isinstance(m, Note))
    branch = c.branch()
    plan = plan_restore(branch.view(), branch, start=branch.index_of(note.id))
    assert note.id in plan.dropped_notes and note.id not in plan.view_ids
    # Every original back where it was; one the fold clipped (it stops at its target, issue 11) by its copy.
    shown = [branch.message_at(branch.index_of(mid)) for mid in plan.view_ids]
    assert [getattr(m, "clipped_from", None) or m.id for m in shown] == before
    assert set(note.replaced) <= set(plan.restored)
    assert folded[0][1][0].id in note.replaced


def test_a_note_whose_span_no_longer_hashes_to_its_header_is_refused() -> None:
    c = Conversation()
    c.task("Read.")
    for i in range(6):
        c.round([read(f"d/{i}.md", 4000)])
    c.deliver()
    c.round([read("newest.md", 4000)])
    fold_then(c)
    note = next(m for m in c.messages() if isinstance(m, Note))
    branch = c.branch()
    swapped = Note(note.text, tuple(reversed(note.replaced)), note.first_index, note.stage)
    with pytest.raises(RecoveryCorrupted, match="span it replaced hashes to"):
        verify_note(swapped, branch)


def test_a_clone_recovers_the_same_originals_by_the_same_indices() -> None:
    c = Conversation()
    c.task("Read.")
    originals = [c.round([read(f"d/{i}.md", 6000)])[1][0] for i in range(6)]
    c.deliver()
    c.round([read("newest.md", 6000)])
    fold_then(c)
    clone = c.branch().clone()
    for original in originals:
        index = clone.index_of(original.id)
        assert page_through(clone, index) == original.output
    assert isinstance(clone.message_at(clone.index_of(originals[0].id)), ToolResult)


def test_restore_brings_back_only_what_a_note_or_copy_stands_for() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([read("a.md", 500)])
    stray = c.task("an instruction kept in the record only")
    c.view.remove(stray.id)
    branch = c.branch()
    with pytest.raises(RecoveryError, match="is not a folded or clipped message"):
        plan_restore(branch.view(), branch, start=branch.index_of(stray.id))
    ranged = plan_restore(branch.view(), branch, start=0, end=len(c.record) - 1)
    assert not ranged.changed and stray.id not in ranged.view_ids


# --- what a note's check and an original's index name --------------------------------------


def test_a_note_check_names_a_missing_message_and_the_index_of_a_corrupted_one() -> None:
    c = Conversation()
    c.task("t")
    _, (first,) = c.round([read("a.md", 500)])
    _, (second,) = c.round([read("b.md", 500)])
    branch = c.branch()
    missing = Note("folded", (first.id, "m-gone"), 1, "tool_io")
    with pytest.raises(RecoveryCorrupted, match=rf"^note {missing.id} replaced message m-gone, which is missing"):
        verify_note(missing, branch)
    index = branch.index_of(second.id)
    object.__setattr__(second, "output", second.output.replace("b.md", "c.md", 1))
    with pytest.raises(RecoveryCorrupted, match=rf"^record message #{index} \(id {second.id}, tool_result\)"):
        verify_note(Note("folded", (first.id, second.id), 1, "tool_io"), branch)


def test_an_original_index_is_its_own_a_copys_is_its_originals_and_a_stranger_has_none() -> None:
    from runtime.fold.units import original_index

    c = Conversation()
    c.task("t")
    _, (result,) = c.round([read("a.md", 5000)])
    branch = c.branch()
    index = branch.index_of(result.id)
    copy = clipped_copy(result, index=index, allowance=1024, bound=None)
    c.add(copy)
    branch = c.branch()
    assert original_index(result, branch) == index and original_index(copy, branch) == index
    task = branch.message_at(0)
    assert original_index(task, branch) == 0
    stranger = Note("not recorded", (), 0, "tool_io")
    with pytest.raises(KeyError, match=f"message {stranger.id} is not in the branch's record"):
        original_index(stranger, branch)
