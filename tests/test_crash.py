"""Crash safety: SIGKILL a real process at many points of a run that folds; resume completes it.

A driver process (``python tests/test_crash.py serve DIR SCENARIO``, started once
per module) runs the uninterrupted reference run, then forks one child process
per store command the tests ask for, so a case pays for a run, not for Python
and the SDK starting. Kills land two ways:

- at a chosen SQL statement of the store's writer (the child kills itself with
  SIGKILL right before executing it, so the kill falls inside a transaction,
  with one unit per transaction so every unit boundary is a candidate); the
  statements are drawn from a seeded generator, one from each of equal slices
  of the reference run's statements, so they are distinct and spread over the
  whole run; every failure names its statement, the statement count and the seed;
- from outside, at a seeded moment while the run writes its store.

After ``resume`` (itself killed and resumed once), the run must equal the
uninterrupted one: the same requests per node (by digest, in order), the same
records (by content, byte for byte, every message passing its SHA-256; the
folds' notes and clipped copies included), the same usage totals with no
response counted twice, and the same outcome. (Counters the report takes
from other events, such as fold commits, may miss an event the kill caught
between its batch and its own write; requests and usage may not.)
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Folding under a ceiling (tool_io folds, a clip, a fold mark, read_result, a
# summary: the 11,000-token ceiling is small enough that a fold needs one; a
# node whose rounds fold once read, read_result among them),
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
max_input_tokens = 11000
context_management = true
fold_tail = "verbatim"
[profiles.masking]
system = "You read files under a ceiling, each folded once read."
tools = ["synthetic_read"]
max_input_tokens = 14000
context_management = true
fold_tail = "after-read"
[[nodes]]
id = "masker"
profile = "masking"
max_rounds = 20
instruction = "Read each file once and report."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a0.py", size = 4000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a1.py", size = 5000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a2.py", size = 3000 } }] },
  { tool_calls = [{ name = "context", arguments = { action = "read_result", index = 3, offset = 0, limit = 400 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a3.py", size = 4000 } }] },
  { text = "All read." },
]
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


KILL_SEED = 20261130
# Slices of the reference run's statements: one kill point is drawn in each (plus the very first statement).
KILL_SLICES = 24
EXTERNAL_KILLS = 4


def _execute_counting(kill_at: int) -> Any:
    """The writer's ``execute_unit``, counting statements and SIGKILLing the process before statement ``kill_at``."""
    executed = 0

    def execute_unit(self: Any, connection: Any, unit: Any) -> None:
        nonlocal executed
        for sql, params in unit:
            executed += 1
            if executed == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            connection.execute(sql, params)

    return execute_unit, lambda: executed


def _kill_after_a_summary() -> None:
    """Make the store's writer commit one unit a transaction and SIGKILL the process as it begins the
    transaction after the one that stored a fold's summary request (a side request: no node): the summary
    is answered and stored, the fold it serves not yet committed."""
    from runtime.store import writer

    stored = {"seen": False, "committed": False}
    commit, execute_unit = writer.SqliteWriter._commit, writer.SqliteWriter.execute_unit

    def execute_noting_summaries(self: Any, connection: Any, unit: Any) -> None:
        execute_unit(self, connection, unit)
        stored["seen"] = stored["seen"] or any(
            sql.startswith("INSERT INTO requests") and params[2] is None for sql, params in unit
        )

    def commit_then_kill(self: Any, connection: Any, units: Any) -> None:
        if stored["committed"]:
            os.kill(os.getpid(), signal.SIGKILL)
        commit(self, connection, units)
        stored["committed"] = stored["seen"]

    writer.MAX_UNITS_PER_TRANSACTION = 1
    writer.SqliteWriter.execute_unit = execute_noting_summaries  # type: ignore[method-assign]
    writer.SqliteWriter._commit = commit_then_kill  # type: ignore[method-assign]


