"""``events``: a stored run's signals, filtered by type, followed while a run writes them."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from actors.tools import BUILTIN_TOOLS
from runtime.cli.store import main
from runtime.config.loader import load_scenario
from runtime.store.reader import StoreReader
from runtime.store.run import run_scenario_stored

QUICKSTART = Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.toml"


def events_cli(*args: str) -> tuple[int, list[dict], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["events", *args], out=out, err=err)
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("events") / "q.db"
    scenario = load_scenario(QUICKSTART, tool_names=BUILTIN_TOOLS.names())
    anyio.run(lambda: run_scenario_stored(scenario, store_path=path, provider_kind="scripted"))
    return path


def test_every_event_prints_in_seq_order_as_it_was_published(store: Path) -> None:
    code, printed, _ = events_cli(str(store))
    assert code == 0
    with StoreReader(store) as reader:
        stored = [event.to_json() for event in reader.events()]
    assert printed == stored
    assert [e["seq"] for e in printed] == list(range(1, len(printed) + 1))
    assert printed[0]["type"] == "RunStarted" and printed[-1]["type"] == "RunFinished"


def test_types_filter_and_a_finished_store_ends_a_follow(store: Path) -> None:
    code, printed, _ = events_cli(str(store), "--type", "NodeFinished,RunFinished", "--follow")
    assert code == 0
    assert {e["type"] for e in printed} == {"NodeFinished", "RunFinished"} and len(printed) == 6
    _, only, _ = events_cli(str(store), "--type", "ResponseReceived")
    assert len(only) == 9 and all(e["request_id"] for e in only)


def test_a_missing_store_is_bad_input(tmp_path: Path) -> None:
    code, _, err = events_cli(str(tmp_path / "nope.db"))
    assert code == 2 and "no such store file" in err


@pytest.mark.slow
def test_follow_prints_a_live_run_to_its_end(tmp_path: Path) -> None:
    store = tmp_path / "live.db"
    run = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli.store", "run", str(QUICKSTART), "--store", str(store), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not store.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    follow = subprocess.run(
        [sys.executable, "-m", "runtime.cli.store", "events", str(store), "--follow"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.wait(timeout=120) == 0, run.stderr.read() if run.stderr else ""
    assert follow.returncode == 0, follow.stderr
    printed = [json.loads(line) for line in follow.stdout.splitlines()]
    with StoreReader(store) as reader:
        stored = reader.events()
    assert sorted(e["seq"] for e in printed) == [e.seq for e in stored]


def test_a_postgres_events_table_needs_a_run(tmp_path: Path) -> None:
    """`foldline events postgresql://...` reads one run's events: without --run it exits 2 before any connection."""
    url = f"postgresql://me:s3cret@/postgres?host={tmp_path}"
    code, out, err = events_cli(url)
    assert code == 2 and out == [] and "name one with --run RUN_ID" in err
    code, out, err = events_cli(str(tmp_path / "x.db"), "--run", "r1")  # a store file holds one run
    assert code == 2 and "--run 'r1': only a postgresql://" in err


def test_following_an_unreachable_postgres_table_exits_2_without_the_password(tmp_path: Path) -> None:
    """(tests/test_temporal_postgres.py follows a real table.)"""
    pytest.importorskip("temporalio", reason="a postgresql://... table needs the temporal extra")
    pytest.importorskip("psycopg", reason="a postgresql://... table needs psycopg 3 (in the temporal extra)")
    code, out, err = events_cli(f"postgresql://me:s3cret@/postgres?host={tmp_path}", "--run", "r1", "--follow")
    assert code == 2 and out == [] and "cannot use the Postgres sink postgresql://me:***@" in err
    assert "s3cret" not in err
