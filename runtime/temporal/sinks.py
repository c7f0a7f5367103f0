"""Where a Temporal run's events go: the sinks the ``foldline.write_events`` activity writes, once per ``seq``.

A flow workflow numbers its events (``seq``) and hands them, in order and in
batches, to the ``foldline.write_events`` activity, which a worker runs and
Temporal may run again (a lost worker, a timed-out attempt). Every sink
therefore keeps each event once per ``(run_id, seq)``, whatever batches it is
given again:

- ``--signals FILE``: a JSONL file (:func:`append_events`);
- ``--events-db PATH`` or ``--store PATH``: a foldline SQLite store file
  (:class:`SqliteEventSink`; ``foldline events PATH`` reads it), which also
  takes the nodes' request records;
- ``--events-db postgresql://...``: a Postgres table every host reaches
  (:class:`PostgresEventSink`, through psycopg 3 as the Postgres body store):
  ``foldline_events(run_id, seq, type, branch_id, node_id, request_id, body)``.

Another backend is any object with :class:`EventSink`'s method (and a
location scheme in :func:`open_event_sink`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs

from runtime.errors import ConfigError
from runtime.temporal.bodies import postgres_connect, redacted
from signals.events import RunFinished

POSTGRES_SCHEMES = ("postgres://", "postgresql://")


class EventSink(Protocol):
    """A store of a run's events: each kept once per ``(run_id, seq)``."""

    def write(self, events: Sequence[Mapping[str, Any]]) -> int:
        """Keep the events (envelopes as ``Event.to_json()`` gives them) it does not hold yet; return how many were new."""
        ...


@attrs.define(eq=False)
class SqliteEventSink:
    """A foldline store file's ``events`` table (created if the file is new), and its ``requests``."""

    path: Path = attrs.field(converter=Path)

    def write(self, events: Sequence[Mapping[str, Any]]) -> int:
        return insert_events(self.path, [dict(e) for e in events])

    def write_requests(self, requests: Sequence[Mapping[str, Any]]) -> int:
        """Keep the nodes' request records once per request id (see :func:`insert_requests`)."""
        return insert_requests(self.path, [dict(r) for r in requests])


CREATE_EVENTS = (
    "CREATE TABLE IF NOT EXISTS foldline_events (run_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, "
    "branch_id text, node_id text, request_id text, body text NOT NULL, PRIMARY KEY (run_id, seq))"
)


@attrs.define(eq=False)
class PostgresEventSink:
    """Events in a Postgres table every host reaches, one row per ``(run_id, seq)``.

    One connection per process, opened on first use; a batch is one
    transaction of ``INSERT ... ON CONFLICT DO NOTHING`` rows, so a batch
    written again (a retried activity, another worker) adds nothing.
    """

    dsn: str
    _connection: Any = attrs.field(default=None, init=False)

    def _connect(self) -> Any:
        if self._connection is None or self._connection.closed:
            self._connection = postgres_connect(self.dsn, CREATE_EVENTS, "--events-db", "Postgres events sink", "sink")
        return self._connection

    def write(self, events: Sequence[Mapping[str, Any]]) -> int:
        from runtime.values.canonical import canonical_json

        connection = self._connect()
        new = 0
        with connection.transaction():
            for e in events:
                cursor = connection.execute(
                    "INSERT INTO foldline_events (run_id, seq, type, branch_id, node_id, request_id, body) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (run_id, seq) DO NOTHING",
                    (
                        str(e["run_id"]),
                        int(e["seq"]),
                        str(e["type"]),
                        e.get("branch_id"),
                        e.get("node_id"),
                        e.get("request_id"),
                        canonical_json(dict(e)),
                    ),
                )
                new += cursor.rowcount
        return new

    def events(self, run_id: str, after_seq: int = 0) -> list[dict[str, Any]]:
        """A run's events past ``after_seq``, in seq order (each envelope as written); a failed read is a ConfigError."""
        import psycopg

        connection = self._connect()
        try:
            rows = connection.execute(
                "SELECT body FROM foldline_events WHERE run_id = %s AND seq > %s ORDER BY seq", (run_id, after_seq)
            ).fetchall()
        except psycopg.Error as exc:
            raise ConfigError(f"--events-db: cannot read the Postgres sink {redacted(self.dsn)}: {exc}") from None
        return [json.loads(row[0]) for row in rows]

    def follow(
        self, run_id: str, poll_s: float, sleep: Callable[[float], None] = time.sleep
    ) -> Iterator[dict[str, Any]]:
        """A run's events in seq order as they are written, up to its final event (``RunFinished``).

        The table is read by seq every ``poll_s`` seconds; an event is given
        only after every earlier seq, so a batch seen before an earlier one
        waits for it and nothing is skipped. A run that has written nothing
        yet is waited for; one that never finishes is followed until the
        caller stops (Ctrl-C).
        """
        last = 0
        while True:
            for event in self.events(run_id, after_seq=last):
                if int(event["seq"]) != last + 1:
                    break
                last += 1
                yield event
                if event.get("type") == RunFinished.TYPE:
                    return
            sleep(poll_s)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()


