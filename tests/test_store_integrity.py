"""Issue 28, items 6, 15 and 16: what a store holds is checked before it is believed.

- 6: the resolved workspace root is stored; a resume whose root is gone or
  resolves elsewhere (resumed from another directory) is refused, naming both.
- 15: every stored input has a digest checked on resume and replay (two
  flipped bits once raised a resumed run's ceiling from 20,000 to 60,000 with
  exit 0); a report rebuilt from events that miss stored requests says so.
- 16: damage in the stored scenario names the store, not the user's file.

Real stores: each run goes through ``run_scenario_stored`` (a real SQLite
file) on the scripted provider (the simulator's code in process).
"""

from __future__ import annotations

import io
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.cli.main import main
from runtime.config.loader import load_scenario
from runtime.scenarios.tools import run_tools
from runtime.store.errors import StoreCorrupt, StoreError
from runtime.store.integrity import INPUTS_DIGEST_KEY, WORKSPACE_ROOT_KEY, inputs_digest
from runtime.store.reader import StoreReader
from runtime.store.replay import replay_all
from runtime.store.run import report_from_store, resume_stored_run, run_scenario_stored

SCENARIO = """schema = "foldline.scenario/v1"
name = "pinned"
[run]
workspace = "ws"
[provider]
kind = "scripted"
model = "claude-haiku-5-5"
[profiles.default]
system = "You read files."
tools = ["read_file"]
max_input_tokens = 20000
[[nodes]]
id = "a"
instruction = "Read notes.txt."
script = [{ tool_calls = [{ name = "read_file", arguments = { path = "notes.txt" } }] }, { text = "A." }]
[[nodes]]
id = "b"
depends_on = ["a"]
instruction = "Read notes.txt again."
script = [{ tool_calls = [{ name = "read_file", arguments = { path = "notes.txt" } }] }, { text = "B." }]
"""


def project(base: Path, note: str) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    (base / "ws").mkdir(exist_ok=True)
    (base / "ws" / "notes.txt").write_text(note, encoding="utf-8")
    (base / "s.toml").write_text(SCENARIO, encoding="utf-8")
    return base


def stopped_run(base: Path, *, finish: bool = False) -> Path:
    """Run ``s.toml`` from ``base`` (the path typed relative, as a user types it); stopped once a is answered."""
    store = base / "run.sqlite3"
    scenario_path = Path("s.toml")
    tools = run_tools(scenario_path)
    scenario = load_scenario(scenario_path, tool_names=tools.names())

    async def go() -> None:
        with anyio.CancelScope() as scope:

            def stop_after_a(event: Any) -> None:
                if not finish and event.type == "ResponseReceived" and event.node_id == "a":
                    scope.cancel()

            await run_scenario_stored(
                scenario, store_path=store, progress=stop_after_a, registry=tools.registry(scenario)
            )

    anyio.run(go)
    return store


def set_meta(store: Path, key: str, value: str) -> None:
    with sqlite3.connect(store) as connection:
        connection.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))


# -- item 6: the workspace root is pinned ---------------------------------------------------------------------


def test_the_resolved_root_is_stored_and_a_resume_from_elsewhere_is_refused_naming_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = project(tmp_path / "here", "the note of the run")
    monkeypatch.chdir(here)
    store = stopped_run(here)
    with StoreReader(store) as reader:
        assert reader.meta()[WORKSPACE_ROOT_KEY] == str((here / "ws").resolve())
    elsewhere = project(tmp_path / "elsewhere", "another project's note")
    monkeypatch.chdir(elsewhere)
    with pytest.raises(StoreError) as refused:
        anyio.run(lambda: resume_stored_run(store))
    message = str(refused.value)
    assert str((here / "ws").resolve()) in message and str((elsewhere / "ws").resolve()) in message
    assert message.startswith(str(store))
    with sqlite3.connect(store) as connection:  # nothing of elsewhere's workspace was read into the store
        texts = [row[0] for row in connection.execute("SELECT content FROM contents")]
    assert not any("another project's note" in text for text in texts)


def test_a_resume_whose_root_is_gone_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = project(tmp_path / "here", "the note")
    monkeypatch.chdir(here)
    store = stopped_run(here)
    shutil.rmtree(here / "ws")
    with pytest.raises(StoreError, match=r"the run's workspace .*ws is gone"):
        anyio.run(lambda: resume_stored_run(store))


