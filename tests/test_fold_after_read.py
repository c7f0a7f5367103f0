"""Fold after read (issue 31): the tail choice, the read-mode fold, no mark on a round the next request
folds, each result's salient line in its note, and the cost on the bench's workloads.

Async tests run on asyncio and trio (the ``anyio_backend`` fixture).
"""

from __future__ import annotations

import re
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import calls, read, text
from test_fold_by_cost import run

from actors.tools import synthetic_text
from runtime.bench import workloads
from runtime.bench.conversations import Conversation, fold_input, measurer_for, run_planner
from runtime.bench.harness import run_workload
from runtime.bench.strategies import FOLDLINE, Strategy
from runtime.bench.tools import document_text, stage_text
from runtime.cache import TailSkip
from runtime.config import Profile
from runtime.errors import ConfigError
from runtime.fold.after_read import NOTE_TOKENS, after_read_per_request, choose_tail, release_first_round
from runtime.fold.cost import CostPrices, RecallProfile, decide_fold
from runtime.fold.formats import SPAN_HEX, listing_lines, note_header, parse_note_calls, parse_note_header
from runtime.fold.notes import CALLS_HEADING, build_note, fold_id_of, salient_line_of, span_digest
from runtime.fold.planner import FoldPlanner
from runtime.fold.recovery import RecoveryCorrupted, verify_note
from runtime.fold.settings import FoldSettings
from runtime.fold.units import units_of
from runtime.measuring.measure import TokenCounter
from runtime.scripted.policies import ScriptStep
from runtime.values.messages import Note

PRICES = CostPrices()
COUNTER = TokenCounter()
CEILING = 20_000
PROFILE = Profile(
    system="You read files one at a time and report what they say. " * 4,
    tools=("synthetic_read",),
    max_input_tokens=CEILING,
    context_management=True,
    prompt_caching=True,
)

# -- the tail choice (pure) ------------------------------------------------------------------


def test_one_after_read_request_is_the_new_tokens_fresh_a_note_written_and_the_kept_prefix_read() -> None:
    figure = after_read_per_request(growth=1_000, carried=2_000, prices=PRICES, caching=True, recalls=None)
    assert figure == pytest.approx(1_000 + 1.25 * NOTE_TOKENS + 0.1 * 2_000)
    uncached = after_read_per_request(growth=1_000, carried=2_000, prices=PRICES, caching=False, recalls=None)
    assert uncached == pytest.approx(1_000 + NOTE_TOKENS + 2_000)
    # Every recall the branch made is priced once a request over the requests it was seen in.
    recalls = RecallProfile(10, distances=(5_000.0, 9_000.0), page_tokens=400.0)
    priced = after_read_per_request(growth=1_000, carried=2_000, prices=PRICES, caching=True, recalls=recalls)
    assert priced == pytest.approx(figure + 2 / 10 * recalls.cost(2_000, PRICES))


def _decision(**overrides: Any) -> Any:
    values: dict[str, Any] = {
        "tokens": 12_000,
        "growth": 2_500.0,
        "ceiling": CEILING,
        "margin": 0.045,
        "kept_prefix_tokens": 1_500,
        "prices": PRICES,
        "caching": True,
    }
    values.update(overrides)
    return decide_fold(**values)


def test_after_read_is_chosen_when_it_costs_less_than_the_verbatim_tail_and_not_when_recalls_outweigh_it() -> None:
    decision = _decision()
    cheap = choose_tail(decision, growth=2_500.0, kept_tokens=1_500, prices=PRICES, caching=True, recalls=None)
    assert cheap.tail == "after-read"
    assert cheap.verbatim_bit == pytest.approx(decision.predicted_per_request + 1.25 * 2_500.0)
    assert cheap.after_read_bit < cheap.verbatim_bit
    # A branch that read folded material back on almost every request: each recall is a request more.
    recalls = RecallProfile(10, distances=tuple(100.0 for _ in range(9)), page_tokens=3_000.0)
    costly = choose_tail(
        _decision(recalls=recalls), growth=2_500.0, kept_tokens=1_500, prices=PRICES, caching=True, recalls=recalls
    )
    assert costly.tail == "verbatim" and costly.after_read_bit > costly.verbatim_bit
    assert set(costly.to_json()) == {"tail", "verbatim_bit", "after_read_bit"}


