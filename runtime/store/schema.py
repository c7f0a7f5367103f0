"""The store's SQLite schema, and opening a store file.

One SQLite file per run (WAL mode). Tables:

- ``meta``: the run (schema version, run id, scenario text and path, provider).
- ``contents``: each distinct message content once, keyed by its SHA-256.
- ``messages``: message id -> content SHA-256 (ids are random; contents shared).
- ``images``: each distinct image's bytes once, keyed by their SHA-256; a
  content carrying images keeps each image's digest with its data left null
  (:func:`runtime.store.codec.stored_message_content`).
- ``branches``: one row per branch: its parent and how much of the parent's
  record it shares (``fork_length``), its current system message and tools,
  and how many turns it completed.
- ``record``: (branch, full-record index) -> message id, for the messages the
  branch appended itself (the shared prefix lives under the parent).
- ``view_entries``: a branch's current view, position by position.
- ``states``: a branch's context state (tagged JSON).
- ``ledgers`` / ``ledger_rows``: a branch's cache ledger.
- ``requests``: every recorded send: what it was built from (its ``thinking``
  setting included, as canonical JSON), its digest and recipe version, status
  and usage.
- ``thinking_blocks``: the SHA-256 of each ``thinking`` / ``redacted_thinking``
  block of a stored reply, by (message id, part index), so a block changed in
  the store is named by replay (a signed block goes back byte for byte).
- ``events``: the run's signals.
- ``calibration``: the run's scale per model configuration
  (:class:`runtime.measuring.model_calibration.CalibrationBook`), kept for a resumed or
  later run.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from runtime.store.errors import NotAStore

SCHEMA_VERSION = 2
STORE_FILE_NAME = "foldline-store.sqlite3"
"""The file a store gets inside a directory named as the store path."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS contents (
    sha256 TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    content TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    sha256 TEXT NOT NULL REFERENCES contents(sha256)
);
CREATE TABLE IF NOT EXISTS images (
    sha256 TEXT PRIMARY KEY,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS thinking_blocks (
    message_id TEXT NOT NULL REFERENCES messages(id),
    part INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (message_id, part)
);
CREATE TABLE IF NOT EXISTS branches (
    id TEXT PRIMARY KEY,
    created INTEGER NOT NULL,
    parent_id TEXT,
    fork_length INTEGER NOT NULL,
    system_id TEXT,
    tools TEXT NOT NULL,
    turns_completed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS record (
    branch_id TEXT NOT NULL REFERENCES branches(id),
    idx INTEGER NOT NULL,
    message_id TEXT NOT NULL REFERENCES messages(id),
    PRIMARY KEY (branch_id, idx)
);
CREATE TABLE IF NOT EXISTS view_entries (
    branch_id TEXT NOT NULL REFERENCES branches(id),
    pos INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    PRIMARY KEY (branch_id, pos)
);
CREATE TABLE IF NOT EXISTS states (
    branch_id TEXT PRIMARY KEY REFERENCES branches(id),
    state TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledgers (
    branch_id TEXT PRIMARY KEY REFERENCES branches(id),
    watermark REAL,
    max_rows INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger_rows (
    branch_id TEXT NOT NULL REFERENCES branches(id),
    certificate TEXT NOT NULL,
    row TEXT NOT NULL,
    PRIMARY KEY (branch_id, certificate)
);
CREATE TABLE IF NOT EXISTS requests (
    rid INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    branch_id TEXT NOT NULL REFERENCES branches(id),
    node_id TEXT,
    digest TEXT NOT NULL,
    recipe_version INTEGER NOT NULL,
    system_id TEXT,
    tools TEXT NOT NULL,
    view_ids TEXT NOT NULL,
    model TEXT NOT NULL,
    max_tokens INTEGER NOT NULL,
    intent TEXT NOT NULL,
    tool_choice_json TEXT,
    marks TEXT NOT NULL,
    status TEXT NOT NULL,
    usage TEXT,
    record TEXT NOT NULL,
    thinking TEXT
);
CREATE INDEX IF NOT EXISTS requests_by_id ON requests(request_id);
CREATE TABLE IF NOT EXISTS events (
    rowid INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    type TEXT NOT NULL,
    branch_id TEXT,
    node_id TEXT,
    request_id TEXT,
    body TEXT NOT NULL,
    UNIQUE (run_id, seq)
);
CREATE INDEX IF NOT EXISTS events_by_type ON events(type);
CREATE TABLE IF NOT EXISTS calibration (
    model TEXT PRIMARY KEY,
    scale REAL NOT NULL,
    samples INTEGER NOT NULL,
    low REAL
);
"""


def resolve_store_path(path: str | os.PathLike[str]) -> Path:
    """The store file for ``path``: the path itself, or a fixed file name inside a directory."""
    resolved = Path(path)
    if resolved.is_dir():
        return resolved / STORE_FILE_NAME
    return resolved


def configure(connection: sqlite3.Connection) -> None:
    """Pragmas every writing connection uses: WAL, foreign keys, a busy timeout.

    ``synchronous=NORMAL`` in WAL mode survives a crash of the process (the
    case resume is for); a power loss may lose the last transactions but never
    leaves a half-written one.
    """
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("PRAGMA foreign_keys=ON")
    connection.execute("PRAGMA busy_timeout=10000")


def create_schema(connection: sqlite3.Connection) -> None:
    connection.executescript(SCHEMA)
    connection.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))


CREATING_SUFFIX = ".creating"
"""A new store is built in ``<store>.creating`` and renamed into place when whole."""

SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database: its WAL and WAL index, or its rollback journal."""


def create_store_file(file: Path, meta: Mapping[str, str]) -> None:
    """Write a new store (schema, meta, already in WAL mode) beside ``file``, then rename it to ``file``.

    A process killed at any moment leaves either no store at ``file`` or a
    whole one: the schema, the meta and the switch to WAL happen before the
    file has its name. The switch matters: turning a rollback-journal database
    into a WAL one rewrites its header under a rollback journal, and a process
    killed in between leaves a *hot journal*, which SQLite must roll back before
    anyone reads, and which a read-only connection refuses to roll back
    (``SQLITE_READONLY_ROLLBACK``, "attempt to write a readonly database").
    Closing the last connection checkpoints the WAL and removes it, so the file
    renamed is the whole database; leftovers of an earlier killed creation are
    removed first (a stale ``-wal`` would otherwise be replayed into the new file).
    """
    partial = file.with_name(file.name + CREATING_SUFFIX)
    for leftover in (partial, *(partial.with_name(partial.name + suffix) for suffix in SIDECAR_SUFFIXES)):
        leftover.unlink(missing_ok=True)
    connection = sqlite3.connect(partial, isolation_level=None)
    try:
        mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if mode != "wal":
            raise NotAStore(f"{partial}: SQLite refused WAL mode for a new store (journal mode {mode!r})")
        create_schema(connection)
        connection.execute("BEGIN IMMEDIATE")
        connection.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", list(meta.items()))
        connection.execute("COMMIT")
    finally:
        connection.close()
    left = [name for name in SIDECAR_SUFFIXES if partial.with_name(partial.name + name).exists()]
    if left:
        raise NotAStore(f"{partial}: SQLite left {', '.join(left)} beside the new store after closing it; not renamed")
    os.replace(partial, file)


def check_schema(connection: sqlite3.Connection, label: str, *, check_types: bool = True) -> None:
    """Raise :class:`NotAStore` unless the connection holds a store of this schema version
    (and, with ``check_types``, every value is of its column's type: :func:`check_column_types`)."""
    try:
        row = connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise NotAStore(f"{label}: not a foldline store ({exc})") from exc
    if row is None:
        raise NotAStore(f"{label}: not a foldline store (no schema version in its meta table)")
    if row[0] != str(SCHEMA_VERSION):
        raise NotAStore(f"{label}: store schema version {row[0]} is not {SCHEMA_VERSION}, the one this build reads")
    if check_types:
        check_column_types(connection, label)


_STORAGE_CLASSES = {"TEXT": ("text",), "INTEGER": ("integer",), "REAL": ("real", "integer"), "BLOB": ("blob",)}
"""The SQLite storage classes (``typeof``) a column of each declared type may hold."""


@functools.cache
def _schema_columns() -> dict[str, tuple[tuple[str, str, bool], ...]]:
    """Each table of :data:`SCHEMA`: its columns as (name, declared type, NOT NULL); worked out once a process."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.executescript(SCHEMA)
        tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {
            table: tuple(
                (c[1], c[2].upper(), bool(c[3] or c[5])) for c in connection.execute(f"PRAGMA table_info({table})")
            )
            for table in tables
            if not table.startswith("sqlite_")
        }
    finally:
        connection.close()


def _sql_strings(words: tuple[str, ...]) -> str:
    return ", ".join(f"'{word}'" for word in words)


def check_column_types(connection: sqlite3.Connection, label: str) -> None:
    """Raise :class:`NotAStore` naming the first value whose SQLite type is not its column's.

    SQLite keeps any value in any column; a store file from elsewhere (edited,
    corrupted, made up) may hold a blob where the schema says text, or text
    where it says integer. One scan per table reads only each value's type.
    """
    try:
        present = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, columns in _schema_columns().items():
            if table not in present:
                continue
            allowed = [
                (name, declared, (*_STORAGE_CLASSES.get(declared, ()), *(() if required else ("null",))))
                for name, declared, required in columns
                if declared in _STORAGE_CLASSES
            ]
            tests = " OR ".join(f"typeof({name}) NOT IN ({_sql_strings(kinds)})" for name, _, kinds in allowed)
            kinds_found = ", ".join(f"typeof({name})" for name, _, _ in allowed)
            found = connection.execute(f"SELECT rowid, {kinds_found} FROM {table} WHERE {tests} LIMIT 1").fetchone()
            if found is None:
                continue
            for (name, declared, kinds), kind in zip(allowed, found[1:], strict=True):
                if kind not in kinds:
                    what = "no value" if kind == "null" else f"a {kind} value"
                    raise NotAStore(
                        f"{label}: not a foldline store (table {table}, row {found[0]}: column {name} holds {what} "
                        f"where the schema has {declared})"
                    )
    except sqlite3.DatabaseError as exc:
        raise NotAStore(f"{label}: not a foldline store ({exc})") from exc


NEEDS_RECOVERY = frozenset({"SQLITE_READONLY_ROLLBACK", "SQLITE_READONLY_RECOVERY", "SQLITE_READONLY_CANTINIT"})
"""SQLite's answers to a read-only connection that finds a crashed writer's state only a writer may repair:
a hot rollback journal to roll back, or a WAL index to rebuild it cannot write."""


def _connect_read_only(file: Path, label: str) -> sqlite3.Connection:
    try:
        connection = sqlite3.connect(file.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
        connection.execute("PRAGMA busy_timeout=10000")
    except sqlite3.Error as exc:
        raise NotAStore(f"{label}: cannot be opened as a store ({exc})") from exc
    return connection


def recover_after_crash(file: Path, label: str) -> None:
    """Let SQLite repair what a killed writer left: open ``file`` read-write, read, close.

    The first read of a read-write connection rolls back a hot journal and
    rebuilds a WAL index, under SQLite's own locks (safe beside a live writer,
    which never leaves either). Nothing is written that was not already
    committed: an unfinished transaction is undone, as resume would undo it.
    """
    try:
        connection = sqlite3.connect(file.resolve().as_uri() + "?mode=rw", uri=True, isolation_level=None)
        try:
            connection.execute("PRAGMA busy_timeout=10000")
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise NotAStore(
            f"{label}: a process writing this store stopped mid-write, and SQLite must undo that write before "
            f"the store can be read, which needs write access to the store file and its directory ({exc})"
        ) from exc


def _needs_recovery(connection: sqlite3.Connection) -> bool:
    """Read once; True when SQLite says only a read-write connection can make the store readable."""
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        if getattr(exc, "sqlite_errorname", None) in NEEDS_RECOVERY:
            return True
    return False  # any other error is reported by check_schema, naming it


def open_reader(path: str | os.PathLike[str], *, check_types: bool = True) -> sqlite3.Connection:
    """A read-only connection to an existing store; :class:`NotAStore` when there is none.

    ``check_types=False`` skips the scan of :func:`check_column_types` (a
    reader polling a store it already checked, such as ``events --follow``).

    A store whose writer was killed may hold a state a read-only connection
    cannot read past (see :data:`NEEDS_RECOVERY`); it is recovered once by
    :func:`recover_after_crash` and opened again.
    """
    file = resolve_store_path(path)
    label = os.fspath(path)
    if not file.is_file():
        if file.with_name(file.name + CREATING_SUFFIX).exists():
            raise NotAStore(
                f"{label}: no such store file: a run stopped while creating it, before it recorded anything "
                "(start the run again)"
            )
        raise NotAStore(f"{label}: no such store file")
    connection = _connect_read_only(file, label)
    if _needs_recovery(connection):
        connection.close()
        recover_after_crash(file, label)
        connection = _connect_read_only(file, label)
    try:
        check_schema(connection, label, check_types=check_types)
    except BaseException:
        connection.close()
        raise
    return connection
