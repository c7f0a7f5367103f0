"""A durable sink for the signal stream in SQLite, beside the JSON Lines one.

:class:`SqliteSink` writes every event of a bus into the ``events`` table of a
foldline store (:mod:`runtime.store.schema`): the envelope's fields as columns
for lookups and the whole envelope as canonical JSON, through a ``block``
handler so it never loses an event. Writing happens on the store's writer
thread, never on the event loop.

It writes into either

- a :class:`EventTarget`, such as a run's :class:`~runtime.store.journal.RunStore`
  (``SqliteSink(store)``): the run's signals then sit beside its branches and
  requests, and a response's usage event commits with its batch; or
- a file of its own (``SqliteSink(path)``), like ``JsonlSink``: the file is
  created with the store schema (refused if it already holds events) and
  closed when the bus closes; ``await sink.aclose()`` waits for the last write.

:func:`read_events` reads a store's events back, oldest first.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import attrs

from signals.bus import BusClosedError, Gap, SignalBus, Subscription
from signals.envelope import Event, InvalidEventError

if TYPE_CHECKING:
    from runtime.store.writer import SqliteWriter


class EventTarget(Protocol):
    """Where a :class:`SqliteSink` hands events; every method is called on the event loop and must not block."""

    def events_attached(self) -> None: ...

    def write_event(self, event: Event) -> None: ...

    def events_closed(self) -> None: ...


@attrs.define(eq=False)
class _EventFile:
    """An :class:`EventTarget` writing into a store file of its own."""

    path: Path
    _writer: SqliteWriter | None = attrs.field(default=None, init=False)

    def open(self) -> None:
        from runtime.store.schema import create_schema, resolve_store_path
        from runtime.store.writer import SqliteWriter

        file = resolve_store_path(self.path)
        if file.exists() and file.stat().st_size > 0:
            connection = sqlite3.connect(file)
            try:
                count = connection.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            except sqlite3.DatabaseError as exc:
                raise InvalidEventError(f"SqliteSink({str(self.path)!r}): not a foldline store ({exc})") from exc
            finally:
                connection.close()
            if count:
                raise InvalidEventError(f"SqliteSink({str(self.path)!r}): the file already holds {count} events")
        self._writer = SqliteWriter.open_blocking(file, create_schema)

    def events_attached(self) -> None:
        """Nothing to pair: a file of its own holds only events."""

    def write_event(self, event: Event) -> None:
        from runtime.store.journal import event_row

        assert self._writer is not None
        self._writer.submit([event_row(event)])

    def events_closed(self) -> None:
        if self._writer is not None:
            self._writer.close()

    async def aclose(self) -> None:
        if self._writer is not None:
            await self._writer.aclose()


@attrs.define(eq=False)
class SqliteSink:
    """Writes a bus's events into a SQLite store. See the module docstring."""

    target: EventTarget | str | os.PathLike[str]
    _resolved: EventTarget | None = attrs.field(default=None, init=False)
    _subscription: Subscription | None = attrs.field(default=None, init=False)
    _events: int = attrs.field(default=0, init=False)

    @property
    def events_written(self) -> int:
        """Events handed to the store so far (durable once the store flushes)."""
        return self._events

    def attach(self, bus: SignalBus) -> Subscription:
        """Write every event ``bus`` publishes from now on; return the subscription."""
        if self._subscription is not None:
            raise RuntimeError("this SqliteSink is already attached; make a new sink for another bus")
        if not bus.is_open:
            raise BusClosedError(f"SqliteSink: the bus for run {bus.run_id!r} is not open")
        if isinstance(self.target, (str, os.PathLike)):
            event_file = _EventFile(Path(self.target))
            event_file.open()
            target: EventTarget = event_file
        else:
            target = self.target
        self._resolved = target
        target.events_attached()
        self._subscription = bus.add_handler(
            self._write, policy="block", maxsize=4096, name=f"sqlite:{id(self):x}", on_close=target.events_closed
        )
        return self._subscription

    def _write(self, item: Event | Gap) -> None:
        if not isinstance(item, Event):
            raise RuntimeError(f"SqliteSink received {item!r} on a block subscription")
        assert self._resolved is not None
        self._resolved.write_event(item)
        self._events += 1

    async def aclose(self) -> None:
        """For a sink with a file of its own: wait until its last event is written."""
        if isinstance(self._resolved, _EventFile):
            await self._resolved.aclose()


def read_events(
    path: str | os.PathLike[str],
    *,
    types: Collection[str] | None = None,
    after_rowid: int = 0,
    order: str = "seq",
    check_types: bool = True,
) -> Iterator[tuple[int, Event]]:
    """The events stored at ``path`` as (rowid, event), ordered by ``seq`` or by ``rowid`` (commit order).

    ``types`` keeps only those event types; ``after_rowid`` only events
    committed after that row (``events --follow`` reads in commit order);
    ``check_types=False`` skips the store's type scan (a follower's later polls).
    A stored event that is not a valid event raises
    :class:`~signals.envelope.InvalidEventError` naming its row.
    """
    import json

    from runtime.store.schema import open_reader

    if order not in ("seq", "rowid"):
        raise ValueError(f"order: {order!r} is not 'seq' or 'rowid'")
    connection = open_reader(path, check_types=check_types)
    try:
        # As bytes: a body that is not UTF-8 (a damaged file) is named below, not a decode error in fetchall.
        sql = "SELECT rowid, CAST(body AS BLOB) FROM events WHERE rowid > ?"
        params: list[object] = [after_rowid]
        if types is not None:
            names = sorted(set(types))
            sql += f" AND type IN ({', '.join('?' for _ in names)})"
            params += names
        sql += " ORDER BY run_id, seq" if order == "seq" else " ORDER BY rowid"
        rows = connection.execute(sql, params).fetchall()
    finally:
        connection.close()
    for rowid, body in rows:
        try:
            yield rowid, Event.from_json(json.loads(body.decode("utf-8") if isinstance(body, bytes) else body))
        except UnicodeDecodeError as exc:
            raise InvalidEventError(
                f"{os.fspath(path)}: events row {rowid}: not UTF-8 text (byte {body[exc.start]:#04x} at {exc.start})"
            ) from None
        except (ValueError, TypeError, InvalidEventError) as exc:
            raise InvalidEventError(f"{os.fspath(path)}: events row {rowid}: {exc}") from exc
        except RecursionError:  # a body nested thousands deep (a file from elsewhere)
            raise InvalidEventError(f"{os.fspath(path)}: events row {rowid}: JSON nested too deep") from None
