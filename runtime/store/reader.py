"""Reading a store back: rows, verified messages, restored branches.

:class:`StoreReader` holds a read-only connection (it never takes the writer
lock, so it can read a store a run is writing). Every message it returns was
rebuilt from its stored content and checked against its SHA-256
(:func:`runtime.store.codec.decode_message`); messages are shared by id, so
branches restored together share message objects as the live ones did.

:meth:`StoreReader.restore_branches` rebuilds every branch: its record (a
clone's shares its parent's prefix), view, context state and system and
tools; a restored ledger keeps its rows but no evidence.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Collection, Mapping
from typing import Any

import attrs

from actors.branch import Branch, ContextState
from actors.record import Record
from runtime.measuring.model_calibration import CalibrationBook, ModelCalibration
from runtime.store.codec import (
    content_with_images,
    decode_message,
    ledger_from_rows,
    loads_json,
    loads_value,
    tool_from_piece,
)
from runtime.store.errors import StoreCorrupt
from runtime.store.schema import open_reader, resolve_store_path
from runtime.values.messages import Message, SystemMessage
from signals.envelope import Event, InvalidEventError


@attrs.frozen
class BranchRow:
    id: str
    created: int
    parent_id: str | None
    fork_length: int
    system_id: str | None
    tools: tuple[str, ...]
    turns_completed: int


@attrs.frozen
class RequestRow:
    """One stored send. ``rid`` is its row (unique); ``request_id`` is the engine's id."""

    rid: int
    request_id: str
    branch_id: str
    node_id: str | None
    digest: str
    recipe_version: int
    system_id: str | None
    tools: tuple[str, ...]
    view_ids: tuple[str, ...]
    model: str
    max_tokens: int
    intent: str
    tool_choice_json: str | None
    marks: tuple[tuple[tuple[Any, ...], str, str], ...]
    status: str
    usage: Mapping[str, int] | None
    result_bound: int | None = None
    """The ``tool_result_max_chars`` the request compiled its tool results under (None: unbounded)."""
    thinking_json: str | None = None
    """The request's ``thinking`` field as canonical JSON (None: not sent)."""
    output_config_json: str | None = None
    context_management_json: str | None = None
    """The request's ``context_management`` (server-side edits) as canonical JSON, kept in the stored record."""
    """A typed operation's ``output_config`` as canonical JSON (None: not sent), kept in the stored record."""

    @property
    def label(self) -> str:
        """How errors and listings name it: the engine's id and the store row."""
        return f"{self.request_id} (#{self.rid})"


def _json_list(text: str, where: str) -> list[Any]:
    try:
        value = loads_json(text)
    except (TypeError, ValueError) as exc:
        raise StoreCorrupt(f"{where}: {text[:80]!r} is not JSON ({exc})") from exc
    if not isinstance(value, list):
        raise StoreCorrupt(f"{where}: {text[:80]!r} is not a JSON list")
    return value


def _thinking_setting(text: Any, label: str) -> str | None:
    if text is None:
        return None
    try:
        value = loads_json(text) if isinstance(text, str) else None
    except ValueError:
        value = None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise StoreCorrupt(f"{label}: stored thinking {text!r:.120} is not a thinking object")
    return text


CALIBRATION_QUERY = "SELECT model, scale, samples, low FROM calibration"


def calibration_from_rows(rows: Collection[tuple[Any, ...]], label: str) -> CalibrationBook:
    """The calibration book of a store's ``calibration`` rows; :class:`StoreCorrupt` naming a bad row's model."""
    entries: dict[str, ModelCalibration] = {}
    for model, scale, samples, low in rows:
        try:
            if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
                raise ValueError(f"samples: {samples!r} is not a count")
            entries[model] = ModelCalibration(scale=scale, samples=samples, low=low)
        except ValueError as exc:
            raise StoreCorrupt(f"{label}: calibration of {model!r}: {exc}") from None
    return CalibrationBook(entries)


