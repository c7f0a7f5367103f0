"""``inspect``: a branch's view as the model sees it, and where every other message went."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import pytest
from test_replay import RECOVER

from actors.branch import Branch
from actors.tools import BUILTIN_TOOLS
from runtime.cli.store import main
from runtime.config.loader import load_scenario
from runtime.fold.formats import read_call
from runtime.store.inspect import describe_branch, format_branch
from runtime.store.run import run_scenario_stored
from runtime.values.messages import AssistantResponse, Instruction, Note, ToolCall, ToolResult


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
    assert "1 originals of clipped copies above: #9" in out
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
        "inherited": (),
        "unreachable": (4, 5),
    }
    text = format_branch(picture)
    assert "2 NOT reachable from the view" in text and "branch " + branch.id + " (node n)" in text


def test_sizes_add_up() -> None:
    branch = _branch_with_a_fold_and_a_lost_message()
    picture = describe_branch(branch, count_tokens=len)
    assert picture.view_chars == len("task") + len("folded")
    assert picture.view_tokens == sum(e.tokens for e in picture.entries) > 0
