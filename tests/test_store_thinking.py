"""A stored run with thinking on replays byte for byte, and a changed thinking block is named (issue 14).

The request row keeps the request's ``thinking`` setting, so replay compiles
what was sent; each thinking block's digest is stored with its reply, so a
block changed in the store is named by message, part and kind.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import anyio
import pytest
from support import copy_store

from runtime.cli import main
from runtime.config.loader import load_scenario
from runtime.scenarios.tools import run_tools
from runtime.store.errors import NotAStore, ReplayError, ReplayMismatch
from runtime.store.reader import StoreReader
from runtime.store.replay import Replayed, replay_all
from runtime.store.run import run_scenario_stored
from runtime.store.schema import SCHEMA_VERSION
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import AssistantResponse, ThinkingPart

THINKING_SCENARIO = """
schema = "foldline.scenario/v1"
name = "thinking"
[provider]
kind = "simulated"
model = "claude-haiku-5-5"
[profiles.default]
system = "You read each document, thinking before each step."
tools = ["synthetic_read"]
max_tokens = 4096
thinking = { type = "enabled", budget_tokens = 1024 }
[[nodes]]
id = "reader"
instruction = "Read the three documents."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a.md", size = 400 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "b.md", size = 400 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "c.md", size = 400 } }] },
  { text = "All three read." },
]
"""


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def thinking_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("thinking")
    scenario = directory / "thinking.toml"
    scenario.write_text(THINKING_SCENARIO)
    store = directory / "thinking.db"
    code, out, err = cli("run", str(scenario), "--store", str(store), "--quiet")
    assert code == 0, err + out
    return store


def test_every_request_of_a_thinking_run_replays_to_its_digest(thinking_store: Path) -> None:
    with StoreReader(thinking_store) as reader:
        rows = reader.requests()
        results = replay_all(reader)
    assert len(rows) == 4 and all(row.thinking_json is not None for row in rows)
    assert json.loads(rows[0].thinking_json or "") == {"type": "enabled", "budget_tokens": 1024}
    assert all(isinstance(r, Replayed) for r in results), [str(r) for r in results if not isinstance(r, Replayed)]
    last = results[-1]
    assert isinstance(last, Replayed)
    payload = last.request.payload()
    assert payload["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    given_back = [b for m in payload["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert [b["type"] for b in given_back].count("thinking") == 3  # every earlier reply's block, signature included
    assert all(b["signature"] for b in given_back if b["type"] == "thinking")
    code, out, err = cli("replay", str(thinking_store), "--all")
    assert code == 0 and "4 of 4 requests verified" in out, err
    code, out, err = cli("replay", str(thinking_store), "--request", rows[-1].request_id)
    assert code == 0 and json.loads(out)["thinking"] == {"type": "enabled", "budget_tokens": 1024}


def test_resume_and_inspect_of_a_finished_thinking_run_verify(thinking_store: Path) -> None:
    code, _out, err = cli("resume", str(thinking_store), "--quiet")
    assert code == 0 and "nothing to resume" in err and "4 of 4 requests verified" in err
    code, out, err = cli("inspect", str(thinking_store), "--branch", "reader")
    assert code == 0 and "synthetic_read result" in out, err


def _first_thinking_block(connection: sqlite3.Connection) -> tuple[str, str, str]:
    """(message id, content SHA-256, content) of the first stored reply carrying a thinking block."""
    return connection.execute(
        "SELECT t.message_id, m.sha256, c.content FROM thinking_blocks t JOIN messages m ON m.id = t.message_id "
        "JOIN contents c ON c.sha256 = m.sha256 ORDER BY m.rowid LIMIT 1"
    ).fetchone()


def _changed(content: str) -> str:
    value = json.loads(content)
    value["parts"][0]["thinking"] += " (edited)"
    return canonical_json(value)


def test_a_thinking_block_changed_in_the_store_is_named(thinking_store: Path, tmp_path: Path) -> None:
    store = copy_store(thinking_store, tmp_path)
    connection = sqlite3.connect(store)
    message_id, sha, content = _first_thinking_block(connection)
    with connection:
        connection.execute("UPDATE contents SET content = ? WHERE sha256 = ?", (_changed(content), sha))
    connection.close()
    with StoreReader(store) as reader:
        results = replay_all(reader)
    failed = [r for r in results if isinstance(r, ReplayError)]
    assert len(failed) == 3  # every request that gave the block back (the first carried no reply)
    for error in failed:
        assert f"message {message_id}: its thinking block (part 0) is changed in the store" in str(error)
    code, out, err = cli("replay", str(store), "--all")
    assert code == 1 and "its thinking block (part 0) is changed" in out + err


def test_a_thinking_block_rewritten_with_a_matching_digest_is_named(thinking_store: Path, tmp_path: Path) -> None:
    """A forgery that keeps the message's own digest consistent still differs from the block's stored digest."""
    store = copy_store(thinking_store, tmp_path)
    connection = sqlite3.connect(store)
    message_id, sha, content = _first_thinking_block(connection)
    forged = _changed(content)
    new_sha = sha256_hex(forged)
    with connection:
        connection.execute("PRAGMA foreign_keys=OFF")
        connection.execute("UPDATE contents SET content = ?, sha256 = ? WHERE sha256 = ?", (forged, new_sha, sha))
        connection.execute("UPDATE messages SET sha256 = ? WHERE id = ?", (new_sha, message_id))
    connection.close()
    with StoreReader(store) as reader:
        failed = [r for r in replay_all(reader) if isinstance(r, ReplayError)]
    assert failed and all(isinstance(r, ReplayMismatch) for r in failed)
    assert all(f"message {message_id}: its thinking block (part 0) is changed" in str(r) for r in failed)


def test_a_store_of_the_previous_schema_is_refused_naming_both_versions(thinking_store: Path, tmp_path: Path) -> None:
    store = copy_store(thinking_store, tmp_path)
    connection = sqlite3.connect(store)
    with connection:
        connection.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    connection.close()
    with pytest.raises(NotAStore, match=f"store schema version 1 is not {SCHEMA_VERSION}"):
        StoreReader(store)


async def _stopped_after(scenario: Path, store: Path, responses: int) -> None:
    tools = run_tools(scenario)
    loaded = load_scenario(scenario, tool_names=tools.names())
    seen = 0
    with anyio.CancelScope() as scope:

        def progress(event: object) -> None:
            nonlocal seen
            if getattr(event, "type", None) == "ResponseReceived":
                seen += 1
                if seen >= responses:
                    scope.cancel()

        await run_scenario_stored(loaded, store_path=store, progress=progress, registry=tools.registry(loaded))
    assert scope.cancelled_caught


def test_a_stopped_thinking_run_resumes_giving_back_the_blocks_the_stopped_run_got(tmp_path: Path) -> None:
    """The resumed run's simulator signs with the key of the run (as the real API keeps its own),
    so the blocks signed before the stop are accepted after it, and every request replays."""
    scenario, store = tmp_path / "thinking.toml", tmp_path / "cut.db"
    scenario.write_text(THINKING_SCENARIO)
    anyio.run(_stopped_after, scenario, store, 2)
    with StoreReader(store) as reader:
        before = {
            m.id for b in reader.restore_branches().values() for m in b.view() if isinstance(m, AssistantResponse)
        }
    assert len(before) == 2
    code, out, err = cli("resume", str(store), "--quiet")
    assert code == 0, err + out
    with StoreReader(store) as reader:
        (branch,) = reader.restore_branches().values()
        rows = reader.requests()
        results = replay_all(reader)
    replies = [m for m in branch.view() if isinstance(m, AssistantResponse)]
    assert before < {m.id for m in replies} and len(replies) == 4
    assert all(any(isinstance(p, ThinkingPart) for p in m.parts) for m in replies)
    assert all(isinstance(r, Replayed) for r in results), [str(r) for r in results]
    last = results[-1]
    assert isinstance(last, Replayed) and rows[-1].status == "sent"
    given_back = [b for m in last.request.payload()["messages"] if m["role"] == "assistant" for b in m["content"]]
    assert [b["type"] for b in given_back].count("thinking") == 3  # the stopped run's two blocks among them
