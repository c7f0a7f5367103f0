"""Crash safety: SIGKILL a real process at random points of a run that folds; resume completes it.

Each case runs ``foldline``'s store commands in a subprocess. Kills land two ways:

- at a chosen SQL statement of the store's writer (the process kills itself
  with SIGKILL right before executing it, so the kill falls inside a
  transaction, with one unit per transaction so every unit boundary is a
  candidate); the statements are drawn at random from a seeded generator;
- from outside, at a random moment while the run writes its store.

After ``resume`` (itself killed and resumed once), the run must equal an
uninterrupted one: the same requests per node (by digest, in order), the same
records (by content, byte for byte, every message passing its SHA-256; the
folds' notes and clipped copies included), the same usage totals with no
response counted twice, and the same outcome. (Counters the report takes
from other events, such as fold commits, may miss an event the kill caught
between its batch and its own write; requests and usage may not.)
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# Folding under a ceiling (tool_io folds, a clip, a fold mark, read_result),
# children cloned from a long emitter, an independent node and a dependent
# one. Caching is off: a provider's cache does not survive a crash, so
# only then can usage totals be compared with an uninterrupted run.
SCENARIO = """
schema = "foldline.scenario/v1"
name = "crash"
[run]
concurrency = 3
[provider]
kind = "scripted"
model = "claude-haiku-5-5"
[profiles.default]
system = "You read files and delegate."
tools = ["synthetic_read", "spawn"]
max_input_tokens = 100000
[profiles.folding]
system = "You read files under a ceiling."
tools = ["synthetic_read"]
max_input_tokens = 14000
context_management = true
[[nodes]]
id = "reader"
profile = "folding"
max_rounds = 30
instruction = "Read everything and report."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "m0.py", size = 5000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "m1.py", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "m2.py", size = 4000 } }] },
  { tool_calls = [{ name = "context", arguments = { action = "fold", start = 2, end = 5 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "m3.py", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "m4.py", size = 5000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "big.py", size = 40000 } }] },
  { tool_calls = [{ name = "context", arguments = { action = "read_result", index = 3, offset = 100, limit = 500 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "m5.py", size = 6000 } }] },
  { text = "All read." },
]
[[nodes]]
id = "lead"
instruction = "Read the parts, then delegate."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "p0.md", size = 8000 } },
                  { name = "synthetic_read", arguments = { path = "p1.md", size = 8000 } }] },
  { tool_calls = [{ name = "spawn", arguments = { node = "digest" } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "p2.md", size = 8000 } },
                  { name = "spawn", arguments = { node = "check" } }] },
  { text = "Delegated." },
]
[[nodes]]
id = "digest"
spawned_by = "lead"
profile = "folding"
instruction = "Digest what you were handed."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "p3.md", size = 3000 } }] },
  { text = "Digest done." },
]
[[nodes]]
id = "check"
spawned_by = "lead"
operation = "bounded"
instructions = ["First check.", "Second check."]
script = [{ text = "One." }, { text = "Two." }]
[[nodes]]
id = "summary"
depends_on = ["lead", "reader"]
operation = "bounded"
instruction = "Summarize."
script = [{ text = "Summary." }]
"""


def driver(argv: list[str]) -> int:
    """``python tests/test_crash.py KILL_AT COMMAND ARGS...``: run a store command, SIGKILLed at statement KILL_AT (0: never)."""
    kill_at = int(argv[0])
    from runtime.store import writer
    from runtime.cli.store import main

    writer.MAX_UNITS_PER_TRANSACTION = 1
    executed = 0

    def execute_unit(self: Any, connection: Any, unit: Any) -> None:
        nonlocal executed
        for sql, params in unit:
            executed += 1
            if executed == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            connection.execute(sql, params)

    writer.SqliteWriter.execute_unit = execute_unit  # type: ignore[method-assign]
    code = main(argv[1:])
    print(f"statements executed: {executed}", file=sys.stderr)
    return code


def store_command(kill_at: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, __file__, str(kill_at), *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )


def content_by_index(branch: Any) -> list[str]:
    """Each record message's canonical content, byte for byte, with the ids it names (a note's
    replaced messages, a copy's original) written as record indices: ids are random per run."""
    from runtime.canonical import canonical_json

    out = []
    for message in branch.record_messages():
        content = message.content()
        if content.get("replaced") is not None:
            content["replaced"] = [branch.index_of(mid) for mid in content["replaced"]]
        if content.get("clipped_from") is not None:
            content["clipped_from"] = branch.index_of(content["clipped_from"])
        out.append(canonical_json(content))
    return out


