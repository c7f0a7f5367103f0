"""`foldline report SOURCE --html`: every request with the usage its events give, folds and refusals at their
request, the branch views with their recovery calls, and nothing outside the file."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from display_support import SCENARIOS, Page, outside_references, run_cli, usage_of

from runtime.store.reader import StoreReader
from signals.envelope import Event
from signals.sinks import read_jsonl

pytestmark = pytest.mark.slow


def _run(tmp: Path, scenario: str) -> tuple[Path, Path]:
    store, signals = tmp / f"{scenario}.db", tmp / f"{scenario}.jsonl"
    code, _, err = run_cli(
        "run", str(SCENARIOS / f"{scenario}.toml"), "--store", str(store), "--signals", str(signals), "--quiet"
    )
    assert code in (0, 1), err
    return store, signals


@pytest.fixture(scope="module")
def fold_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _run(tmp_path_factory.mktemp("fold"), "fold")


@pytest.fixture(scope="module")
def ceiling_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _run(tmp_path_factory.mktemp("ceiling"), "ceiling")


def _report(source: Path, tmp: Path) -> tuple[str, Page]:
    out = tmp / "r.html"
    code, _, err = run_cli("report", str(source), "--html", str(out))
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    return text, Page(text)


def _requests_by_node(events: list[Event]) -> dict[str, list[str]]:
    """Each node's request ids in the order their first ceiling decision was made."""
    order: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if e.type == "ContextDecision" and e.request_id and e.request_id not in order[e.node_id or "-"]:
            order[e.node_id or "-"].append(e.request_id)
    return order


def _usage_by_request(events: list[Event]) -> dict[str, dict[str, int]]:
    usage: dict[str, dict[str, int]] = {}
    for e in events:
        if e.type == "ResponseReceived" and e.request_id:
            previous = usage.get(e.request_id, {})
            usage[e.request_id] = {k: previous.get(k, 0) + int(v) for k, v in e.data["usage"].items()}
    return usage


def check_requests(page: Page, events: list[Event]) -> None:
    """Every request of every node is drawn, in order, with exactly the usage its responses report."""
    by_node = _requests_by_node(events)
    usage = _usage_by_request(events)
    assert by_node, "the run made no requests"
    for node, request_ids in by_node.items():
        drawn = page.find("g", "req", data_node=node)
        assert [g.attrs["data-request"] for g in drawn] == request_ids
        assert [int(g.attrs["data-number"]) for g in drawn] == list(range(1, len(request_ids) + 1))
        for g in drawn:
            rid = g.attrs["data-request"]
            if rid in usage:
                assert usage_of(g) == usage[rid], rid
                assert f"output {usage[rid]['output_tokens']:,}" in g.text  # the tooltip says it too
            else:
                assert g.attrs["data-sent"] == "no" and "data-read" not in g.attrs


def check_folds_and_refusals(page: Page, events: list[Event]) -> None:
    """Each fold and each refusal is marked at its request; each committed fold's saving is listed there."""
    decisions = [e for e in events if e.type == "ContextDecision"]
    for d in decisions:
        marks = {m.attrs["data-mark"] for m in page.find("g", "mark", data_request=d.request_id)}
        if d.data["action"] in ("fold", "refuse", "notice"):
            assert d.data["action"] in marks, (d.request_id, d.data["action"], marks)
        if d.data["action"] == "refuse":
            (g,) = page.find("g", "req", data_request=d.request_id)
            assert "refused" in g.classes and g.attrs["data-estimate"] == str(d.data["estimate_after"])
    next_decision: dict[str, str] = {}
    pending: list[tuple[str, Event]] = []
    for e in events:
        if e.type == "FoldCommitted":
            pending.append((e.branch_id or "", e))
        elif e.type == "ContextDecision":
            for branch, fold in [p for p in pending if p[0] == e.branch_id]:
                next_decision[fold.id] = e.request_id or ""
                pending.remove((branch, fold))
    folds = [e for e in events if e.type == "FoldCommitted"]
    for fold in folds:
        rid = next_decision[fold.id]
        listed = [li.text for li in page.find("li", "fold", data_request=rid)]
        assert any(f"freed {fold.data['tokens_freed']:,}" in text for text in listed), (rid, listed)
        assert page.find("g", "mark-fold", data_request=rid)
    for rewrite in (e for e in events if e.type == "CacheRewrite"):
        assert page.find("g", "mark-rewrite", data_request=rewrite.request_id)


def check_totals(page: Page, report: dict[str, Any]) -> None:
    cards = {c.text for c in page.find("div", "card")}
    assert f"{report['requests']:,}requests ({report['attempts']:,} attempts)" in cards
    assert f"{report['cost']['bit']:,.0f}cost (BIT)" in cards
    assert f"{report['folds']} / {report['tokens_freed']:,}folds / freed" in cards


