"""The store's writer: one dedicated thread, one SQLite connection, units in order.

Callers on the event loop :meth:`SqliteWriter.submit` a *unit*: the SQL
statements of one batch that belongs together. Submitting never blocks. The
thread runs units in submission order; the units it finds queued together are
committed in one transaction (a unit is never split across two, so a crash
leaves each unit wholly written or not at all). ``await writer.flush()`` waits
until everything submitted before it is committed.

If a statement fails, the transaction is rolled back, the writer stops writing
and keeps the error: every later ``submit`` and ``flush`` raises
:class:`StoreWriteFailed` with it, so a run never goes on believing it is
durable when it is not.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from runtime.logs import get_logger
from runtime.store.errors import StoreWriteFailed
from runtime.store.schema import configure

log = get_logger("foldline.store")

Statement = tuple[str, Sequence[Any]]
Unit = Sequence[Statement]

_STOP = object()
MAX_UNITS_PER_TRANSACTION = 512


class SqliteWriter:
    """A writer thread for one store file (an identity object; see the module docstring)."""

    def __init__(self, path: Path, setup: Callable[[sqlite3.Connection], None]) -> None:
        self.path = path
        self._setup = setup
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._closing = False
        self._transactions = 0
        self._thread = threading.Thread(target=self._run, name=f"foldline-store-writer:{path.name}", daemon=True)

    @classmethod
    async def open(cls, path: Path, setup: Callable[[sqlite3.Connection], None]) -> SqliteWriter:
        """Start the thread, open the file and run ``setup`` on it (off the event loop)."""
        writer = cls(path, setup)
        writer._thread.start()
        await anyio.to_thread.run_sync(writer._ready.wait)
        writer._raise_if_failed()
        return writer

    @classmethod
    def open_blocking(cls, path: Path, setup: Callable[[sqlite3.Connection], None]) -> SqliteWriter:
        """Like :meth:`open`, but waits for the file here (a short, one-time wait before any event)."""
        writer = cls(path, setup)
        writer._thread.start()
        writer._ready.wait()
        writer._raise_if_failed()
        return writer

    @property
    def transactions(self) -> int:
        """Transactions committed so far."""
        return self._transactions

    @property
    def failure(self) -> BaseException | None:
        return self._failure

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise StoreWriteFailed(f"{self.path}: the store's writer failed: {self._failure}") from self._failure

    def submit(self, unit: Unit) -> None:
        """Queue one unit (its statements commit together). Never blocks."""
        self._raise_if_failed()
        if self._closing:
            raise StoreWriteFailed(f"{self.path}: the store is closed; nothing more can be written")
        if unit:
            self._queue.put(tuple(unit))

    async def flush(self) -> None:
        """Wait until every unit submitted so far is committed."""
        self._raise_if_failed()
        if self._closing and not self._thread.is_alive():
            return
        done = threading.Event()
        self._queue.put(done)
        await anyio.to_thread.run_sync(done.wait)
        self._raise_if_failed()

    def close(self) -> None:
        """Stop after the queued units are written (does not wait; see :meth:`aclose`)."""
        if not self._closing:
            self._closing = True
            self._queue.put(_STOP)

    async def aclose(self) -> None:
        """Write what is queued, stop the thread and wait for it."""
        self.close()
        await anyio.to_thread.run_sync(self._thread.join)
        self._raise_if_failed()

    # -- the thread -----------------------------------------------------------------------------

    def execute_unit(self, connection: sqlite3.Connection, unit: Unit) -> None:
        """Run one unit's statements (inside the open transaction)."""
        for sql, params in unit:
            connection.execute(sql, params)

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            connection = sqlite3.connect(self.path, isolation_level=None)
            configure(connection)
            self._setup(connection)
        except Exception as exc:  # reported to the opener through _failure
            self._failure = exc
            self._ready.set()
            if connection is not None:
                connection.close()
            return
        self._ready.set()
        stopping = False
        try:
            while not stopping:
                group = [self._queue.get()]
                while len(group) < MAX_UNITS_PER_TRANSACTION:
                    try:
                        group.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                units = [item for item in group if isinstance(item, tuple)]
                if units and self._failure is None:
                    self._commit(connection, units)
                for item in group:
                    if isinstance(item, threading.Event):
                        item.set()
                    elif item is _STOP:
                        stopping = True
        finally:
            connection.close()
            self._release_waiters()

    def _commit(self, connection: sqlite3.Connection, units: Sequence[Unit]) -> None:
        try:
            connection.execute("BEGIN IMMEDIATE")
            for unit in units:
                self.execute_unit(connection, unit)
            connection.execute("COMMIT")
            self._transactions += 1
        except Exception as exc:  # kept and raised to every later caller; nothing more is written
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            self._failure = exc
            log.error("store write failed; the store stops writing", path=str(self.path), error=repr(exc))

    def _release_waiters(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if isinstance(item, threading.Event):
                item.set()