def _tail(path: Path) -> tuple[int, int | None]:
    """The seq of the file's last complete event line (0: none), and where a torn last line starts (None: none)."""
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            size = file.tell()
            start = max(0, size - 65536)
            file.seek(start)
            tail = file.read()
    except FileNotFoundError:
        return 0, None
    torn = None if not tail or tail.endswith(b"\n") else start + tail.rfind(b"\n") + 1
    for line in reversed(tail.split(b"\n")[:-1]):
        if line.strip():
            return int(json.loads(line)["seq"]), torn
    return 0, torn


def append_events(path: Path, events: list[dict[str, Any]]) -> int:
    """Append the events whose seq the file does not hold yet, in order; return how many were written.

    A last line torn by a crash (no newline) is cut off first; its event is among the ones written again.
    """
    from runtime.values.canonical import canonical_json

    last, torn = _tail(path)
    fresh = [e for e in events if int(e["seq"]) > last]
    if not fresh:
        return 0
    if torn is not None:  # a write torn by a crash: drop the fragment, its event is written again whole
        os.truncate(path, torn)
    with open(path, "a", encoding="utf-8", newline="\n") as file:
        file.write("".join(canonical_json(e) + "\n" for e in fresh))
        file.flush()
        os.fsync(file.fileno())
    return len(fresh)


def insert_events(path: Path, events: list[dict[str, Any]]) -> int:
    """Insert the events into a foldline store file's ``events`` table once per (run, seq); return how many were new.

    ``foldline events PATH`` reads the file as it reads a local run's store.
    """
    import sqlite3

    from runtime.store.journal import event_row
    from runtime.store.schema import create_schema, resolve_store_path
    from signals.envelope import Event

    connection = sqlite3.connect(resolve_store_path(path))
    try:
        with connection:
            create_schema(connection)
            mark_temporal(connection)
            before = connection.total_changes
            for data in events:
                sql, params = event_row(Event.from_json(data))
                connection.execute(sql.replace("INSERT INTO", "INSERT OR IGNORE INTO", 1), params)
            return connection.total_changes - before
    finally:
        connection.close()


def mark_temporal(connection: Any) -> None:
    """Say in the store's meta that a Temporal run writes it (a follower then follows it to ``RunFinished``)."""
    from runtime.store.run import ENGINE_META_KEY

    connection.execute("INSERT OR IGNORE INTO meta(key, value) VALUES (?, 'temporal')", (ENGINE_META_KEY,))


def prepare_event_sink(location: str) -> None:
    """Before the flow starts: create an ``--events-db`` store file (a Temporal run's), so a follower finds it."""
    import sqlite3

    if is_postgres(location):
        return
    try:
        insert_events(Path(location), [])
    except (sqlite3.Error, OSError) as exc:
        raise ConfigError(f"--events-db: {location!r}: cannot make it a store file: {exc}") from None


def insert_requests(path: Path, requests: list[dict[str, Any]]) -> int:
    """Insert request records into a foldline store file's ``requests`` table once per request id; return how many were new.

    Each item is ``{"branch_id", "record"}`` (the record as the store's codec
    writes it). The check and the insert are one immediate transaction, so a
    batch written again (a retried activity) adds nothing.
    """
    import sqlite3

    from runtime.store.codec import loads_value
    from runtime.store.journal import request_row
    from runtime.store.schema import create_schema, resolve_store_path

    connection = sqlite3.connect(resolve_store_path(path), isolation_level=None)
    try:
        connection.execute("PRAGMA busy_timeout=10000")
        create_schema(connection)
        connection.execute("BEGIN IMMEDIATE")
        new = 0
        for item in requests:
            record = loads_value(item["record"], f"request record of branch {item['branch_id']}")
            if connection.execute("SELECT 1 FROM requests WHERE request_id = ?", (record.request_id,)).fetchone():
                continue
            connection.execute(*request_row(str(item["branch_id"]), record))
            new += 1
        connection.execute("COMMIT")
        return new
    finally:
        connection.close()


def is_postgres(location: str) -> bool:
    return location.startswith(POSTGRES_SCHEMES)


def open_event_sink(location: str) -> EventSink:
    """The sink an ``--events-db`` location names: ``postgresql://...`` (``postgres://``), else a SQLite store file."""
    if not location:
        raise ConfigError("--events-db: empty location (expected a SQLite file or postgresql://...)")
    if is_postgres(location):
        return PostgresEventSink(location)
    if "://" in location:
        raise ConfigError(
            f"--events-db: {redacted(location)!r}: unknown sink scheme (expected a SQLite file or postgresql://...)"
        )
    return SqliteEventSink(Path(location))