def test_store_report_of_the_fold_scenario(fold_run: tuple[Path, Path], tmp_path: Path) -> None:
    store, _ = fold_run
    text, page = _report(store, tmp_path)
    with StoreReader(store) as reader:
        events = reader.events()
    assert outside_references(text) == []
    check_requests(page, events)
    check_folds_and_refusals(page, events)
    assert sum(1 for e in events if e.type == "FoldCommitted") >= 2  # the scenario folds: the check above bites
    from runtime.store.run import report_from_store

    check_totals(page, report_from_store(store, "claude-haiku-5-5"))
    # The timeline: a row per node, the spawn arrow, a span per sent request.
    assert {g.attrs["data-node"] for g in page.find("g", "trow")} == {"reader", "lead", "digest"}
    assert any("lead spawned digest" in g.text for g in page.find("g", "spawn"))
    sent = {e.request_id for e in events if e.type == "RequestSent"}
    assert {r.attrs["data-request"] for r in page.find("rect", "span")} == sent
    # Each node's dashed line comes from its profile: a fold line where it folds, a notice line where it cannot.
    assert "drawn at the default" not in text
    lines = {s.attrs["data-node"]: s.text for s in page.find("section", "node")}
    # A folding node's decisions name the line in force at each request (the cost model moves it).
    assert "fold line in force " in lines["reader"] and "(drawn at each request)" in lines["reader"]
    assert "fold line in force " in lines["digest"]
    assert "notice line 0.8 x ceiling (this node does not fold)" in lines["lead"]


def test_store_report_draws_each_branch_with_its_recovery_calls(fold_run: tuple[Path, Path], tmp_path: Path) -> None:
    store, _ = fold_run
    _, page = _report(store, tmp_path)
    code, listing, err = run_cli("inspect", str(store))
    assert code == 0, err
    branch_ids = [line.split()[0] for line in listing.splitlines()[1:]]
    sections = page.find("section", "branch")
    assert sorted(s.attrs["data-branch"] for s in sections) == sorted(branch_ids)
    code, reader_text, err = run_cli("inspect", str(store), "--branch", "reader")
    assert code == 0, err
    calls = [line.split(" chars: ", 1)[1] for line in reader_text.splitlines() if line.strip().startswith("- #")]
    assert calls, "the reader folded: its notes stand for originals"
    (reader,) = [s for s in sections if s.attrs["data-node"] == "reader"]
    recovery = {c.text for c in page.find("code", "recovery")}
    assert set(calls) <= recovery
    notes = re.search(r"fold notes: (\d+)", reader.text)
    assert notes is not None and int(notes.group(1)) >= 1 and "thinking: none" in reader.text


def test_signals_report_of_the_fold_scenario(fold_run: tuple[Path, Path], tmp_path: Path) -> None:
    _, signals = fold_run
    text, page = _report(signals, tmp_path)
    events = read_jsonl(signals)
    assert outside_references(text) == []
    check_requests(page, events)
    check_folds_and_refusals(page, events)
    (branches,) = page.find("section", "branches")
    assert "Not available from a signals file" in branches.text
    assert not page.find("section", "branch")
    assert "drawn at the default 0.8" in text
    assert all(
        "fold line in force " in s.text or "fold line 0.8 x ceiling (the default; " in s.text
        for s in page.find("section", "node")
    )


def test_refusals_and_notices_are_marked_at_their_request(ceiling_run: tuple[Path, Path], tmp_path: Path) -> None:
    store, signals = ceiling_run
    for source in (store, signals):
        text, page = _report(source, tmp_path)
        events = read_jsonl(signals)
        assert outside_references(text) == []
        actions = {e.data["action"] for e in events if e.type == "ContextDecision"}
        assert {"refuse", "notice"} <= actions  # the scenario has both: the checks below bite
        check_requests(page, events)
        check_folds_and_refusals(page, events)
        (refused,) = page.find("g", "req", data_action="refuse")
        assert refused.attrs["data-node"] == "tight-review"
        assert any("InputCeilingExceeded" in p.text for p in page.find("section", "node", data_node="tight-review"))


def test_bench_json_report(tmp_path: Path) -> None:
    import json

    out = tmp_path / "b.json"
    code, _, err = run_cli("bench", "--small", "--workloads", "fits,reading-20k", "--json", str(out))
    assert code == 0, err
    document = json.loads(out.read_text())
    text, page = _report(out, tmp_path)
    assert outside_references(text) == []
    for workload in document["workloads"]:
        name = workload["workload"]
        drawn = {g.attrs["data-strategy"]: g for g in page.find("g", "strategy", data_workload=name)}
        assert set(drawn) == set(workload["runs"])
        for strategy, run in workload["runs"].items():
            assert float(drawn[strategy].attrs["data-cost-bit"]) == pytest.approx(run["cost"]["bit"], abs=0.01)
            assert f"{run['ratios']['to_bound']:.2f} x bound" in drawn[strategy].text
        (section,) = page.find("section", "workload", data_workload=name)
        (bound,) = page.find("g", "bound", data_workload=name)
        assert float(bound.attrs["data-bound-bit"]) == pytest.approx(workload["lower_bound"]["bit"], abs=0.01)
        assert f"lower bound {workload['lower_bound']['bit']:,.1f} BIT" in section.text
    targets = [li.text for li in page.find("li", "met") + page.find("li", "missed")]
    for target in document["targets"]:
        assert any(target["target"] in t for t in targets)


