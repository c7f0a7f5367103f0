"""Exact replay: rebuild a stored request and prove it is the one that was sent.

Replay never trusts stored request bytes (none are stored): it takes the
request's recorded inputs (system message, tool definitions, the view's
message ids as they were before that send, the settings and the cache marks),
reads each message back from the store (verified against its SHA-256),
compiles them with the recipe version the request recorded, and compares the
SHA-256 of the result with the digest recorded at send time. A match returns
the request; anything else raises an error naming the request:

- :class:`UnknownRecipe`: a recipe version this build has no rules for;
- :class:`ReplayMismatch`: the rebuilt bytes differ from what was sent;
- :class:`ReplayError`: the store cannot supply an input (a missing or
  tampered message, a view id outside the branch's record, a bad tool row).

A request made with thinking on records its ``thinking`` setting and compiles
with it. When a replay fails, each thinking block of the request's view is
checked against the digest stored with its reply (``thinking_blocks``), and a
block changed in the store is named (message, part, kind) in the error.

Replay never calls a model or runs a tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from actors.branch import ContextState
from runtime.fold.projection import BoundProjection, ProjectionError, request_projection
from runtime.request.compiler import (
    RECIPE_VERSION,
    CompileError,
    Request,
    RequestSettings,
    compile_request,
)
from runtime.store.codec import loads_json, tool_from_piece
from runtime.store.errors import (
    ReplayError,
    ReplayMismatch,
    StoreCorrupt,
    UnknownRecipe,
)
from runtime.store.integrity import check_inputs
from runtime.store.reader import RequestRow, StoreReader
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import Message, SystemMessage


@attrs.frozen
class RecordedMark:
    """A cache mark as a request recorded it (location, lifetime, the rule that placed it)."""

    location: tuple[Any, ...]
    ttl: str
    role: str


@attrs.frozen
class Replayed:
    """A request rebuilt and verified: its store row and the request itself."""

    row: RequestRow
    request: Request

    @property
    def digest(self) -> str:
        return self.request.digest


class RecordLike(Protocol):
    """A branch record by full-record index (a restored :class:`~actors.branch.Branch` or a :class:`StoredRecord`)."""

    def index_of(self, message_id: str) -> int | None: ...

    def message_at(self, index: int) -> Message: ...


@attrs.define(eq=False)
class StoredRecord:
    """A branch's stored record by message id; messages are read (and verified) only when asked for."""

    branch_id: str
    ids: list[str]
    reader: StoreReader
    _index: dict[str, int] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._index = {mid: i for i, mid in enumerate(self.ids)}

    def index_of(self, message_id: str) -> int | None:
        return self._index.get(message_id)

    def message_at(self, index: int) -> Message:
        return self.reader.message(self.ids[index])

    def state(self) -> ContextState:
        return self.reader.state(self.branch_id)


def stored_records(reader: StoreReader) -> dict[str, StoredRecord]:
    """Every stored branch's record ids, shared prefixes included (no message is read)."""
    full: dict[str, list[str]] = {}
    for branch in reader.branch_rows():
        prefix: list[str] = []
        if branch.parent_id is not None:
            if branch.parent_id not in full:
                raise StoreCorrupt(f"branch {branch.id}: its parent {branch.parent_id} is not stored before it")
            prefix = full[branch.parent_id][: branch.fork_length]
        full[branch.id] = prefix + [mid for _, mid in reader.own_record_ids(branch.id)]
    return {branch_id: StoredRecord(branch_id, ids, reader) for branch_id, ids in full.items()}


def result_projection(bound: int | None, record: RecordLike, protected_round: Any) -> BoundProjection | None:
    """The tool-result projection a request compiled under ``bound`` used: the engine's own
    rule (:func:`runtime.fold.projection.request_projection`), applied to the stored record."""
    return request_projection(record, bound, protected_round)


def _rebuild_with_current_compiler(row: RequestRow, reader: StoreReader, record: StoredRecord) -> Request:
    system = reader.message(row.system_id) if row.system_id is not None else None
    if system is not None and not isinstance(system, SystemMessage):
        raise StoreCorrupt(f"its system message {row.system_id} is a {system.kind} message")
    tools = tuple(tool_from_piece(piece) for piece in row.tools)
    view = tuple(reader.message(mid) for mid in row.view_ids)
    settings = RequestSettings(
        model=row.model,
        max_tokens=row.max_tokens,
        intent=row.intent,  # type: ignore[arg-type]
        tool_choice_json=row.tool_choice_json,
        thinking_json=row.thinking_json,
        output_config_json=row.output_config_json,
        context_management_json=row.context_management_json,
    )
    projection = None
    if row.intent != "side":
        projection = result_projection(row.result_bound, record, record.state().protected_round)
    request = compile_request(system=system, tools=tools, view=view, settings=settings, projection=projection)
    return request.with_marks([RecordedMark(tuple(location), ttl, role) for location, ttl, role in row.marks])


