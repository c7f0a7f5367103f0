"""The command line: `foldline run`, its report contract, signals file and exit codes."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pytest

from runtime.cli import main
from signals.sinks import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.toml"

REPORT_KEYS = {
    "run_id",
    "status",
    "nodes",
    "requests",
    "usage",
    "cached_share",
    "cost",
    "peak_request_tokens",
    "notices",
    "refusals",
    "folds",
    "rewrites",
    "bytes_unrecoverable",
}
USAGE_KEYS = {
    "input_tokens",
    "cache_read_input_tokens",
    "cache_write_5m_tokens",
    "cache_write_1h_tokens",
    "output_tokens",
}


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_quickstart_runs_against_the_simulated_server(tmp_path: Path) -> None:
    signals, report_path = tmp_path / "s.jsonl", tmp_path / "r.json"
    code, out, err = run_cli("run", str(QUICKSTART), "--signals", str(signals), "--report", str(report_path))
    assert code == 0, err
    for node in ("lead", "review-design", "review-tests", "survey", "summary"):
        assert node in out
    assert "[lead] spawned review-design" in err  # progress while it runs

    events = read_jsonl(signals)
    lines = signals.read_text().splitlines()
    assert len(lines) == len(events) > 10
    for line in lines:
        obj = json.loads(line)
        assert {"schema_version", "type", "id", "time", "seq", "run_id", "branch_id", "data"} <= set(obj)
        assert obj["schema_version"] == 1
    seqs = [e.seq for e in events]
    assert all(b > a for a, b in itertools.pairwise(seqs))
    assert {e.type for e in events} >= {
        "RunStarted",
        "RunFinished",
        "NodeStarted",
        "NodeFinished",
        "ChildSpawned",
        "RequestSent",
        "ResponseReceived",
        "ContextDecision",
    }

    report = json.loads(report_path.read_text())
    assert REPORT_KEYS <= set(report)
    assert USAGE_KEYS == set(report["usage"])
    assert report["status"] == "ok"
    assert set(report["nodes"]) == {"lead", "review-design", "review-tests", "survey", "summary"}
    assert all(n["status"] == "ok" for n in report["nodes"].values())
    assert report["requests"] == sum(1 for e in events if e.type == "ResponseReceived")
    assert set(report["cost"]) >= {"bit", "usd"}
    assert report["rewrites"] == {"explained": 0, "unexplained": 0}
    assert report["bytes_unrecoverable"] == 0
    # the usage is what the server reported, event by event
    total = sum(e.data["usage"]["input_tokens"] for e in events if e.type == "ResponseReceived")
    assert report["usage"]["input_tokens"] == total > 0


def test_scripted_provider_gives_the_same_report_numbers_as_the_simulated_server(tmp_path: Path) -> None:
    reports = []
    for provider in ("scripted", "simulated"):
        path = tmp_path / f"{provider}.json"
        code, _, err = run_cli("run", str(QUICKSTART), "--provider", provider, "--report", str(path), "--quiet")
        assert code == 0, err
        reports.append(json.loads(path.read_text()))
    for key in ("requests", "usage", "peak_request_tokens", "cached_share"):
        assert reports[0][key] == reports[1][key], key


BAD_SCENARIOS = {
    "unknown key": ('[[nodes]]\nid = "a"\ninstrution = "x"\n', "nodes[0].instrution"),
    "wrong type": ('[[nodes]]\nid = "a"\ninstruction = "x"\nmax_rounds = "ten"\n', "nodes[0].max_rounds"),
    "cycle": (
        '[[nodes]]\nid = "a"\ninstruction = "x"\ndepends_on = ["b"]\n'
        '[[nodes]]\nid = "b"\ninstruction = "y"\ndepends_on = ["a"]\n',
        "a -> b -> a",
    ),
    "missing dependency": ('[[nodes]]\nid = "a"\ninstruction = "x"\ndepends_on = ["ghost"]\n', "ghost"),
    "zero ceiling": (
        '[profiles.default]\nmax_input_tokens = 0\n[[nodes]]\nid = "a"\ninstruction = "x"\n',
        "profiles.default.max_input_tokens",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_bad_scenarios_exit_2_naming_file_and_key_path_and_send_nothing(case: str, tmp_path: Path) -> None:
    body, expected = BAD_SCENARIOS[case]
    path = tmp_path / "bad.toml"
    path.write_text('schema = "foldline.scenario/v1"\n' + body)
    signals = tmp_path / "s.jsonl"
    code, out, err = run_cli("run", str(path), "--signals", str(signals))
    assert code == 2
    assert str(path) in err and expected in err
    assert not signals.exists()  # nothing ran, nothing was sent
    assert out == ""


def test_a_failed_node_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "fails.toml"
    path.write_text(
        'schema = "foldline.scenario/v1"\n'
        '[profiles.default]\ntools = ["fail", "synthetic_read"]\ntool_errors = "fail"\n'
        '[[nodes]]\nid = "bad"\ninstruction = "x"\n'
        'script = [{ tool_calls = [{ name = "fail", arguments = { message = "boom" } }] }]\n'
        '[[nodes]]\nid = "good"\ninstruction = "y"\nscript = [{ text = "fine" }]\n'
        '[[nodes]]\nid = "after"\ninstruction = "z"\ndepends_on = ["bad"]\nscript = [{ text = "never" }]\n'
    )
    report = tmp_path / "r.json"
    code, out, err = run_cli("run", str(path), "--provider", "scripted", "--report", str(report), "--quiet")
    assert code == 1
    data = json.loads(report.read_text())
    assert data["nodes"]["bad"]["status"] == "failed" and "boom" in data["nodes"]["bad"]["reason"]
    assert data["nodes"]["good"]["status"] == "ok"
    assert data["nodes"]["after"]["status"] == "skipped"
    assert data["nodes"]["after"]["reason"] == "dependency 'bad' failed"
    assert data["nodes"]["good"]["requests"] == 1 and data["nodes"]["after"]["requests"] == 0


def test_a_missing_scenario_file_exits_2(tmp_path: Path) -> None:
    code, _, err = run_cli("run", str(tmp_path / "nope.toml"))
    assert code == 2 and "nope.toml" in err
