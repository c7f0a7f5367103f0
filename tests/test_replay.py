"""Exact replay: every stored request rebuilds to the digest it was sent with, or fails naming it."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import copy_store, tamper_first_tool_result

from actors.tools import BUILTIN_TOOLS
from runtime.cli.store import main
from runtime.config.loader import load_scenario
from runtime.store.errors import ReplayMismatch, UnknownRecipe
from runtime.store.reader import StoreReader
from runtime.store.replay import Replayed, replay_all
from runtime.store.run import resume_stored_run, run_scenario_stored
from runtime.values.canonical import canonical_json, sha256_hex

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"

# Folds, a clip of an undelivered result, a bounded result, read_result and restore.
RECOVER = """
schema = "foldline.scenario/v1"
name = "recover"
[provider]
kind = "scripted"
model = "claude-haiku-5-5"
[profiles.default]
system = "You read files and answer."
tools = ["synthetic_read"]
max_input_tokens = 20000
context_management = true
prompt_caching = true
fold_policy = "fixed"
[profiles.bounded]
system = "You read files and answer, with bounded results."
tools = ["synthetic_read"]
max_input_tokens = 20000
context_management = true
prompt_caching = true
tool_result_max_chars = 30000
fold_policy = "fixed"
[[nodes]]
id = "clipper"
max_rounds = 30
instruction = "Read and recover."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a.md", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "b.md", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "c.md", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "big.md", size = 70045 } }] },
  { tool_calls = [{ name = "context", arguments = { action = "read_result", index = 9, offset = 30000, limit = 2000 } }] },
  { tool_calls = [{ name = "context", arguments = { action = "restore", index = 5 } }] },
  { tool_calls = [{ name = "context", arguments = { action = "restore", index = 9 } }] },
  { text = "Done." },
]
[[nodes]]
id = "bounded"
profile = "bounded"
max_rounds = 30
instruction = "Read a large file under a bound."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a.md", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "big.md", size = 100045 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "b.md", size = 6000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "c.md", size = 6000 } }] },
  { text = "Done." },
]
"""


def stored_run(scenario_path: Path, store: Path, *, stop_after_responses: int | None = None) -> None:
    scenario = load_scenario(scenario_path, tool_names=BUILTIN_TOOLS.names())

    async def run() -> None:
        seen = 0
        with anyio.CancelScope() as scope:

            def progress(event: Any) -> None:
                nonlocal seen
                if event.type == "ResponseReceived":
                    seen += 1
                    if stop_after_responses is not None and seen >= stop_after_responses:
                        scope.cancel()

            await run_scenario_stored(scenario, store_path=store, progress=progress)

    anyio.run(run)


def verified(store: Path) -> list[Replayed]:
    with StoreReader(store) as reader:
        results = replay_all(reader)
    failures = [r for r in results if not isinstance(r, Replayed)]
    assert not failures, failures
    return results  # type: ignore[return-value]


def replay_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["replay", *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def recover_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("recover")
    scenario = directory / "recover.toml"
    scenario.write_text(RECOVER, encoding="utf-8")
    stored_run(scenario, directory / "r.db")
    return directory / "r.db"


def test_requests_after_folds_clips_bounds_and_restores_rebuild_exactly(recover_store: Path) -> None:
    results = verified(recover_store)
    with StoreReader(recover_store) as reader:
        notes = reader._rows("SELECT COUNT(*) FROM contents WHERE kind = 'note'")[0][0]
        copies = reader._rows('SELECT COUNT(*) FROM contents WHERE content LIKE \'%"clipped_from":"%\'')[0][0]
        bounded = [r for r in reader.requests() if r.result_bound == 30000]
    assert notes >= 1 and copies >= 1 and bounded  # the run folded, clipped and bounded
    assert len(results) == 13
    for result in results:
        assert sha256_hex(result.request.payload_bytes()) == result.row.digest


@pytest.mark.slow
@pytest.mark.parametrize("name, stop_after", [("fold.toml", 23), ("cache.toml", 6)])
def test_shipped_scenarios_replay_after_a_resume(tmp_path: Path, name: str, stop_after: int) -> None:
    store = tmp_path / "s.db"
    stored_run(SCENARIOS / name, store, stop_after_responses=stop_after)
    anyio.run(lambda: resume_stored_run(store))
    results = verified(store)
    with StoreReader(store) as reader:
        assert any(e.type == "RunFinished" for e in reader.events())
        assert len(results) == len(reader.requests()) > stop_after
    code, out, _ = replay_cli(str(store), "--all")
    assert code == 0 and f"{len(results)} of {len(results)} requests verified" in out


def test_a_resumed_clipping_run_replays(tmp_path: Path) -> None:
    scenario = tmp_path / "recover.toml"
    scenario.write_text(RECOVER, encoding="utf-8")
    stored_run(scenario, tmp_path / "r.db", stop_after_responses=5)
    anyio.run(lambda: resume_stored_run(tmp_path / "r.db"))
    assert len(verified(tmp_path / "r.db")) == 13


def _users_of(store: Path, message_id: str) -> list[str]:
    with StoreReader(store) as reader:
        return [r.label for r in reader.requests() if message_id in r.view_ids]


def test_a_tampered_message_fails_replay_naming_every_request_that_carried_it(
    recover_store: Path, tmp_path: Path
) -> None:
    store = copy_store(recover_store, tmp_path)
    message_id = tamper_first_tool_result(store)
    users = _users_of(store, message_id)
    assert users
    code, out, err = replay_cli(str(store), "--all")
    assert code == 1
    for label in users:
        assert f"request {label}: the store cannot supply its inputs: stored message {message_id}" in err
        assert label not in out
    assert f"{13 - len(users)} of 13 requests verified" in err


def test_a_consistently_rewritten_message_is_a_digest_mismatch(recover_store: Path, tmp_path: Path) -> None:
    store = copy_store(recover_store, tmp_path)
    with StoreReader(store) as reader:
        row = reader.requests()[2]
        original = reader.message(row.view_ids[0])
    forged = json.loads(canonical_json(original.content()))
    forged["text"] = forged["text"] + " (edited)"
    text = canonical_json(forged)
    connection = sqlite3.connect(store)
    with connection:
        connection.execute(
            "INSERT INTO contents(sha256, kind, content) VALUES (?, ?, ?)", (sha256_hex(text), original.kind, text)
        )
        connection.execute("UPDATE messages SET sha256 = ? WHERE id = ?", (sha256_hex(text), original.id))
    connection.close()
    with StoreReader(store) as reader:
        results = replay_all(reader, reader.requests(row.request_id))
    (failure,) = results
    assert isinstance(failure, ReplayMismatch) and failure.request == row.label
    assert f"differs from the recorded {row.digest}" in str(failure)


def test_an_unknown_recipe_version_is_refused_naming_the_request(recover_store: Path, tmp_path: Path) -> None:
    store = copy_store(recover_store, tmp_path)
    connection = sqlite3.connect(store)
    with connection:
        connection.execute("UPDATE requests SET recipe_version = 99 WHERE rid = 4")
    connection.close()
    with StoreReader(store) as reader:
        results = replay_all(reader)
        label = reader.requests("#4")[0].label
    unknown = [r for r in results if isinstance(r, UnknownRecipe)]
    assert len(unknown) == 1 and unknown[0].request == label
    assert "recipe version 99 is not one this build can rebuild" in str(unknown[0])
    code, _, err = replay_cli(str(store), "--request", "#4")
    assert code == 1 and f"request {label}: recipe version 99" in err


def test_malformed_stores_fail_naming_the_request(recover_store: Path, tmp_path: Path) -> None:
    store = copy_store(recover_store, tmp_path)
    with StoreReader(store) as reader:
        row = reader.requests()[3]
    connection = sqlite3.connect(store)
    with connection:
        connection.execute("PRAGMA foreign_keys=OFF")
        connection.execute("DELETE FROM messages WHERE id = ?", (row.view_ids[-1],))
        connection.execute("UPDATE requests SET view_ids = ? WHERE rid = 2", (json.dumps(["not-a-message"]),))
    connection.close()
    code, _, err = replay_cli(str(store), "--all")
    assert code == 1
    assert f"request {row.label}: the store cannot supply its inputs: " in err and "is not in the store" in err
    assert "not-a-message" in err and "are not in branch" in err


def test_one_request_prints_its_exact_payload(recover_store: Path) -> None:
    with StoreReader(recover_store) as reader:
        row = reader.requests()[5]
    code, out, _ = replay_cli(str(recover_store), "--request", row.request_id)
    assert code == 0
    payload = out.rstrip("\n")
    assert sha256_hex(payload) == row.digest and json.loads(payload)["model"] == row.model


def test_request_selection_errors_are_bad_input(recover_store: Path, tmp_path: Path) -> None:
    assert replay_cli(str(recover_store), "--request", "br-nope:1")[0] == 2
    assert replay_cli(str(tmp_path / "missing.db"), "--all")[0] == 2
    store = copy_store(recover_store, tmp_path)
    connection = sqlite3.connect(store)
    with connection:
        first = connection.execute("SELECT request_id FROM requests WHERE rid = 1").fetchone()[0]
        connection.execute("UPDATE requests SET request_id = ? WHERE rid = 2", (first,))
    connection.close()
    code, _, err = replay_cli(str(store), "--request", first)
    assert code == 2 and "names 2 stored requests (#1, #2)" in err
    assert replay_cli(str(store), "--request", "#2")[0] == 0
