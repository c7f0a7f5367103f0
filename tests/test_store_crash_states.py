"""A store as a killed writer leaves it on disk, built directly (no kill, no clock): every reader and resume work.

Each state is made the way a SIGKILL makes it: a connection holds a write
transaction whose pages SQLite has already spilled to disk (its cache is two
pages), and the store's files are copied as they are at that moment; the copy
is what the disk holds when the process dies there (no lock is held on it).

- a *hot rollback journal* over a store in rollback-journal mode: what builds
  before WAL-at-creation left when killed while the first writer switched
  the store to WAL (a read-only connection answers SQLITE_READONLY_ROLLBACK,
  "attempt to write a readonly database": the resume failure this guards);
- a WAL holding an unfinished transaction, with and without its index
  (``-shm``), or with an index of zeros;
- a store killed before its creation finished (only ``<store>.creating``).

Each reader (``resume``, ``replay --all``, ``events``, ``inspect``, ``report``)
must read the store as it was before the unfinished write, and ``resume``
must finish the run.
"""

from __future__ import annotations

import io
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from runtime.cli.main import main as foldline
from runtime.cli.store import main
from runtime.store.errors import NotAStore
from runtime.store.journal import RunStore
from runtime.store.reader import StoreReader
from runtime.store.schema import CREATING_SUFFIX, SIDECAR_SUFFIXES, open_reader

SCENARIO = """
schema = "foldline.scenario/v1"
name = "crashed-store"
[provider]
kind = "scripted"
model = "claude-haiku-5-5"
[profiles.default]
system = "You read."
tools = ["synthetic_read"]
[[nodes]]
id = "lead"
instruction = "Read and answer."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "a.md", size = 3000 } }] },
  { text = "Read." },
]
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def store_files(store: Path) -> list[Path]:
    return [store, *(store.with_name(store.name + suffix) for suffix in SIDECAR_SUFFIXES)]


def copy_as_killed(store: Path, into: Path) -> Path:
    """Copy the store's files as they are on disk now (what a SIGKILL at this moment leaves)."""
    into.mkdir()
    for file in store_files(store):
        if file.exists():
            shutil.copyfile(file, into / file.name)
    return into / store.name


def read_only_error(store: Path) -> str | None:
    """What a plain read-only SQLite connection answers to reading the store (None: it reads)."""
    connection = sqlite3.connect(store.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        connection.execute("SELECT count(*) FROM meta").fetchone()
    except sqlite3.Error as exc:
        return str(getattr(exc, "sqlite_errorname", exc))
    finally:
        connection.close()
    return None


def unfinished_write(connection: sqlite3.Connection) -> None:
    """Begin a write that would ruin the store if it showed, and make SQLite spill it to disk."""
    connection.execute("PRAGMA cache_size=2")
    connection.execute("BEGIN IMMEDIATE")
    connection.execute("UPDATE meta SET value = 'ruined' WHERE key = 'scenario_text'")
    connection.executemany(
        "INSERT INTO events(run_id, seq, type, body) VALUES ('junk', ?, 'Junk', ?)",
        [(seq, "x" * 3000) for seq in range(200)],
    )


def hot_journal(store: Path, into: Path) -> Path:
    connection = sqlite3.connect(store, isolation_level=None)
    try:
        assert connection.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
        unfinished_write(connection)
        crashed = copy_as_killed(store, into)
        connection.execute("ROLLBACK")
    finally:
        connection.close()
    assert (into / (store.name + "-journal")).exists()
    assert read_only_error(crashed) == "SQLITE_READONLY_ROLLBACK"  # the state the crash test met
    return crashed


def _wal_with_unfinished_write(store: Path, into: Path, index: Callable[[Path], None]) -> Path:
    connection = sqlite3.connect(store, isolation_level=None)
    try:
        assert connection.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
        unfinished_write(connection)
        crashed = copy_as_killed(store, into)
        connection.execute("ROLLBACK")
    finally:
        connection.close()
    wal = crashed.with_name(crashed.name + "-wal")
    assert wal.stat().st_size > 100_000  # the unfinished transaction's spilled frames are in it
    index(crashed.with_name(crashed.name + "-shm"))
    return crashed


def wal_unfinished(store: Path, into: Path) -> Path:
    return _wal_with_unfinished_write(store, into, lambda shm: None)


def wal_unfinished_without_index(store: Path, into: Path) -> Path:
    return _wal_with_unfinished_write(store, into, lambda shm: shm.unlink())


def wal_unfinished_zeroed_index(store: Path, into: Path) -> Path:
    return _wal_with_unfinished_write(store, into, lambda shm: shm.write_bytes(bytes(shm.stat().st_size)))


STATES = {
    "hot-journal": hot_journal,
    "wal-unfinished": wal_unfinished,
    "wal-unfinished-no-index": wal_unfinished_without_index,
    "wal-unfinished-zeroed-index": wal_unfinished_zeroed_index,
}


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO, encoding="utf-8")
    return path