class StoreReader:
    """Read-only access to one store (a context manager closing its connection)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.label = os.fspath(path)
        self.file = resolve_store_path(path)
        self._connection: sqlite3.Connection = open_reader(path)
        self._messages: dict[str, Message] = {}

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        self._connection.close()

    def _rows(self, sql: str, params: Collection[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._connection.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreCorrupt(f"{self.label}: cannot be read ({exc})") from exc

    # -- the run --------------------------------------------------------------------------------------

    def meta(self) -> dict[str, str]:
        return dict(self._rows("SELECT key, value FROM meta"))

    def meta_value(self, key: str) -> str:
        value = self.meta().get(key)
        if value is None:
            raise StoreCorrupt(f"{self.label}: the store's meta table has no {key!r}")
        return value

    def calibration(self) -> CalibrationBook:
        """The run's calibration book as last kept (empty when nothing calibrated)."""
        return calibration_from_rows(self._rows(CALIBRATION_QUERY), self.label)

    # -- messages ---------------------------------------------------------------------------------------

    def message(self, message_id: str) -> Message:
        """The stored message ``message_id``, rebuilt and verified (:class:`StoreCorrupt` otherwise)."""
        cached = self._messages.get(message_id)
        if cached is not None:
            return cached
        rows = self._rows(
            "SELECT m.sha256, c.kind, c.content FROM messages m LEFT JOIN contents c ON c.sha256 = m.sha256 "
            "WHERE m.id = ?",
            (message_id,),
        )
        if not rows:
            raise StoreCorrupt(f"{self.label}: message {message_id} is not in the store")
        sha256, kind, content = rows[0]
        if content is None:
            raise StoreCorrupt(f"{self.label}: message {message_id}: its content {sha256} is not in the store")
        content = content_with_images(content, self.image_bytes, message_id)
        message = decode_message(message_id, kind, content, sha256)
        self._messages[message_id] = message
        return message

    def image_bytes(self, sha256: str) -> bytes | None:
        """The stored bytes of the image ``sha256`` (None: not stored); unverified."""
        rows = self._rows("SELECT data FROM images WHERE sha256 = ?", (sha256,))
        return bytes(rows[0][0]) if rows else None

    def image_count(self) -> tuple[int, int]:
        """(distinct images stored, their total bytes)."""
        count, total = self._rows("SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0) FROM images")[0]
        return count, total

    def stored_content(self, message_id: str) -> str | None:
        """The stored content text of ``message_id`` as it is, unverified (None: not stored)."""
        rows = self._rows(
            "SELECT c.content FROM messages m JOIN contents c ON c.sha256 = m.sha256 WHERE m.id = ?", (message_id,)
        )
        return rows[0][0] if rows else None

    def thinking_blocks(self, message_ids: Collection[str]) -> list[tuple[str, int, str]]:
        """(message id, part index, SHA-256) of each thinking block stored with one of ``message_ids``."""
        ids = sorted(set(message_ids))
        out: list[tuple[str, int, str]] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            out += self._rows(
                f"SELECT message_id, part, sha256 FROM thinking_blocks WHERE message_id IN ({', '.join('?' * len(chunk))})"
                " ORDER BY message_id, part",
                chunk,
            )
        return out

    def message_ids(self) -> list[str]:
        return [row[0] for row in self._rows("SELECT id FROM messages ORDER BY id")]

    # -- branches ----------------------------------------------------------------------------------------

    def branch_rows(self) -> list[BranchRow]:
        rows = self._rows(
            "SELECT id, created, parent_id, fork_length, system_id, tools, turns_completed FROM branches ORDER BY created"
        )
        return [
            BranchRow(r[0], r[1], r[2], r[3], r[4], tuple(_json_list(r[5], f"branch {r[0]} tools")), r[6]) for r in rows
        ]

    def own_record_ids(self, branch_id: str) -> list[tuple[int, str]]:
        """(index, message id) of the messages the branch appended itself, in order."""
        return [
            (r[0], r[1])
            for r in self._rows("SELECT idx, message_id FROM record WHERE branch_id = ? ORDER BY idx", (branch_id,))
        ]

    def view_ids(self, branch_id: str) -> list[str]:
        return [
            r[0]
            for r in self._rows("SELECT message_id FROM view_entries WHERE branch_id = ? ORDER BY pos", (branch_id,))
        ]

    def state(self, branch_id: str) -> ContextState:
        rows = self._rows("SELECT state FROM states WHERE branch_id = ?", (branch_id,))
        if not rows:
            raise StoreCorrupt(f"{self.label}: branch {branch_id} has no stored context state")
        state = loads_value(rows[0][0], f"branch {branch_id} ContextState")
        if not isinstance(state, ContextState):
            raise StoreCorrupt(f"branch {branch_id}: its stored state is a {type(state).__name__}, not a ContextState")
        return state

    def ledger(self, branch_id: str) -> Any:
        head = self._rows("SELECT watermark, max_rows FROM ledgers WHERE branch_id = ?", (branch_id,))
        if not head:
            return None
        rows = [r[0] for r in self._rows("SELECT row FROM ledger_rows WHERE branch_id = ?", (branch_id,))]
        return ledger_from_rows(head[0][0], head[0][1], rows)

    def restore_branches(self) -> dict[str, Branch]:
        """Every stored branch rebuilt, by id (see the module docstring)."""
        branches: dict[str, Branch] = {}
        records: dict[str, Record] = {}
        for row in self.branch_rows():
            if row.parent_id is not None:
                base = records.get(row.parent_id)
                if base is None:
                    raise StoreCorrupt(f"branch {row.id}: its parent {row.parent_id} is not stored before it")
                if row.fork_length > len(base):
                    raise StoreCorrupt(
                        f"branch {row.id}: shares {row.fork_length} messages of {row.parent_id}, which has {len(base)}"
                    )
                record = Record(base=base, base_len=row.fork_length)
            else:
                record = Record()
            for index, message_id in self.own_record_ids(row.id):
                if index != len(record):
                    raise StoreCorrupt(
                        f"branch {row.id}: record index {index} follows {len(record) - 1}; the record has a gap"
                    )
                record.append(self.message(message_id))
            records[row.id] = record
            view = self.view_ids(row.id)
            missing = [mid for mid in view if record.index_of(mid) is None]
            if missing:
                raise StoreCorrupt(f"branch {row.id}: view ids {missing[:5]} are not in its record")
            system = self.message(row.system_id) if row.system_id is not None else None
            if system is not None and not isinstance(system, SystemMessage):
                raise StoreCorrupt(f"branch {row.id}: its system message {row.system_id} is a {system.kind} message")
            branches[row.id] = Branch(
                branch_id=row.id,
                system=system,
                tools=tuple(tool_from_piece(piece) for piece in row.tools),
                record=record,
                view=view,
                state=self.state(row.id),
                ledger=self.ledger(row.id),
                parent_id=row.parent_id,
                fork_length=row.fork_length,
            )
        return branches

    # -- requests --------------------------------------------------------------------------------------------

    def requests(self, request: str | None = None) -> list[RequestRow]:
        """Stored sends in the order they were recorded; ``request`` selects by id or ``#row``."""
        sql = (
            "SELECT rid, request_id, branch_id, node_id, digest, recipe_version, system_id, tools, view_ids, model, "
            "max_tokens, intent, tool_choice_json, marks, status, usage, record, thinking FROM requests"
        )
        params: tuple[Any, ...] = ()
        if request is not None:
            if request.startswith("#") and request[1:].isdigit():
                sql += " WHERE rid = ?"
                params = (int(request[1:]),)
            else:
                sql += " WHERE request_id = ?"
                params = (request,)
        rows = self._rows(sql + " ORDER BY rid", params)
        return [self._request_row(r) for r in rows]

    def _request_row(self, r: tuple[Any, ...]) -> RequestRow:
        label = f"request {r[1]} (#{r[0]})"
        marks = []
        for mark in _json_list(r[13], f"{label} marks"):
            if not (isinstance(mark, list) and len(mark) == 3 and isinstance(mark[0], list)):
                raise StoreCorrupt(f"{label}: stored mark {mark!r} is not [location, ttl, role]")
            marks.append((tuple(mark[0]), mark[1], mark[2]))
        usage = None
        if r[15] is not None:
            try:
                usage = loads_json(r[15])
            except ValueError as exc:
                raise StoreCorrupt(f"{label}: stored usage is not JSON ({exc})") from exc
            if not isinstance(usage, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in usage.values()
            ):
                raise StoreCorrupt(f"{label}: stored usage {r[15]!r:.120} is not an object of token counts")
        record = loads_value(r[16], f"{label} record")
        result_bound = getattr(record, "result_bound", None)
        output_config = getattr(record, "output_config_json", None)
        if output_config is not None and not isinstance(output_config, str):
            raise StoreCorrupt(f"{label}: stored output_config {output_config!r:.120} is not JSON text")
        managed = getattr(record, "context_management_json", None)
        if managed is not None and not isinstance(managed, str):
            raise StoreCorrupt(f"{label}: stored context_management {managed!r:.120} is not JSON text")
        if result_bound is not None and (isinstance(result_bound, bool) or not isinstance(result_bound, int)):
            raise StoreCorrupt(f"{label}: stored result bound {result_bound!r} is not an integer")
        return RequestRow(
            rid=r[0],
            request_id=r[1],
            branch_id=r[2],
            node_id=r[3],
            digest=r[4],
            recipe_version=r[5],
            system_id=r[6],
            tools=tuple(_json_list(r[7], f"{label} tools")),
            view_ids=tuple(_json_list(r[8], f"{label} view ids")),
            model=r[9],
            max_tokens=r[10],
            intent=r[11],
            tool_choice_json=r[12],
            marks=tuple(marks),
            status=r[14],
            usage=usage,
            result_bound=result_bound,
            thinking_json=_thinking_setting(r[17], label),
            output_config_json=output_config,
            context_management_json=managed,
        )

    # -- events -------------------------------------------------------------------------------------------------

    def node_of_branches(self) -> dict[str, str]:
        """Each stored branch's node: from its requests, else from its node events."""
        nodes: dict[str, str] = {}
        for row in self.requests():
            if row.node_id:
                nodes.setdefault(row.branch_id, row.node_id)
        for event in self.events(types=("NodeStarted", "NodeFinished", "NodeFailed")):
            if event.branch_id and event.node_id:
                nodes.setdefault(event.branch_id, event.node_id)
        return nodes

    def events(self, types: Collection[str] | None = None) -> list[Event]:
        """The stored events in ``seq`` order (``types`` keeps only those types)."""
        sql = "SELECT rowid, body FROM events"
        params: list[Any] = []
        if types is not None:
            names = sorted(set(types))
            sql += f" WHERE type IN ({', '.join('?' for _ in names)})"
            params = names
        events = []
        for rowid, body in self._rows(sql + " ORDER BY seq", params):
            try:
                events.append(Event.from_json(loads_json(body)))
            except (ValueError, InvalidEventError) as exc:
                raise StoreCorrupt(f"{self.label}: events row {rowid} is not a valid event ({exc})") from exc
        return events

    def last_seq(self) -> int:
        return self._rows("SELECT COALESCE(MAX(seq), 0) FROM events")[0][0]
