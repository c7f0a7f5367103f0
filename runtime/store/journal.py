"""The run store: where a run's branches and signals become durable.

:class:`RunStore` is the :class:`~actors.branch.BranchJournal` a run hands its
branches and the target of its :class:`~runtime.store.events_sink.SqliteSink`. Its
methods are called on the event loop and never block: each journal batch is
turned into the SQL of one unit and handed to the store's writer thread
(:mod:`runtime.store.writer`), which commits it in one transaction. The order
of commits is the order of calls, except that a response's usage event joins
its batch (:mod:`runtime.store.pairing`).

What is written:

- a message's content once per distinct content (keyed by SHA-256) and its id
  once; an image's bytes once per distinct image (keyed by SHA-256), however
  many messages carry it; a clone writes only its own messages, its record's shared prefix is
  its parent's (``parent_id``, ``fork_length``);
- views position by position, context states and ledgers whole, every
  :class:`~actors.branch.RequestRecord`, and every event.

``await store.flush()`` waits until everything so far is committed; leaving
``async with`` flushes and closes (shielded from cancellation, so a Ctrl-C
still leaves what was done durable).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs

from actors.branch import (
    Branch,
    Change,
    LedgerSet,
    MessageAdded,
    RequestRecord,
    SetupSet,
    StateSet,
    ViewSet,
)
from runtime.logs import get_logger
from runtime.measuring.model_calibration import CalibrationBook
from runtime.store.codec import dumps_value, ledger_rows_of, stored_message_content, thinking_block_digests
from runtime.store.errors import (
    NotAStore,
    StoreEncodeError,
    StoreError,
    StorePathRefused,
)
from runtime.store.integrity import with_inputs_digest
from runtime.store.lock import WriterLock
from runtime.store.pairing import ResponsePairing, Statement
from runtime.store.reader import CALIBRATION_QUERY, calibration_from_rows
from runtime.store.schema import check_schema, create_store_file, resolve_store_path
from runtime.store.writer import SqliteWriter
from runtime.values.canonical import canonical_json
from runtime.values.messages import AssistantResponse, Message, SystemMessage
from signals.envelope import Event

log = get_logger("foldline.store")


@attrs.define(eq=False)
class _Tracked:
    """What the store must remember of a branch to turn its next change into rows."""

    view_length: int
    open_turn: Any


def _insert_message(message: Message, stored_images: set[str]) -> list[Statement]:
    """The rows of a new message: its content (images apart, each once per store) and its id."""
    content, images = stored_message_content(message)
    statements: list[Statement] = []
    for sha, data in images:
        if sha not in stored_images:
            stored_images.add(sha)
            statements.append(("INSERT OR IGNORE INTO images(sha256, data) VALUES (?, ?)", (sha, data)))
    statements += [
        (
            "INSERT OR IGNORE INTO contents(sha256, kind, content) VALUES (?, ?, ?)",
            (message.sha256, message.kind, content),
        ),
        ("INSERT OR IGNORE INTO messages(id, sha256) VALUES (?, ?)", (message.id, message.sha256)),
    ]
    if isinstance(message, AssistantResponse):
        statements.extend(
            ("INSERT OR IGNORE INTO thinking_blocks(message_id, part, sha256) VALUES (?, ?, ?)", (message.id, i, sha))
            for i, sha in thinking_block_digests(message)
        )
    return statements


def _state_row(branch_id: str, state: Any) -> Statement:
    return (
        "INSERT INTO states(branch_id, state) VALUES (?, ?) "
        "ON CONFLICT(branch_id) DO UPDATE SET state = excluded.state",
        (branch_id, dumps_value(state, f"branch {branch_id} ContextState")),
    )


def _ledger_rows(branch_id: str, ledger: Any) -> list[Statement]:
    statements: list[Statement] = [
        ("DELETE FROM ledger_rows WHERE branch_id = ?", (branch_id,)),
        ("DELETE FROM ledgers WHERE branch_id = ?", (branch_id,)),
    ]
    rows = ledger_rows_of(ledger)
    if rows is not None:
        watermark, max_rows, entries = rows
        statements.append(
            ("INSERT INTO ledgers(branch_id, watermark, max_rows) VALUES (?, ?, ?)", (branch_id, watermark, max_rows))
        )
        statements.extend(
            ("INSERT INTO ledger_rows(branch_id, certificate, row) VALUES (?, ?, ?)", (branch_id, cert, row))
            for cert, row in entries
        )
    return statements


def _request_row(branch_id: str, record: RequestRecord) -> Statement:
    marks = [[list(location), ttl, role] for location, ttl, role in record.marks]
    return (
        "INSERT INTO requests(request_id, branch_id, node_id, digest, recipe_version, system_id, tools, view_ids, "
        "model, max_tokens, intent, tool_choice_json, marks, status, usage, record, thinking) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record.request_id,
            branch_id,
            record.node_id,
            record.digest,
            record.recipe_version,
            record.system_id,
            canonical_json(list(record.tools_json)),
            canonical_json(list(record.view_ids)),
            record.model,
            record.max_tokens,
            record.intent,
            record.tool_choice_json,
            canonical_json(marks),
            record.status,
            canonical_json(dict(record.usage)) if record.usage is not None else None,
            dumps_value(record, f"request {record.request_id}"),
            record.thinking_json,
        ),
    )


def request_row(branch_id: str, record: RequestRecord) -> Statement:
    """The statement that stores one request record of ``branch_id`` (as a run's journal stores it)."""
    return _request_row(branch_id, record)


def event_row(event: Event) -> Statement:
    """The statement that stores one event (its envelope as canonical JSON)."""
    return (
        "INSERT INTO events(run_id, seq, type, branch_id, node_id, request_id, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            event.run_id,
            event.seq,
            event.type,
            event.branch_id,
            event.node_id,
            event.request_id,
            canonical_json(event.to_json()),
        ),
    )