def test_the_protected_first_round_is_released_when_carrying_it_costs_more_than_rewriting_what_follows() -> None:
    # read x size x elapsed against write x (rewritten + note), equality kept.
    assert release_first_round(size=5_000, rewritten=0, elapsed_requests=2, prices=PRICES)
    size = 1.25 * (1_000 + NOTE_TOKENS) / (0.1 * 4)
    assert not release_first_round(size=size, rewritten=1_000, elapsed_requests=4, prices=PRICES)
    assert release_first_round(size=size + 1, rewritten=1_000, elapsed_requests=4, prices=PRICES)


def test_fold_tail_is_a_profile_key_refused_with_its_key_path() -> None:
    assert Profile().fold_tail == "cost" == FoldSettings(ceiling=1_000).tail
    with pytest.raises(ConfigError, match=r'profiles\.reader\.fold_tail: "masked" is not one of'):
        Profile.from_obj({"fold_tail": "masked"}, "profiles.reader")
    settings_ = FoldSettings(ceiling=1_000, tail="cost", policy="fixed")
    assert not settings_.after_read_possible  # the fixed fractions keep a verbatim tail unless asked
    assert FoldSettings(ceiling=1_000, tail="after-read", policy="fixed").after_read_possible
    assert not FoldSettings(ceiling=1_000, tail="after-read", strategy="compaction").after_read_possible


# -- the salient line ------------------------------------------------------------------------


def test_the_salient_line_is_the_line_that_breaks_the_outputs_shape_and_none_when_none_does() -> None:
    document = document_text("docs/a001.md", 3_000, ("R2",))
    number, line = salient_line_of(document)  # type: ignore[misc]
    assert line.startswith("fact R2: ") and document.splitlines()[number - 1] == line
    assert salient_line_of(stage_text(3, 3_000)) == (1, stage_text(3, 3_000).splitlines()[0])
    plain = document_text("docs/a001.md", 3_000)
    assert salient_line_of(plain) is None  # every line shares its shape: none stands out
    log = "\n".join([*(f"12:00:{i:02d} ok step {i}" for i in range(5)), "ERROR disk full", "12:00:09 ok"])
    assert salient_line_of(log) == (6, "ERROR disk full")
    assert salient_line_of("no such file: a.md") == (1, "no such file: a.md")
    assert salient_line_of("") is None and salient_line_of(" \n\n") is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab1 \t-:9", max_size=12), max_size=12))
def test_the_salient_line_is_a_line_of_the_output_whose_shape_no_other_line_has(
    lines: list[str],
) -> None:
    output = "\n".join(lines)
    found = salient_line_of(output)
    numbered = [(n, line) for n, line in enumerate(output.splitlines(), 1) if line.strip()]
    shapes = [re.sub("[0-9]", "0", line.split()[0]) for _, line in numbered]
    unique = [entry for entry, shape in zip(numbered, shapes, strict=True) if shapes.count(shape) == 1]
    assert found == (unique[0] if unique else None)  # the first line of a shape of its own
    assert salient_line_of(output) == found  # deterministic


# -- the read-mode fold and its notes ----------------------------------------------------------


def _reading_conversation(rounds: int) -> Conversation:
    c = Conversation()
    c.task("Read.")
    for i in range(rounds):
        c.round([("read_file", {"path": f"d/{i}.md"}, document_text(f"d/{i}.md", 3_000, (f"F{i}",)))])
    c.deliver()
    c.round([("read_file", {"path": "newest.md"}, synthetic_text("newest.md", 3_000))])
    return c


def _read_fold(c: Conversation) -> Any:
    branch = c.branch()
    plan, _ = run_planner(
        FoldPlanner(
            fold_input(branch, FoldSettings(ceiling=200_000), mode="read"), measurer_for(branch, counter=COUNTER)
        )
    )
    return plan


