"""Results along the graph on the Temporal engine: the same requests as in process (asyncio only, as Temporal).

A failed dependency read by a node that accepts failures, a typed node read as
its JSON value, and a top-level node starting from a dependency's view
(``inherit``): each request byte for byte as in process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_temporal import _assert_same_contract, _foldline, _local_report, needs_server, server  # noqa: F401

from signals.sinks import read_jsonl

SCENARIO = """
schema = "foldline.scenario/v1"
name = "results"
[provider]
kind = "simulated"
model = "claude-haiku-5-5"
[profiles.default]
system = "You answer briefly."
tools = ["fail"]
tool_errors = "fail"
[[nodes]]
id = "bad"
instruction = "Break."
script = [{ tool_calls = [{ name = "fail", arguments = { message = "disk on fire" } }] }]
[[nodes]]
id = "typed"
operation = "bounded"
instruction = "Score it."
output = { schema = { type = "object", properties = { score = { type = "integer" } }, required = ["score"] } }
script = [{ text = '{"score": "high"}' }, { text = '{"score": 7}' }]
[[nodes]]
id = "reader"
depends_on = ["bad", "typed"]
accept_failures = true
operation = "bounded"
instruction = "Merge what you were given."
script = [{ text = "Merged." }]
"""


@needs_server
@pytest.mark.slow
def test_a_dependent_reads_failures_and_typed_values_on_temporal_as_in_process(server: str, tmp_path: Path) -> None:  # noqa: F811
    scenario = tmp_path / "results.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    local_signals = tmp_path / "local.jsonl"
    local = _local_report(scenario, local_signals)
    signals, report = tmp_path / "temporal.jsonl", tmp_path / "temporal.json"
    done = _foldline(
        "run", str(scenario), "--engine", "temporal", "--temporal", server, "--bodies", str(tmp_path / "bodies"),
        "--quiet", "--signals", str(signals), "--report", str(report), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]  # "bad" failed
    remote = json.loads(report.read_text())
    _assert_same_contract(remote, local, signals, local_signals)  # the reader's request included, byte for byte
    assert remote["nodes"]["reader"]["status"] == "ok" and remote["nodes"]["typed"]["status"] == "ok"
    assert remote["nodes"]["typed"]["requests"] == 2


@needs_server
@pytest.mark.slow
def test_a_node_starting_from_a_dependencys_view_sends_on_temporal_what_it_sends_in_process(
    server: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "inherit.toml"
    text = SCENARIO.replace("accept_failures = true\n", 'accept_failures = true\ninherit = "typed"\n')
    scenario.write_text(text, encoding="utf-8")
    local_signals = tmp_path / "local.jsonl"
    local = _local_report(scenario, local_signals)
    signals, report = tmp_path / "temporal.jsonl", tmp_path / "temporal.json"
    done = _foldline(
        "run", str(scenario), "--engine", "temporal", "--temporal", server, "--bodies", str(tmp_path / "bodies"),
        "--quiet", "--signals", str(signals), "--report", str(report), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    remote = json.loads(report.read_text())
    _assert_same_contract(remote, local, signals, local_signals)
    assert remote["nodes"]["reader"]["status"] == "ok"
    # The reader's request starts with the typed node's conversation (its instruction and both replies).
    sent = [e for e in read_jsonl(signals) if e.type == "RequestSent" and e.node_id == "reader"]
    assert len(sent) == 1
