"""``inspect``: a branch's view as the model sees it, and where every other message went."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import attrs
import pytest
from test_replay import RECOVER

from actors.branch import Branch
from actors.tools import BUILTIN_TOOLS
from runtime.cli.store import main
from runtime.config.loader import load_scenario
from runtime.fold.formats import read_call
from runtime.store.inspect import describe_branch, format_branch
from runtime.store.run import run_scenario_stored
from runtime.values.messages import AssistantResponse, Instruction, Note, TextPart, ToolCall, ToolResult


def inspect_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["inspect", *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("inspect")
    scenario = directory / "recover.toml"
    scenario.write_text(RECOVER, encoding="utf-8")
    loaded = load_scenario(scenario, tool_names=BUILTIN_TOOLS.names())
    anyio.run(lambda: run_scenario_stored(loaded, store_path=directory / "r.db"))
    return directory / "r.db"


def test_the_branch_list_names_nodes_and_sizes(store: Path) -> None:
    code, out, _ = inspect_cli(str(store))
    assert code == 0
    assert "clipper" in out and "bounded" in out and "view chars" in out


def test_folds_and_clips_show_what_they_stand_for_and_how_to_read_it(store: Path) -> None:
    code, out, _ = inspect_cli(str(store), "--branch", "clipper")
    assert code == 0
    assert "fold note (tool_io)" in out and "replaces 4 message(s) from #4" in out
    assert "- #7 synthetic_read result, 6,000 chars: " + read_call(7, 0, 6000) in out
    assert "clipped copy of #9: keeps" in out and "of 70,045 chars; omits" in out
    assert "1 originals of clipped copies above (or of copies a note replaced): #9" in out
    assert "NOT reachable" not in out


def test_a_bounded_result_shows_what_is_sent(store: Path) -> None:
    code, out, _ = inspect_cli(str(store), "--branch", "bounded")
    assert code == 0
    assert "bounded: 30,000 of its 100,045 chars are sent" in out
    assert '"action":"read_result","index":' in out


def test_unknown_branches_and_stores_are_bad_input(store: Path, tmp_path: Path) -> None:
    code, _, err = inspect_cli(str(store), "--branch", "nobody")
    assert code == 2 and "names no branch or node; nodes: bounded, clipper" in err
    assert inspect_cli(str(tmp_path / "none.db"))[0] == 2


def _branch_with_a_fold_and_a_lost_message() -> Branch:
    branch = Branch.create(system="s")
    call = ToolCall.create("c1", "read_file", {"path": "a.md"})

    async def build() -> None:
        async with branch.turn() as turn:
            turn.append(Instruction("task"))
            turn.append(AssistantResponse((call,), "tool_use"))
            turn.append(ToolResult.for_call(call, "x" * 5000))
            turn.append(AssistantResponse((), "end_turn"))
            turn.append(Instruction("next"))
            view = branch.view_ids()
            note = Note("folded", (view[1], view[2]), 2, "tool_io")
            turn.add_to_record(note)
            turn.set_view((view[0], note.id))  # "next" leaves the view with nothing standing for it

    anyio.run(build)
    return branch


def test_every_record_message_outside_the_view_is_accounted_for() -> None:
    branch = _branch_with_a_fold_and_a_lost_message()
    picture = describe_branch(branch, count_tokens=lambda text: len(text) // 4, node_id="n")
    assert [e.kind for e in picture.entries] == ["instruction", "note"]
    note = picture.entries[1]
    assert [(o.index, o.chars) for o in note.stands_for] == [(2, 15), (3, 5000)]
    assert note.stands_for[1].read_call == read_call(3, 0, 5000)
    assert picture.outside == {
        "replaced": (2, 3),
        "clipped": (),
        "system": (0,),
        "side": (),
        "retired": (),
        "inherited": (),
        "unreachable": (4, 5),
    }
    text = format_branch(picture)
    assert "2 NOT reachable from the view" in text and "branch " + branch.id + " (node n)" in text


def _branch_with_a_reset_over_notes_and_a_summary_exchange() -> tuple[Branch, str]:
    """A note over a clipped copy's round, a reset note over that note, and a fold summary's own prompt and reply."""
    branch = Branch.create(system="s")
    call = ToolCall.create("c1", "read_file", {"path": "a.md"})
    prompt = Instruction("You summarize a span of an agent's conversation.")

    async def build() -> None:
        async with branch.turn() as turn:
            turn.append(Instruction("task"))
            turn.append(AssistantResponse((call,), "tool_use"))
            original = ToolResult.for_call(call, "x" * 5000)
            turn.append(original)
            view = branch.view_ids()
            copy = attrs.evolve(ToolResult.for_call(call, "x" * 100), clipped_from=original.id)
            turn.add_to_record(copy)
            turn.set_view((view[0], view[1], copy.id))
            first = Note("folded calls", (view[1], copy.id), 1, "tool_io")
            turn.add_to_record(first)
            turn.set_view((view[0], first.id))
            turn.add_to_record(prompt)
            turn.add_to_record(AssistantResponse((TextPart("What the folded span did: ..."),), "end_turn"))
            reset = Note("Summary: ...", (first.id,), 1, "reset")
            turn.add_to_record(reset)
            turn.set_view((view[0], reset.id))
            turn.add_to_record(Note("a rolled-back pass's note", (reset.id,), 1, "all"))  # never in the view

    anyio.run(build)
    return branch, prompt.id


def test_a_note_that_replaces_notes_reaches_their_originals_and_copies() -> None:
    branch, prompt_id = _branch_with_a_reset_over_notes_and_a_summary_exchange()
    picture = describe_branch(branch, count_tokens=len, side_prompts=frozenset({prompt_id, "not-in-this-record"}))
    # #1 task, #2 call, #3 original, #4 copy, #5 first note, #6 summary prompt, #7 its reply, #8 reset note,
    # #9 a note whose pass rolled back (it names the reset note, which is in the view)
    assert [e.index for e in picture.entries] == [1, 8]
    assert picture.outside == {
        "replaced": (2, 4, 5),
        "clipped": (3,),
        "system": (0,),
        "side": (6, 7),
        "retired": (9,),
        "inherited": (),
        "unreachable": (),
    }
    assert "NOT reachable" not in format_branch(picture)
    # Without the store's side requests, the summary's prompt and reply are what nothing stands for.
    assert describe_branch(branch, count_tokens=len).outside["unreachable"] == (6, 7)


def test_sizes_add_up() -> None:
    branch = _branch_with_a_fold_and_a_lost_message()
    picture = describe_branch(branch, count_tokens=len)
    assert picture.view_chars == len("task") + len("folded")
    assert picture.view_tokens == sum(e.tokens for e in picture.entries) > 0