RECIPES: Mapping[int, Callable[[RequestRow, StoreReader, StoredRecord], Request]] = {
    RECIPE_VERSION: _rebuild_with_current_compiler,
}
"""The rules this build can rebuild a request by, per compiler recipe version."""


def _check_in_record(row: RequestRow, record: StoredRecord) -> None:
    outside = [mid for mid in row.view_ids if record.index_of(mid) is None]
    if row.system_id is not None and record.index_of(row.system_id) is None:
        outside.insert(0, row.system_id)
    if outside:
        raise StoreCorrupt(f"messages {outside[:5]} are not in branch {row.branch_id}'s stored record")


def changed_thinking_blocks(row: RequestRow, reader: StoreReader) -> str:
    """Name each thinking block of ``row``'s view whose stored bytes differ from the block stored with its reply.

    Asked only once a replay failed (the common path reads nothing more): a
    signed block goes back byte for byte, so the error names the message, the
    block's place among its parts and its kind. Empty when every block matches.
    """
    changed = []
    for message_id, part, sha256 in reader.thinking_blocks(row.view_ids):
        found = "missing"
        text = reader.stored_content(message_id)
        try:
            parts = loads_json(text)["parts"] if text is not None else []
            block = parts[part]
            kind = block.get("type", "block")
            if sha256_hex(canonical_json(block)) == sha256:
                continue
            found = "changed"
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            kind = "block"
        changed.append(f"message {message_id}: its {kind} block (part {part}) is {found} in the store")
    if not changed:
        return ""
    return "a signed thinking block differs from the one the reply gave: " + "; ".join(changed)


def replay(row: RequestRow, reader: StoreReader, record: StoredRecord) -> Replayed:
    """Rebuild ``row``'s request from its branch's stored ``record`` and verify its digest.

    Every message the request names must be in the branch's record.
    """
    recipe = RECIPES.get(row.recipe_version)
    if recipe is None:
        known = ", ".join(str(v) for v in sorted(RECIPES))
        raise UnknownRecipe(
            row.label, f"recipe version {row.recipe_version} is not one this build can rebuild (it has {known})"
        )
    try:
        _check_in_record(row, record)
        request = recipe(row, reader, record)
    except StoreCorrupt as exc:
        changed = changed_thinking_blocks(row, reader)
        if changed:
            raise ReplayError(row.label, f"{changed}; the store cannot supply its inputs: {exc}") from exc
        raise ReplayError(row.label, f"the store cannot supply its inputs: {exc}") from exc
    except (CompileError, ProjectionError) as exc:
        raise ReplayError(row.label, f"its stored view does not compile: {exc}") from exc
    if request.digest != row.digest:
        changed = changed_thinking_blocks(row, reader)
        if changed:
            raise ReplayMismatch(row.label, f"{changed}; rebuilt digest {request.digest} differs from {row.digest}")
        raise ReplayMismatch(
            row.label,
            f"rebuilt digest {request.digest} differs from the recorded {row.digest} "
            f"(recipe version {row.recipe_version}); the stored inputs do not rebuild what was sent",
        )
    return Replayed(row, request)


def replay_all(reader: StoreReader, rows: Sequence[RequestRow] | None = None) -> list[Replayed | ReplayError]:
    """Replay every stored request (or ``rows``); each entry is the result or the error naming it.

    Raises :class:`StoreCorrupt` when the store's branch table itself is malformed, or its stored inputs
    (the scenario, the settings) do not match their digests (:func:`runtime.store.integrity.check_inputs`).
    """
    check_inputs(reader.meta(), reader.label)
    records = stored_records(reader)
    out: list[Replayed | ReplayError] = []
    for row in reader.requests() if rows is None else rows:
        try:
            record = records.get(row.branch_id)
            if record is None:
                raise ReplayError(row.label, f"its branch {row.branch_id} is not in the store")
            out.append(replay(row, reader, record))
        except ReplayError as exc:
            out.append(exc)
    return out