def test_resumed_where_it_started_it_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = project(tmp_path / "here", "the note")
    monkeypatch.chdir(here)
    store = stopped_run(here)
    resumed = anyio.run(lambda: resume_stored_run(store))
    assert resumed.report["status"] == "ok"


# -- item 15: every stored input has a digest; a report never counts fewer requests than were sent -------------


def test_two_flipped_bits_in_the_stored_scenario_stop_resume_and_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = project(tmp_path / "here", "the note")
    monkeypatch.chdir(here)
    store = stopped_run(here)
    with StoreReader(store) as reader:
        text = reader.meta()["scenario_text"]
    flipped = text.replace("max_input_tokens = 20000", "max_input_tokens = 60000")  # the audit's damage
    assert flipped != text
    set_meta(store, "scenario_text", flipped)
    with pytest.raises(StoreCorrupt, match=r"stored input 'scenario_text' does not match the digest"):
        anyio.run(lambda: resume_stored_run(store))
    with StoreReader(store) as reader, pytest.raises(StoreCorrupt, match=r"'scenario_text' does not match"):
        replay_all(reader)
    out, err = io.StringIO(), io.StringIO()
    assert main(["replay", str(store), "--all"], out=out, err=err) == 1
    assert f"{store}: stored input 'scenario_text'" in err.getvalue()
    code = main(["resume", str(store), "--quiet"], out=io.StringIO(), err=(err := io.StringIO()))
    assert code != 0 and "'scenario_text' does not match" in err.getvalue()


@pytest.mark.parametrize("key", ["scenario_path", "provider_kind", WORKSPACE_ROOT_KEY, INPUTS_DIGEST_KEY])
def test_every_stored_input_is_covered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str) -> None:
    here = project(tmp_path / "here", "the note")
    monkeypatch.chdir(here)
    store = stopped_run(here)
    with StoreReader(store) as reader:
        meta = reader.meta()
    assert INPUTS_DIGEST_KEY in meta and meta[INPUTS_DIGEST_KEY] == inputs_digest(meta)
    set_meta(store, key, meta[key][:-1] + ("X" if meta[key][-1] != "X" else "Y"))
    with pytest.raises(StoreCorrupt) as refused:
        anyio.run(lambda: resume_stored_run(store))
    assert str(refused.value).startswith(str(store))


def test_a_report_from_events_missing_requests_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = project(tmp_path / "here", "the note")
    monkeypatch.chdir(here)
    store = stopped_run(here, finish=True)
    assert report_from_store(store, "claude-haiku-5-5")["requests"] == 4
    with sqlite3.connect(store) as connection:
        deleted = connection.execute("DELETE FROM events WHERE type = 'ResponseReceived' AND node_id = 'b'").rowcount
    assert deleted == 2
    with pytest.raises(StoreCorrupt, match=r"its events record 2 of the 4 completed requests"):
        report_from_store(store, "claude-haiku-5-5")
    out, err = io.StringIO(), io.StringIO()
    code = main(["report", str(store), "--html", str(tmp_path / "r.html")], out=out, err=err)
    assert code != 0 and "its events record 2 of the 4 completed requests" in err.getvalue()


# -- item 16: damage in the stored scenario names the store ---------------------------------------------------


def test_damage_in_the_stored_scenario_names_the_store_not_the_users_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = project(tmp_path / "here", "the note")
    monkeypatch.chdir(here)
    store = stopped_run(here, finish=True)
    with StoreReader(store) as reader:
        meta = reader.meta()
    damaged = meta["scenario_text"].replace("[[nodes]]", "[[fodes]]", 1)
    set_meta(store, "scenario_text", damaged)
    set_meta(store, INPUTS_DIGEST_KEY, inputs_digest({**meta, "scenario_text": damaged}))  # digest matches
    out, err = io.StringIO(), io.StringIO()
    code = main(["report", str(store), "--html", str(tmp_path / "r.html")], out=out, err=err)
    assert code != 0
    assert f"{store}: stored scenario (run from s.toml)" in err.getvalue()
    assert not err.getvalue().startswith("foldline: s.toml")