def created_store(scenario: Path, store: Path) -> Path:
    """A store as ``run`` creates it, before anything of the run is written."""

    async def create() -> None:
        text = scenario.read_text(encoding="utf-8")
        store_ = await RunStore.create(
            store, run_id="run-000000000001", scenario_text=text, scenario_path=str(scenario), provider_kind="scripted"
        )
        await store_.aclose()

    anyio.run(create)
    return store


def readers_agree(crashed: Path, reference: Path, tmp_path: Path) -> None:
    """Every read-only command reads the crashed store as the reference (the store before the unfinished write)."""
    with StoreReader(crashed) as reader:
        assert reader.meta()["scenario_text"] != "ruined"
    with StoreReader(crashed) as got, StoreReader(reference) as want:
        assert got.meta() == want.meta()
        assert [e.to_json() for e in got.events()] == [e.to_json() for e in want.events()]
    for argv in (("events",), ("replay", "--all"), ("inspect",)):
        got_code, got_out, got_err = cli(*argv[:1], str(crashed), *argv[1:])
        want_code, want_out, _ = cli(*argv[:1], str(reference), *argv[1:])
        assert (got_code, got_out) == (want_code, want_out), f"{argv}: {got_err}"
        assert "readonly" not in got_err
    html = tmp_path / "report.html"
    assert foldline(["report", str(crashed), "--html", str(html)], out=io.StringIO(), err=io.StringIO()) == 0
    assert html.stat().st_size > 0


@pytest.mark.parametrize("state", sorted(STATES))
def test_a_store_killed_before_the_run_wrote_anything_is_read_and_resumed(
    state: str, scenario: Path, tmp_path: Path
) -> None:
    store = created_store(scenario, tmp_path / "s.db")
    reference = copy_as_killed(store, tmp_path / "reference")
    crashed = STATES[state](store, tmp_path / "crashed")
    readers_agree(crashed, reference, tmp_path)
    code, out, err = cli("resume", str(crashed), "--quiet")
    assert code == 0, err
    assert out.startswith("run run-000000000001: ok\n")
    with StoreReader(crashed) as reader:
        assert [e.type for e in reader.events()][-1] == "RunFinished"
        assert {r.node_id for r in reader.requests()} == {"lead"}


@pytest.mark.parametrize("state", sorted(STATES))
def test_a_finished_store_with_an_unfinished_write_reads_as_it_was(state: str, scenario: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    code, _, err = cli("run", str(scenario), "--store", str(store), "--quiet")
    assert code == 0, err
    reference = copy_as_killed(store, tmp_path / "reference")
    crashed = STATES[state](store, tmp_path / "crashed")
    readers_agree(crashed, reference, tmp_path)
    code, _, err = cli("resume", str(crashed), "--quiet")
    assert code == 0 and "already finished; there is nothing to resume" in err, err


def test_a_store_is_in_wal_mode_whole_before_it_has_its_name(scenario: Path, tmp_path: Path) -> None:
    """No process killed after the store appears can leave a rollback journal: it never had one."""
    store = created_store(scenario, tmp_path / "s.db")
    assert store.read_bytes()[18:20] == b"\x02\x02"  # the header's WAL mode (read and write versions 2)
    assert not any(f.exists() for f in store_files(store)[1:])
    assert not store.with_name(store.name + CREATING_SUFFIX).exists()
    with StoreReader(store) as reader:
        assert reader.meta()["scenario_text"] == scenario.read_text(encoding="utf-8")


def test_a_creation_killed_before_the_rename_leaves_no_store_and_says_so(scenario: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    # What a kill inside create_store_file leaves: the partial file, its WAL and index.
    partial = tmp_path / "other.db"
    connection = sqlite3.connect(partial, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE stale(x)")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA wal_autocheckpoint=0")
    connection.execute("INSERT INTO stale VALUES (1)")
    for file in store_files(partial):
        if file.exists():
            shutil.copyfile(file, str(file).replace("other.db", "s.db" + CREATING_SUFFIX))
    connection.close()
    assert store.with_name(store.name + CREATING_SUFFIX + "-wal").stat().st_size > 0

    for argv in (("resume", str(store)), ("events", str(store)), ("replay", str(store), "--all")):
        code, _, err = cli(*argv)
        assert code != 0
        assert err.strip().splitlines() == [
            f"foldline: {store}: no such store file: a run stopped while creating it, "
            "before it recorded anything (start the run again)"
        ], argv
    with pytest.raises(NotAStore, match="stopped while creating it"):
        open_reader(store)

    # Running again at the path builds a whole store; the stale WAL beside the partial file is not replayed into it.
    code, _, err = cli("run", str(scenario), "--store", str(store), "--quiet")
    assert code == 0, err
    with StoreReader(store) as reader:
        assert reader.meta()["scenario_path"] == str(scenario)
    connection = sqlite3.connect(store.resolve().as_uri() + "?mode=ro", uri=True)
    assert connection.execute("SELECT name FROM sqlite_master WHERE name = 'stale'").fetchall() == []
    connection.close()
    assert not any(tmp_path.glob("s.db" + CREATING_SUFFIX + "*"))