def outcome_of(store: Path) -> dict[str, Any]:
    from runtime.store.reader import StoreReader
    from runtime.store.run import report_from_store

    report = report_from_store(store, "claude-haiku-5-5")
    with StoreReader(store) as reader:
        for message_id in reader.message_ids():
            reader.message(message_id)
        rows = [r for r in reader.requests() if r.status == "sent"]
        branches = reader.restore_branches()
        events = reader.events()
    node_branch = {r.node_id: r.branch_id for r in rows if r.node_id}
    assert {k: sum(int((r.usage or {}).get(k, 0)) for r in rows) for k in report["usage"]} == report["usage"]
    assert len(rows) == report["requests"]
    assert [e.seq for e in events] == sorted({e.seq for e in events})
    return {
        "status": report["status"],
        "nodes": {n: v["status"] for n, v in report["nodes"].items()},
        "requests": report["requests"],
        "usage": report["usage"],
        "cost": report["cost"]["bit"],
        "digests": {n: [r.digest for r in rows if r.node_id == n] for n in node_branch},
        "side_requests": sorted(r.digest for r in rows if r.node_id is None),
        "records": {n: content_by_index(branches[b]) for n, b in node_branch.items()},
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], int]:
    directory = tmp_path_factory.mktemp("crash")
    scenario = directory / "crash.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    done = store_command(0, "run", str(scenario), "--store", str(directory / "full.db"), "--quiet")
    assert done.returncode == 0, done.stderr
    statements = int(done.stderr.rsplit("statements executed: ", 1)[1].split()[0])
    return scenario, outcome_of(directory / "full.db"), statements


def test_the_uninterrupted_run_folds_and_finishes(uninterrupted: tuple[Path, dict[str, Any], int]) -> None:
    _, expected, statements = uninterrupted
    notes = [r for r in expected["records"]["reader"] if r.startswith('{"first_index"')]
    copies = [r for r in expected["records"]["reader"] if '"clipped_from":' in r and '"clipped_from":null' not in r]
    assert expected["status"] == "ok" and notes and copies and statements > 200


def _kill_points() -> list[float]:
    # Fractions of the run's statements, drawn once from a seeded generator (plus the very first one).
    return [0.0] + sorted(random.Random(20261130).uniform(0.02, 0.98) for _ in range(7))


@pytest.mark.slow
@pytest.mark.parametrize("fraction", _kill_points())
def test_sigkill_at_a_statement_then_resume_equals_the_uninterrupted_run(
    uninterrupted: tuple[Path, dict[str, Any], int], tmp_path: Path, fraction: float
) -> None:
    scenario, expected, statements = uninterrupted
    store = tmp_path / "s.db"
    kill_at = max(1, int(fraction * statements))
    killed = store_command(kill_at, "run", str(scenario), "--store", str(store), "--quiet")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = store_command(0, "resume", str(store), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert outcome_of(store) == expected


@pytest.mark.slow
def test_a_resume_killed_in_turn_is_resumed_again(uninterrupted: tuple[Path, dict[str, Any], int], tmp_path: Path) -> None:
    scenario, expected, statements = uninterrupted
    store = tmp_path / "s.db"
    assert store_command(statements // 3, "run", str(scenario), "--store", str(store), "--quiet").returncode < 0
    again = store_command(statements // 4, "resume", str(store), "--quiet")
    assert again.returncode == -signal.SIGKILL, again.stderr
    resumed = store_command(0, "resume", str(store), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert outcome_of(store) == expected
    replay = store_command(0, "replay", str(store), "--all")
    assert replay.returncode == 0 and f"{expected['requests'] + len(expected['side_requests'])} of" in replay.stdout


@pytest.mark.slow
def test_sigkill_from_outside_at_random_moments(uninterrupted: tuple[Path, dict[str, Any], int], tmp_path: Path) -> None:
    scenario, expected, _ = uninterrupted
    rng = random.Random()
    for attempt in range(3):
        store = tmp_path / f"s{attempt}.db"
        process = subprocess.Popen(
            [sys.executable, __file__, "0", "run", str(scenario), "--store", str(store), "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not store.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.3))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        resumed = store_command(0, "resume", str(store), "--quiet")
        assert resumed.returncode == 0, resumed.stderr
        assert outcome_of(store) == expected


if __name__ == "__main__":
    sys.exit(driver(sys.argv[1:]))