def test_the_read_mode_folds_every_delivered_round_keeping_each_results_salient_line_and_not_the_newest() -> None:
    c = _reading_conversation(3)
    newest = c.view[-2:]
    plan = _read_fold(c)
    assert plan.landed and plan.stages == ("tool_io",)
    c.land(plan)
    notes = [m for m in c.messages() if isinstance(m, Note)]
    assert len(notes) == 1 and c.view[-2:] == newest  # undelivered: not folded
    for i in range(3):
        assert f"fact F{i}: " in notes[0].text
    assert CALLS_HEADING in notes[0].text
    header = parse_note_header(notes[0].text)
    assert header is not None and header.span_sha256 is None  # the fold id is the one hash it shows
    verify_note(notes[0], c.branch())
    # The next round, once delivered, becomes a note of its own, its calls right under its header.
    c.deliver()
    c.round([("read_file", {"path": "later.md"}, synthetic_text("later.md", 2_000))])
    c.land(_read_fold(c))
    later = [m for m in c.messages() if isinstance(m, Note)]
    assert len(later) == 2 and later[0].id == notes[0].id  # the first note stays: no rewrite
    lines = later[1].text.splitlines()
    assert CALLS_HEADING not in later[1].text and "Folded calls" not in later[1].text
    assert parse_note_header(lines[0]) is not None and lines[1].startswith("- #")
    verify_note(later[1], c.branch())


def test_a_headingless_note_keeps_its_calls_when_a_later_note_absorbs_it_and_a_summary_needs_a_heading() -> None:
    c = _reading_conversation(2)
    c.land(_read_fold(c))
    c.deliver()
    c.round([("read_file", {"path": "later.md"}, synthetic_text("later.md", 2_000))])
    c.land(_read_fold(c))
    branch = c.branch()
    first, second = (m for m in c.messages() if isinstance(m, Note))
    assert "Folded calls" not in second.text
    units = [u for u in units_of(branch.view(), branch) if u.kind == "note"]
    merged = build_note("reset", units, branch)  # one note over both: every call and salient line kept
    assert parse_note_calls(merged.text) == parse_note_calls(first.text) + parse_note_calls(second.text)
    assert listing_lines(merged.text) == listing_lines(first.text) + listing_lines(second.text)
    with pytest.raises(ValueError, match="needs a heading"):
        build_note("all", units, branch, summary="what happened", heading=None)


@pytest.mark.parametrize("digits", [64, SPAN_HEX])
def test_a_note_written_with_a_span_digest_in_its_header_is_still_checked_against_it(digits: int) -> None:
    c = _reading_conversation(2)
    c.land(_read_fold(c))
    note = next(m for m in c.messages() if isinstance(m, Note))
    branch = c.branch()
    replaced = [branch.message_at(branch.index_of(mid)) for mid in note.replaced]  # type: ignore[arg-type]
    digest = span_digest(replaced)
    header = parse_note_header(note.text)
    assert header is not None and header.fold_id == fold_id_of(header.stage, digest)
    base = note_header(header.fold_id, header.stage, header.count, header.first_index)
    old = base[:-1] + f" · span sha256 {digest[:digits]}]"  # the header as notes before this one wrote it
    parsed = parse_note_header(old)
    assert parsed is not None and parsed.span_sha256 == digest[:digits] and parsed.fold_id == header.fold_id
    body = note.text.split("\n", 1)[1]
    verify_note(attrs.evolve(note, text=old + "\n" + body), branch)
    wrong = old.replace(digest[:digits], ("0" if digest[0] != "0" else "1") + digest[1:digits])
    with pytest.raises(RecoveryCorrupted, match="hashes to"):
        verify_note(attrs.evolve(note, text=wrong + "\n" + body), branch)


def test_a_note_whose_fold_id_no_longer_matches_its_span_is_refused() -> None:
    c = _reading_conversation(2)
    c.land(_read_fold(c))
    note = next(m for m in c.messages() if isinstance(m, Note))
    branch = c.branch()
    header = parse_note_header(note.text)
    assert header is not None
    other = "f-" + ("0" if header.fold_id[2] != "0" else "1") + header.fold_id[3:]
    with pytest.raises(RecoveryCorrupted, match=f"giving fold id {header.fold_id}, not the {other}"):
        verify_note(attrs.evolve(note, text=note.text.replace(header.fold_id, other, 1)), branch)


