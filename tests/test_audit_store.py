"""A store file from elsewhere (edited, corrupted, made up) given to the store commands: a message, never a traceback.

An outside audit mutated each column of a real store to values of other
types. Before: a blob where text belongs was a ``TypeError`` traceback, text
in an integer column a traceback inside resume, a value nested thousands deep
a ``RecursionError``, an unhashable set member a ``TypeError``, and a stored
type naming ``runtime.cli.__main__`` imported that module, which runs the
command line again with the process's own arguments (then a ``SystemExit``).
"""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from runtime.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["inspect"], ["replay", "--all"], ["events"], ["resume", "--quiet"])


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("audit-store") / "run.db"
    argv = ["run", str(ROOT / "scenarios" / "quickstart.toml"), "--provider", "scripted", "--quiet"]
    assert main([*argv, "--store", str(store)], out=io.StringIO(), err=io.StringIO()) == 0
    return store


def corrupted(stored_run: Path, tmp_path: Path, sql: str, value: object) -> Path:
    copy = tmp_path / "copy.db"
    shutil.copy(stored_run, copy)
    connection = sqlite3.connect(copy)
    connection.execute(sql, (value,))
    connection.commit()
    connection.close()
    return copy


def run_cli(command: list[str], store: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([command[0], str(store), *command[1:]], out=out, err=err)
    return code, err.getvalue()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize(
    ("sql", "value", "named"),
    [
        (
            "UPDATE contents SET content = ? WHERE rowid = 1",
            b"\x00\xff",
            "table contents, row 1: column content holds a blob value where the schema has TEXT",
        ),
        (
            "UPDATE branches SET turns_completed = ? WHERE rowid = 1",
            "many",
            "table branches, row 1: column turns_completed holds a text value where the schema has INTEGER",
        ),
        (
            "UPDATE meta SET value = ? WHERE key = 'scenario_path'",
            b"scenarios/quickstart.toml",
            "table meta, row 3: column value holds a blob value where the schema has TEXT",
        ),
    ],
    ids=["blob-for-text", "text-for-integer", "blob-path"],
)
def test_a_value_of_the_wrong_sqlite_type_is_named_by_table_row_and_column(
    stored_run: Path, tmp_path: Path, command: list[str], sql: str, value: object, named: str
) -> None:
    store = corrupted(stored_run, tmp_path, sql, value)
    code, err = run_cli(command, store)
    assert code == 2
    assert err == f"foldline: {store}: not a foldline store ({named})\n"


@pytest.mark.parametrize("depth", [300, 5000])
def test_a_stored_value_nested_too_deep_is_named(stored_run: Path, tmp_path: Path, depth: int) -> None:
    store = corrupted(stored_run, tmp_path, "UPDATE states SET state = ? WHERE rowid = 1", "[" * depth + "]" * depth)
    code, err = run_cli(["inspect"], store)
    assert code == 1 and "Traceback" not in err
    assert err.startswith(f"foldline: {store}: malformed store: branch ")
    assert err.endswith("ContextState: stored text is not JSON (JSON nested deeper than 200 levels)\n")


def test_the_stored_json_bound_is_200_levels_whatever_brackets_its_strings_hold() -> None:
    from runtime.store.codec import MAX_STORED_JSON_DEPTH, loads_json

    assert MAX_STORED_JSON_DEPTH == 200
    assert loads_json("[" * 200 + "]" * 200) is not None
    with pytest.raises(ValueError, match="JSON nested deeper than 200 levels"):
        loads_json("[" * 201 + "]" * 201)
    with pytest.raises(ValueError, match="JSON nested deeper than 200 levels"):
        loads_json('{"a":' * 201 + "1" + "}" * 201)
    shallow = json.dumps({"text": "[{" * 500, "list": [[1], [2], {"k": [3]}]})
    assert loads_json(shallow) == json.loads(shallow)


def test_a_deep_tools_list_is_named_by_every_reader(stored_run: Path, tmp_path: Path) -> None:
    store = corrupted(stored_run, tmp_path, "UPDATE branches SET tools = ? WHERE rowid = 1", "[" * 5000 + "]" * 5000)
    for command in COMMANDS[:2]:
        code, err = run_cli(command, store)
        assert code == 1 and "Traceback" not in err
        assert "is not JSON (JSON nested deeper than 200 levels)" in err


def test_a_stored_set_of_unhashable_members_is_named(stored_run: Path, tmp_path: Path) -> None:
    state = json.dumps({"$dict": {"a": {"$frozenset": [[1]]}}})
    store = corrupted(stored_run, tmp_path, "UPDATE states SET state = ? WHERE rowid = 1", state)
    code, err = run_cli(["inspect"], store)
    assert code == 1
    assert err.endswith("ContextState.a: {'$frozenset': [[1]]} is not a stored set (unhashable type: 'list')\n")


@pytest.mark.parametrize("name", ["runtime.cli.__main__:X", "runtime._private:X"])
def test_a_stored_type_in_a_private_module_is_refused_unimported(stored_run: Path, tmp_path: Path, name: str) -> None:
    state = json.dumps({"$attrs": name, "fields": {}})
    store = corrupted(stored_run, tmp_path, "UPDATE states SET state = ? WHERE rowid = 1", state)
    code, err = run_cli(["inspect"], store)  # before: the import ran the command line again, then SystemExit
    assert code == 1
    assert err.count("\n") == 1  # one message: the command ran once
    assert err.endswith(f"ContextState: type {name} is not one of foldline's own (runtime, actors, signals)\n")


def test_events_of_an_unknown_type_exit_2_naming_the_types(stored_run: Path) -> None:
    code, err = run_cli(["events", "--type", "ContextDecision,Nope"], stored_run)  # before: nothing printed, exit 0
    assert code == 2
    assert err.startswith("foldline: --type 'Nope': not an event type; types: CacheRewrite, ChildSpawned, ")


@pytest.mark.parametrize("usage", ["-1", '"many"', '{"input_tokens": "x"}', '{"input_tokens": true}'])
def test_a_stored_usage_that_is_no_object_of_counts_is_named_by_resume(
    stored_run: Path, tmp_path: Path, usage: str
) -> None:
    store = corrupted(stored_run, tmp_path, "UPDATE requests SET usage = ? WHERE rid = 1", usage)
    connection = sqlite3.connect(store)
    connection.execute("DELETE FROM events WHERE type = 'RunFinished'")  # a run that stopped: resume plans it
    connection.commit()
    connection.close()
    code, err = run_cli(["resume", "--quiet", "--provider", "scripted"], store)  # before: AttributeError traceback
    assert code == 1
    assert err.startswith(f"foldline: {store}: cannot resume: request ")
    assert err.endswith(f"stored usage {usage!r} is not an object of token counts\n")


def test_an_event_nested_too_deep_is_named_by_events(stored_run: Path, tmp_path: Path) -> None:
    store = corrupted(stored_run, tmp_path, "UPDATE events SET body = ? WHERE rowid = 3", "[" * 5000 + "]" * 5000)
    code, err = run_cli(["events"], store)  # before: a RecursionError traceback
    assert code == 1
    assert err == f"foldline: malformed store: {store}: events row 3: JSON nested too deep\n"


def test_a_follower_scans_the_store_types_once_not_at_every_poll(
    stored_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import runtime.store.schema as schema
    from runtime.store.events_sink import read_events

    scans: list[str] = []
    scan = schema.check_column_types
    monkeypatch.setattr(
        schema, "check_column_types", lambda connection, label: scans.append(label) or scan(connection, label)
    )
    first = list(read_events(stored_run))
    later = list(read_events(stored_run, after_rowid=first[-1][0], order="rowid", check_types=False))
    assert first and later == [] and scans == [str(stored_run)]  # a 100,000-event store scans in about 0.2 s


def test_run_store_on_a_file_that_is_no_store_says_so_and_keeps_it(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    argv = [
        "run",
        str(ROOT / "scenarios" / "quickstart.toml"),
        "--provider",
        "scripted",
        "--quiet",
        "--store",
        str(notes),
    ]
    assert main(argv, out=out, err=err) == 2  # before: "already holds a run; continue it with foldline resume"
    assert (
        err.getvalue() == f"foldline: {notes}: is a file that is not a store (it is left as it is); name another path\n"
    )
    assert notes.read_text(encoding="utf-8") == "my notes\n"