def test_bad_sources_are_refused_with_the_path_and_what_was_expected(tmp_path: Path) -> None:
    out = str(tmp_path / "r.html")
    code, _, err = run_cli("report", str(tmp_path / "missing.db"), "--html", out)
    assert code == 2 and "missing.db: no such file or directory" in err
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\nworld\n")
    code, _, err = run_cli("report", str(junk), "--html", out)
    assert code == 2 and "notes.txt:1: not JSON" in err
    other = tmp_path / "other.json"
    other.write_text('{"schema": "something/v9", "workloads": []}')
    code, _, err = run_cli("report", str(other), "--html", out)
    assert code == 2 and "'something/v9' is not 'foldline.bench/v1'" in err
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema": "foldline.bench/v1", "workloads": [{"workload": "w", "runs": []}]}')
    code, _, err = run_cli("report", str(broken), "--html", out)
    assert code == 2 and "workloads[0].lower_bound" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = run_cli("report", str(empty), "--html", out)
    assert code == 2 and "holds no events" in err
    assert not Path(out).exists()


def test_unwritable_output_is_bad_input(fold_run: tuple[Path, Path], tmp_path: Path) -> None:
    _, signals = fold_run
    target = tmp_path / "no-such-dir" / "r.html"
    code, _, err = run_cli("report", str(signals), "--html", str(target))
    assert code == 2 and f"--html: {target}: the directory {target.parent} does not exist" in err  # checked first


def test_inspect_html_draws_one_branch_like_the_report(fold_run: tuple[Path, Path], tmp_path: Path) -> None:
    store, _ = fold_run
    out = tmp_path / "b.html"
    code, _, err = run_cli("inspect", str(store), "--branch", "digest", "--html", str(out))
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    assert outside_references(text) == []
    page = Page(text)
    (section,) = page.find("section", "branch")
    assert section.attrs["data-node"] == "digest"
    _, report_page = _report(store, tmp_path)
    (same,) = report_page.find("section", "branch", data_node="digest")
    assert section.text == same.text  # the same drawing as in the report
    code, digest_text, err = run_cli("inspect", str(store), "--branch", "digest")
    calls = [line.split(" chars: ", 1)[1] for line in digest_text.splitlines() if line.strip().startswith("- #")]
    assert calls and set(calls) <= {c.text for c in page.find("code", "recovery")}
    code, _, err = run_cli("inspect", str(store), "--html", str(out))
    assert code == 0, err
    assert len(Page(out.read_text(encoding="utf-8")).find("section", "branch")) == 3
    code, _, err = run_cli("inspect", str(store), "--branch", "nobody", "--html", str(out))
    assert code == 2 and "'nobody' names no branch or node; nodes: digest, lead, reader" in err
    code, _, err = run_cli("inspect", str(tmp_path / "none.db"), "--html", str(out))
    assert code == 2


def test_a_malformed_store_fails_naming_the_row(fold_run: tuple[Path, Path], tmp_path: Path) -> None:
    import shutil
    import sqlite3

    store, _ = fold_run
    copy = tmp_path / "copy.db"
    shutil.copyfile(store, copy)
    with sqlite3.connect(copy) as connection:
        connection.execute("UPDATE events SET body = '{not json' WHERE rowid = (SELECT MIN(rowid) FROM events)")
    code, _, err = run_cli("report", str(copy), "--html", str(tmp_path / "r.html"))
    assert code == 1 and "malformed store" in err and "events row" in err


RESTORING = """schema = "foldline.scenario/v1"
name = "restoring"
[provider]
kind = "scripted"
model = "claude-haiku-5-5"
[profiles.reader]
system = "You read modules."
tools = ["synthetic_read"]
max_input_tokens = 8000
context_management = true
[[nodes]]
id = "reader"
profile = "reader"
max_rounds = 40
instruction = "Read the modules."
script = [
%s
  { tool_calls = [{ name = "context", arguments = { action = "restore", index = 3 } }] },
  { text = "done" },
]
"""


def test_restored_originals_are_drawn_as_such(tmp_path: Path) -> None:
    """A read folded away and restored with the context tool is a restored original in the branch's view."""
    reads = "\n".join(
        f'  {{ tool_calls = [{{ name = "synthetic_read", arguments = {{ path = "src/m{i:02d}.py", size = 3000 }} }}] }},'
        for i in range(12)
    )
    scenario = tmp_path / "restoring.toml"
    scenario.write_text(RESTORING % reads)
    store = tmp_path / "r.db"
    code, _, err = run_cli("run", str(scenario), "--store", str(store), "--quiet")
    assert code == 0, err
    _, page = _report(store, tmp_path)
    (section,) = page.find("section", "branch", data_node="reader")
    restored = {int(tr.attrs["data-index"]) for tr in page.find("tr", "restored")}
    assert restored == {2, 3}  # the call and its result come back together
    assert "restored originals: 2" in section.text
    notes = page.find("tr", "note")
    assert notes and all(int(tr.attrs["data-index"]) not in restored for tr in notes)