@attrs.define(eq=False)
class RunStore:
    """One run's store, open for writing (see the module docstring)."""

    path: Path
    meta: Mapping[str, str]
    _writer: SqliteWriter
    _lock: WriterLock
    _stored_branches: set[str]
    _next_created: int
    _tracked: dict[str, _Tracked] = attrs.field(factory=dict, init=False)
    _stored_messages: set[str] = attrs.field(factory=set, init=False)
    _stored_images: set[str] = attrs.field(factory=set, init=False)
    _pairing: ResponsePairing = attrs.field(init=False)
    _closed: bool = attrs.field(default=False, init=False)
    calibration: CalibrationBook = attrs.field(factory=CalibrationBook, init=False)
    """The calibration book the store held when it was opened (a resumed run starts from it)."""

    def __attrs_post_init__(self) -> None:
        self._pairing = ResponsePairing(self._writer.submit)

    # -- opening and closing --------------------------------------------------------------------

    @classmethod
    async def create(
        cls,
        path: str | os.PathLike[str],
        *,
        run_id: str,
        scenario_text: str,
        scenario_path: str,
        provider_kind: str,
        extra_meta: Mapping[str, str] | None = None,
    ) -> RunStore:
        """A new store for run ``run_id`` at ``path`` (a file, or a directory to put it in).

        Refuses a path that already holds a run: that one is continued with
        :meth:`open_existing` (``foldline resume``), never overwritten.
        ``extra_meta`` adds keys to the run's meta (the tools a resume must load again).
        """
        file = resolve_store_path(path)
        if not file.parent.is_dir():
            raise StorePathRefused(f"{os.fspath(path)}: the directory {file.parent} does not exist")
        lock = WriterLock.acquire(file)
        try:
            if file.exists() and file.stat().st_size > 0:
                with open(file, "rb") as existing:
                    if existing.read(16) != b"SQLite format 3\x00":
                        raise StorePathRefused(
                            f"{os.fspath(path)}: is a file that is not a store (it is left as it is); name another path"
                        )
                raise StorePathRefused(
                    f"{os.fspath(path)}: already holds a run; continue it with `foldline resume {os.fspath(path)}` "
                    "or name another path"
                )
            meta = with_inputs_digest(  # every stored input, with its digest (runtime.store.integrity)
                {
                    "run_id": run_id,
                    "scenario_path": scenario_path,
                    "scenario_text": scenario_text,
                    "provider_kind": provider_kind,
                    **(extra_meta or {}),
                }
            )

            # Built whole (schema, meta, WAL mode) in a sibling file and renamed into place, so
            # a process killed during creation leaves either no store or a whole one.
            await anyio.to_thread.run_sync(create_store_file, file, meta)
            writer = await SqliteWriter.open(file, _no_setup)
        except BaseException:
            lock.release()
            raise
        return cls(file, meta, writer, lock, set(), 0)

    @classmethod
    async def open_existing(cls, path: str | os.PathLike[str]) -> RunStore:
        """Open a stored run for writing again (to resume it)."""
        file = resolve_store_path(path)
        if not file.is_file():
            raise NotAStore(f"{os.fspath(path)}: no such store file")
        lock = WriterLock.acquire(file)
        loaded: dict[str, Any] = {}

        def setup(connection: Any) -> None:
            check_schema(connection, os.fspath(path))
            loaded["meta"] = dict(connection.execute("SELECT key, value FROM meta").fetchall())
            loaded["branches"] = {row[0] for row in connection.execute("SELECT id FROM branches")}
            loaded["messages"] = {row[0] for row in connection.execute("SELECT id FROM messages")}
            loaded["images"] = {row[0] for row in connection.execute("SELECT sha256 FROM images")}
            loaded["created"] = connection.execute("SELECT COALESCE(MAX(created) + 1, 0) FROM branches").fetchone()[0]
            loaded["calibration"] = calibration_from_rows(
                connection.execute(CALIBRATION_QUERY).fetchall(), os.fspath(path)
            )

        try:
            writer = await SqliteWriter.open(file, setup)
        except BaseException:
            lock.release()
            raise
        store = cls(file, loaded["meta"], writer, lock, loaded["branches"], loaded["created"])
        store._stored_messages = loaded["messages"]
        store._stored_images = loaded["images"]
        store.calibration = loaded["calibration"]
        return store

    async def __aenter__(self) -> RunStore:
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        """Close; when the run failed or was cancelled, what waits for an event that will not come is dropped."""
        with anyio.CancelScope(shield=True):
            if exc is not None:
                dropped = self._pairing.drop_held()
                if dropped:
                    log.warning(
                        "run stopped with responses whose usage events never arrived; "
                        "they are left out as if the process had stopped before them",
                        store=str(self.path),
                        units=dropped,
                    )
            await self.aclose()

    async def flush(self) -> None:
        """Wait until everything reported so far is committed.

        A response batch still waiting for its usage event (and what came
        after it) is not forced out: it commits with the event.
        """
        await self._writer.flush()

    async def aclose(self) -> None:
        """Write everything reported, stop the writer and give up the writer lock."""
        if self._closed:
            return
        self._closed = True
        try:
            self._pairing.release_all()
            await self._writer.aclose()
        finally:
            self._lock.release()

    @property
    def run_id(self) -> str:
        return self.meta["run_id"]

    @property
    def transactions(self) -> int:
        """Transactions the writer has committed (for tests and diagnostics)."""
        return self._writer.transactions

    # -- the branch journal -----------------------------------------------------------------------

    def _message_rows(self, message: Message) -> list[Statement]:
        if message.id in self._stored_messages:
            return []
        self._stored_messages.add(message.id)
        return _insert_message(message, self._stored_images)

    def branch_created(self, branch: Branch) -> None:
        """Store a new branch whole (a clone: only what it does not share); re-attaching is a no-op."""
        self._tracked[branch.id] = _Tracked(len(branch.view_ids()), branch.state.open_turn)
        if branch.id in self._stored_branches:
            return
        parent = branch.parent_id if branch.parent_id in self._stored_branches else None
        start = branch.fork_length if parent is not None else 0
        statements: list[Statement] = []
        system = branch.system
        if system is not None:
            statements += self._message_rows(system)
        statements.append(
            (
                "INSERT INTO branches(id, created, parent_id, fork_length, system_id, tools) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    branch.id,
                    self._next_created,
                    parent,
                    start,
                    system.id if system is not None else None,
                    canonical_json([tool.piece() for tool in branch.tools]),
                ),
            )
        )
        self._next_created += 1
        for index in range(start, branch.record_length()):
            message = branch.message_at(index)
            statements += self._message_rows(message)
            statements.append(
                ("INSERT INTO record(branch_id, idx, message_id) VALUES (?, ?, ?)", (branch.id, index, message.id))
            )
        statements.extend(
            ("INSERT INTO view_entries(branch_id, pos, message_id) VALUES (?, ?, ?)", (branch.id, pos, mid))
            for pos, mid in enumerate(branch.view_ids())
        )
        statements.append(_state_row(branch.id, branch.state))
        statements += _ledger_rows(branch.id, branch.ledger)
        self._stored_branches.add(branch.id)
        self._pairing.batch(branch.id, statements, None)

    def changed(self, branch: Branch, changes: Sequence[Change]) -> None:
        """Store one batch of a branch's changes as one unit (one transaction)."""
        tracked = self._tracked.get(branch.id)
        if tracked is None:
            raise StoreError(f"branch {branch.id} reported changes to a store it was never attached to")
        statements: list[Statement] = []
        awaits: str | None = None
        for change in changes:
            if isinstance(change, MessageAdded):
                message = change.message
                statements += self._message_rows(message)
                statements.append(
                    (
                        "INSERT INTO record(branch_id, idx, message_id) VALUES (?, ?, ?)",
                        (branch.id, change.index, message.id),
                    )
                )
                if change.in_view:
                    statements.append(
                        (
                            "INSERT INTO view_entries(branch_id, pos, message_id) VALUES (?, ?, ?)",
                            (branch.id, tracked.view_length, message.id),
                        )
                    )
                    tracked.view_length += 1
                if isinstance(message, SystemMessage):
                    statements.append(("UPDATE branches SET system_id = ? WHERE id = ?", (message.id, branch.id)))
            elif isinstance(change, ViewSet):
                statements.append(("DELETE FROM view_entries WHERE branch_id = ?", (branch.id,)))
                statements.extend(
                    ("INSERT INTO view_entries(branch_id, pos, message_id) VALUES (?, ?, ?)", (branch.id, pos, mid))
                    for pos, mid in enumerate(change.ids)
                )
                tracked.view_length = len(change.ids)
            elif isinstance(change, StateSet):
                statements.append(_state_row(branch.id, change.state))
                if tracked.open_turn is not None and change.state.open_turn is None:
                    statements.append(
                        ("UPDATE branches SET turns_completed = turns_completed + 1 WHERE id = ?", (branch.id,))
                    )
                tracked.open_turn = change.state.open_turn
            elif isinstance(change, LedgerSet):
                statements += _ledger_rows(branch.id, change.ledger)
            elif isinstance(change, SetupSet):
                statements.append(
                    (
                        "UPDATE branches SET system_id = ?, tools = ? WHERE id = ?",
                        (change.system_id, canonical_json(list(change.tools_json)), branch.id),
                    )
                )
            elif isinstance(change, RequestRecord):
                statements.append(_request_row(branch.id, change))
                if change.status == "sent" and change.usage is not None:
                    awaits = change.request_id
            else:
                raise StoreEncodeError(
                    f"branch {branch.id}: a change of type {type(change).__name__} has no stored form"
                )
        self._pairing.batch(branch.id, statements, awaits)

    # -- the run's calibration ---------------------------------------------------------------------

    def calibration_changed(self, book: CalibrationBook) -> None:
        """Keep the run's calibration book (every model's row), in order with the rest."""
        statements: list[Statement] = [
            (
                "INSERT INTO calibration(model, scale, samples, low) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(model) DO UPDATE SET scale = excluded.scale, samples = excluded.samples, "
                "low = excluded.low",
                (model, entry.scale, entry.samples, entry.low),
            )
            for model, entry in sorted(book.entries.items())
        ]
        self._pairing.event("calibration", None, None, statements)

    # -- the event sink's target ---------------------------------------------------------------------

    def events_attached(self) -> None:
        """A signal sink now feeds this store: pair responses with their usage events."""
        self._pairing.capture_events = True

    def write_event(self, event: Event) -> None:
        self._pairing.event(event.type, event.branch_id, event.request_id, [event_row(event)])

    def events_closed(self) -> None:
        """The signal stream ended; pairing deliberately goes on as before.

        A batch recorded from now on that carries a sent request can never get
        its usage event, so it must not commit alone: it stays held (with what
        comes after it) until the store closes. This happens when a run is
        cancelled: the sink's task may take the cancellation before an engine
        task that had already passed its last checkpoint records its response
        and publishes a usage event no sink will store. The store then exits
        with the cancellation and drops the held batch, as if the process had
        stopped before the response (the resumed run sends it again). After a
        normal end nothing is recorded once the stream has ended.
        """


def _no_setup(connection: Any) -> None:
    """The schema is already in place (see :func:`runtime.store.schema.create_store_file`)."""
