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
  (:class:`runtime.model_calibration.CalibrationBook`), kept for a resumed or
  later run.
"""

from __future__ import annotations

import os
import sqlite3
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


def check_schema(connection: sqlite3.Connection, label: str) -> None:
    """Raise :class:`NotAStore` unless the connection holds a store of this schema version."""
    try:
        row = connection.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        raise NotAStore(f"{label}: not a foldline store ({exc})") from exc
    if row is None:
        raise NotAStore(f"{label}: not a foldline store (no schema version in its meta table)")
    if row[0] != str(SCHEMA_VERSION):
        raise NotAStore(f"{label}: store schema version {row[0]} is not {SCHEMA_VERSION}, the one this build reads")


def open_reader(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only connection to an existing store; :class:`NotAStore` when there is none."""
    file = resolve_store_path(path)
    if not file.is_file():
        raise NotAStore(f"{os.fspath(path)}: no such store file")
    try:
        connection = sqlite3.connect(file.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None)
        connection.execute("PRAGMA busy_timeout=10000")
    except sqlite3.Error as exc:
        raise NotAStore(f"{os.fspath(path)}: cannot be opened as a store ({exc})") from exc
    check_schema(connection, os.fspath(path))
    return connection
