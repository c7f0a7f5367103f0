"""The recoverability audit's fold part, the scripted summarizer, and the fold micro-benchmarks."""

from __future__ import annotations

import pytest

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation
from runtime.bench.fold_micro import bench_clip_pass, bench_tool_io_fold, clip_pass_once, tool_io_fold_once
from runtime.fold.audit import unrecoverable_bytes
from runtime.fold.notes import build_note
from runtime.fold.units import units_of
from runtime.sim.summary_policy import FoldSummaryPolicy, extractive_summary
from runtime.values.canonical import canonical_json
from runtime.values.messages import Note


def test_folded_originals_are_recoverable_and_compaction_drops_are_counted() -> None:
    c = Conversation()
    c.task("Read.")
    rounds = [c.round([("read_file", {"path": f"{i}.md"}, synthetic_text(str(i), 800))]) for i in range(3)]
    branch = c.branch()
    units = [u for u in units_of(branch.view(), branch) if u.kind == "round"]
    folded = build_note("tool_io", units[:2], branch)
    c.add(folded)
    for unit in units[:2]:
        for mid in unit.ids:
            c.view.remove(mid)
    assert unrecoverable_bytes(c.branch()) == 0  # a fold note: every original readable
    dropped = build_note("compaction", units[2:], c.branch())
    c.add(dropped)
    for mid in units[2].ids:
        c.view.remove(mid)
    response, (result,) = rounds[2]
    expected = sum(len(canonical_json(m.content()).encode()) for m in (response, result))
    assert unrecoverable_bytes(c.branch()) == expected
    c.view.extend(units[2].ids)  # back in the view: nothing lost any more
    assert unrecoverable_bytes(c.branch()) == 0
    dangling = Note("a note naming a message the record lacks", ("missing-id",), 1, "tool_io")
    c.add(dangling)
    assert unrecoverable_bytes(c.branch()) == len(canonical_json(dangling.content()).encode())


def test_the_scripted_summarizer_lists_the_spans_calls_deterministically() -> None:
    transcript = (
        'Summarize this span.\n\n[assistant #4 calls read_file {"path":"a.md"}]\n\n'
        "[result #5 of read_file]\nfirst line of a\nsecond\n\n[user #6]\nplease continue"
    )
    summary = extractive_summary(transcript)
    assert '- #4 calls read_file {"path":"a.md"}' in summary
    assert "- result #5 of read_file: first line of a" in summary and "please continue" in summary
    reply = FoldSummaryPolicy().respond(
        {"messages": [{"role": "user", "content": [{"type": "text", "text": transcript}]}]}
    )
    assert reply.stop_reason == "end_turn" and reply.content[0]["text"] == summary


def test_the_fold_benchmarks_measure_what_they_name() -> None:
    seconds, plan, before = tool_io_fold_once()
    assert 97_000 <= before <= 99_500 and "tool_io" in plan.stages and seconds > 0
    seconds, before, after = clip_pass_once()
    assert after < before and seconds > 0
    assert len(bench_tool_io_fold(2)) == 2 and len(bench_clip_pass(1)) == 1
    with pytest.raises(ValueError, match="repeats: 0 is not a positive integer"):
        bench_clip_pass(0)