def test_fold_next_selects_the_request_and_says_why_in_its_record() -> None:
    skip = TailSkip.fold_next(estimate=3_000, ceiling=20_000)
    assert skip.selected and skip.record is not None
    assert skip.record.to_dict() == {"estimate": 3_000.0, "fold_line": 20_000.0, "margin": 0.0, "reason": "fold_next"}
    near = TailSkip.decide(estimate=15_500, ceiling=20_000, context_fold_at=0.8)
    assert near.record is not None and "reason" not in near.record.to_dict()


# -- on the send path --------------------------------------------------------------------------


def _reads(n: int, first: int = 6_000) -> list[ScriptStep]:
    sizes = [first] + [6_000] * (n - 1)
    return [calls(read(f"src/m{i:02d}.py", size)) for i, size in enumerate(sizes)] + [text("done")]


@pytest.mark.anyio
async def test_after_read_folds_each_round_at_the_next_request_and_places_no_mark_after_it() -> None:
    result, events, report = await run(PROFILE.evolve(fold_tail="after-read"), _reads(12, first=2_000))
    assert result.status == "ok", result["n"].reason
    replies = [e.data for e in events if e.type == "ResponseReceived" and e.data.get("cache")]
    # Every request that ends with a round's results skips its turn mark: the next request folds the round.
    skipped = [r["cache"].get("tail_skip") for r in replies[1:-1]]
    assert skipped and all(s is not None and s["reason"] == "fold_next" for s in skipped)
    commits = [e.data for e in events if e.type == "FoldCommitted"]
    assert len(commits) >= 10 and all(tuple(c["stages"]) == ("tool_io",) for c in commits)
    decisions = [e.data for e in events if e.type == "ContextDecision" and e.data["stages"]]
    assert decisions and all(d["reason"].startswith('folded once read (fold_tail = "after-read")') for d in decisions)
    # The protected first round (a read of 2,000 characters: under a tenth of the ceiling) is released once carrying it
    # costs more than rewriting what follows it; the rewrite that follows names that cause.
    causes = [e.data["cause"] for e in events if e.type == "CacheRewrite"]
    assert any(c and c.startswith("protected first round released: folded once read") for c in causes), causes
    assert report["bytes_unrecoverable"] == 0 and report["rewrites"]["unexplained"] == 0


@pytest.mark.anyio
async def test_the_cost_model_chooses_after_read_on_a_long_reading_run_and_it_costs_less_than_verbatim() -> None:
    _, chosen, chosen_report = await run(PROFILE, _reads(24))
    _, _, verbatim_report = await run(PROFILE.evolve(fold_tail="verbatim"), _reads(24))
    reasons = [e.data["reason"] for e in chosen if e.type == "ContextDecision" and e.data["stages"]]
    assert reasons and all(r.startswith("folded once read (cost model: ") for r in reasons)
    assert chosen_report["cost"]["bit"] < verbatim_report["cost"]["bit"]
    assert chosen_report["rewrites"]["unexplained"] == 0


VERBATIM = Strategy(
    "foldline-verbatim", "foldline keeping a verbatim tail", {**FOLDLINE.override, "fold_tail": "verbatim"}
)


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["reading-20k", "staged-64"])
async def test_on_the_simulated_server_after_read_answers_every_probe_from_view_and_costs_less(name: str) -> None:
    scenario = workloads.build(name, workloads.SMALL)
    after = await run_workload(scenario, FOLDLINE)
    verbatim = await run_workload(scenario, VERBATIM)
    assert after.status == verbatim.status == "ok"
    # The salient line answers every probe and stage key: no read_result round, nothing re-run.
    for tally in (after.probes, after.keys):
        assert tally.read_result == tally.rerun == tally.failed == tally.wrong == 0
    assert after.bytes_unrecoverable == 0 and after.rewrites_unexplained == 0
    # The rounds go fresh, not written: what is written is the notes and the stable prefix.
    assert after.usage["cache_write_5m_tokens"] < 0.2 * after.usage["input_tokens"]
    if name == "staged-64":
        assert after.cost_bit < verbatim.cost_bit
    # On reading-20k the verbatim tail is the cheaper (small: 21,076 BIT against 22,962; full: 185,605 against
    # 244,330): over its ceiling it clips the largest results before they are ever sent, so the model never
    # sees them whole, where after-read shows every result once in full and then folds it. Until a reset no
    # longer asked for summaries it could not land, the verbatim run also paid for two rolled-back summaries.