def _child(kill_at: int, argv: list[str], log: str, after_summary: bool = False) -> None:
    """In a forked child: run one store command (SIGKILLed at statement ``kill_at``, 0 = never, or after
    a summary's transaction), then exit."""
    from runtime.cli.store import main
    from runtime.store import writer

    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    execute_unit, executed = _execute_counting(kill_at)
    writer.SqliteWriter.execute_unit = execute_unit  # type: ignore[method-assign]
    if after_summary:
        _kill_after_a_summary()
    code = 1
    try:
        code = main(argv)
        print(f"statements executed: {executed()}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _serve_job(job: dict[str, Any]) -> dict[str, Any]:
    """Fork a child for one store command; kill it from outside after ``kill_after`` seconds if asked."""
    pid = os.fork()
    if pid == 0:
        _child(int(job.get("kill_at", 0)), job["argv"], job["log"], bool(job.get("after_summary")))
    if "kill_after" in job:
        watched, deadline = Path(job["wait_for"]), time.monotonic() + 60
        while not watched.exists() and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(float(job["kill_after"]))
        os.kill(pid, signal.SIGKILL)
    returncode = _wait(pid)
    return {"returncode": returncode, "log": Path(job["log"]).read_text(encoding="utf-8", errors="replace")}


def serve(directory: Path, scenario: Path) -> int:
    """The driver: run the reference in this process (which also loads every module the children need),
    report its statement count, then serve jobs, one JSON object a line on stdin, answered on stdout."""
    import contextlib
    import io

    from runtime.cli.store import main
    from runtime.store import writer

    execute_unit, executed = _execute_counting(0)
    writer.SqliteWriter.execute_unit = execute_unit  # type: ignore[method-assign]
    store = directory / "full.db"
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(["run", str(scenario), "--store", str(store), "--quiet"])
    print(json.dumps({"returncode": code, "statements": executed(), "store": str(store)}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_serve_job(json.loads(line))), flush=True)
    return 0


def content_by_index(branch: Any) -> list[str]:
    """Each record message's canonical content, byte for byte, with the ids it names (a note's
    replaced messages, a copy's original) written as record indices: ids are random per run."""
    from runtime.values.canonical import canonical_json

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


class Driver:
    """The module's driver process: one store command a call, each in a fresh forked process."""

    def __init__(self, directory: Path, scenario: Path) -> None:
        self.directory = directory
        self.scenario = scenario
        self.process = subprocess.Popen(
            [sys.executable, __file__, "serve", str(directory), str(scenario)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self._read()
        assert first["returncode"] == 0, first
        self.statements: int = first["statements"]
        self.reference = Path(first["store"])
        self._jobs = 0

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the crash driver exited with {self.process.wait()}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def command(
        self, *argv: str, kill_at: int = 0, kill_after: float | None = None, after_summary: bool = False
    ) -> dict[str, Any]:
        """Run ``foldline ARGV`` in a child killed at statement ``kill_at``, ``kill_after`` seconds after
        its store appears, or right after it stored a fold's summary request (``after_summary``); return
        its exit (negative: the signal) and its output."""
        assert self.process.stdin is not None
        self._jobs += 1
        log = str(self.directory / f"job{self._jobs}.log")
        job: dict[str, Any] = {"argv": list(argv), "kill_at": kill_at, "log": log, "after_summary": after_summary}
        if kill_after is not None:
            job.update(kill_after=kill_after, wait_for=argv[argv.index("--store") + 1])
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    directory = tmp_path_factory.mktemp("crash")
    scenario = directory / "crash.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    started = Driver(directory, scenario)
    yield started
    started.close()


@pytest.fixture(scope="module")
def expected(driver: Driver) -> dict[str, Any]:
    return outcome_of(driver.reference)


def kill_points(statements: int, seed: int = KILL_SEED, slices: int = KILL_SLICES) -> list[int]:
    """The first statement, then one statement drawn from each of ``slices`` equal slices of the rest."""
    rng = random.Random(seed)
    bounds = [2 + (statements - 1) * i // slices for i in range(slices + 1)]
    return [1] + [rng.randrange(low, high) for low, high in itertools.pairwise(bounds)]


def test_kill_points_are_distinct_seeded_and_spread_over_the_run() -> None:
    points = kill_points(418)
    assert points == kill_points(418) and points != kill_points(418, seed=KILL_SEED + 1)
    assert len(set(points)) == len(points) == KILL_SLICES + 1
    assert points == sorted(points) and points[0] == 1 and points[-1] <= 418
    assert points[1] < 2 + 418 // KILL_SLICES and points[-1] >= 418 - 418 // KILL_SLICES - 1


def test_the_uninterrupted_run_folds_and_finishes(driver: Driver, expected: dict[str, Any]) -> None:
    notes = [r for r in expected["records"]["reader"] if r.startswith('{"first_index"')]
    copies = [r for r in expected["records"]["reader"] if '"clipped_from":' in r and '"clipped_from":null' not in r]
    assert expected["status"] == "ok" and notes and copies and driver.statements > 200
    masked = [r for r in expected["records"]["masker"] if r.startswith('{"first_index"')]
    assert len(masked) >= 3, "each read round of the after-read node is folded into a note of its own"


@pytest.mark.slow
@pytest.mark.parametrize("point", range(KILL_SLICES + 1))
def test_sigkill_at_a_statement_then_resume_equals_the_uninterrupted_run(
    driver: Driver, expected: dict[str, Any], tmp_path: Path, point: int
) -> None:
    kill_at = kill_points(driver.statements)[point]
    where = f"kill point {point}: statement {kill_at} of {driver.statements} (seed {KILL_SEED})"
    store = tmp_path / "s.db"
    killed = driver.command("run", str(driver.scenario), "--store", str(store), "--quiet", kill_at=kill_at)
    assert killed["returncode"] == -signal.SIGKILL, f"{where}: {killed}"
    resumed = driver.command("resume", str(store), "--quiet")
    assert resumed["returncode"] == 0, f"{where}: {resumed}"
    assert outcome_of(store) == expected, where


@pytest.mark.slow
def test_a_kill_between_a_summary_and_its_fold_commit_resumes_without_sending_it_again(
    driver: Driver, expected: dict[str, Any], tmp_path: Path
) -> None:
    # The window a loaded machine's writer opens (it then commits a summary's unit alone): the summary
    # request was answered and stored, its fold not committed. The resumed fold uses the stored answer:
    # the same records, one summary request, its usage counted once.
    store = tmp_path / "s.db"
    killed = driver.command("run", str(driver.scenario), "--store", str(store), "--quiet", after_summary=True)
    assert killed["returncode"] == -signal.SIGKILL, killed
    from runtime.store.reader import StoreReader

    with StoreReader(store) as reader:
        assert [r.node_id for r in reader.requests() if r.status == "sent"].count(None) == 1
    resumed = driver.command("resume", str(store), "--quiet")
    assert resumed["returncode"] == 0, resumed
    assert outcome_of(store) == expected


@pytest.mark.slow
def test_a_resume_killed_in_turn_is_resumed_again(driver: Driver, expected: dict[str, Any], tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    first, second = driver.statements // 3, driver.statements // 4
    where = f"run killed at statement {first}, its resume at statement {second}"
    killed = driver.command("run", str(driver.scenario), "--store", str(store), "--quiet", kill_at=first)
    assert killed["returncode"] == -signal.SIGKILL, f"{where}: {killed}"
    again = driver.command("resume", str(store), "--quiet", kill_at=second)
    assert again["returncode"] == -signal.SIGKILL, f"{where}: {again}"
    resumed = driver.command("resume", str(store), "--quiet")
    assert resumed["returncode"] == 0, f"{where}: {resumed}"
    assert outcome_of(store) == expected, where
    replay = driver.command("replay", str(store), "--all")
    # ``requests`` counts every sent request, side summaries included (outcome_of checks it against the rows).
    assert (
        replay["returncode"] == 0
        and f"{expected['requests']} of {expected['requests']} requests verified" in (replay["log"])
    )


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(EXTERNAL_KILLS))
def test_sigkill_from_outside_at_seeded_moments(
    driver: Driver, expected: dict[str, Any], tmp_path: Path, attempt: int
) -> None:
    # The warm run writes its store for about 0.15 s after creating it: these moments fall inside.
    moment = random.Random(KILL_SEED + attempt).uniform(0.0, 0.08)
    where = f"killed from outside {moment:.4f} s after its store appeared (seed {KILL_SEED + attempt})"
    store = tmp_path / "s.db"
    killed = driver.command("run", str(driver.scenario), "--store", str(store), "--quiet", kill_after=moment)
    assert killed["returncode"] == -signal.SIGKILL, f"{where}: the run was not killed: {killed}"
    resumed = driver.command("resume", str(store), "--quiet")
    assert resumed["returncode"] == 0 and "nothing to resume" not in resumed["log"], f"{where}: {resumed}"
    assert outcome_of(store) == expected, where


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        return serve(Path(argv[1]), Path(argv[2]))
    raise SystemExit(f"usage: {Path(__file__).name} serve DIRECTORY SCENARIO (got {argv!r})")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
