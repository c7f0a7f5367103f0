"""The structure of a view: units a fold moves whole, and where each belongs in time.

A fold never splits a tool call from its result, so it works on **units**:

- a **round**: an assistant response that made tool calls, with the result
  (or the clipped copy) of every call;
- any other message on its own: an instruction, a text answer, a note.

A unit is folded, kept or restored whole. Its **chronology key** is where it
belongs in the record's time order: a message's own full-record index, a
clipped copy's original's index, a note's ``first_index`` (the index of the
first message it replaced). A restore puts messages back by this key.

:class:`RecordAccess` is how the pure fold code reads a branch's record
without touching the branch: a message by full-record index, an index by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import attrs

from runtime.values.messages import AssistantResponse, Instruction, Message, Note, ToolResult


class RecordAccess(Protocol):
    """Read access to a branch's append-only record."""

    def message_at(self, index: int) -> Message: ...

    def index_of(self, message_id: str) -> int | None: ...

    def record_length(self) -> int: ...


@attrs.frozen
class Unit:
    """Messages of the view that move together (see the module docstring)."""

    kind: Literal["round", "message", "note"]
    members: tuple[Message, ...]
    key: int
    positions: tuple[int, ...]
    """Positions of the members in the view."""

    @property
    def position(self) -> int:
        """Position of the unit's first member in the view."""
        return self.positions[0]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.members)

    @property
    def results(self) -> tuple[ToolResult, ...]:
        return tuple(m for m in self.members if isinstance(m, ToolResult))


def chronology_key(message: Message, record: RecordAccess) -> int:
    """Where ``message`` belongs in time order (see the module docstring)."""
    if isinstance(message, Note):
        return message.first_index
    if isinstance(message, ToolResult) and message.clipped_from is not None:
        if message.clip is not None:
            return message.clip.original_index
        index = record.index_of(message.clipped_from)
        if index is not None:
            return index
    index = record.index_of(message.id)
    if index is None:
        raise KeyError(f"message {message.id} is not in the branch's record")
    return index


def original_index(message: Message, record: RecordAccess) -> int:
    """The full-record index of the original a message stands for (its own for an original)."""
    if isinstance(message, ToolResult) and message.clipped_from is not None:
        return chronology_key(message, record)
    index = record.index_of(message.id)
    if index is None:
        raise KeyError(f"message {message.id} is not in the branch's record")
    return index


def units_of(view: Sequence[Message], record: RecordAccess) -> tuple[Unit, ...]:
    """The view's units in view order.

    A result joins the round whose response made its call; a result whose
    call is not in the view (which no compiled request allows) is a unit of
    its own, so callers never lose a message.
    """
    units: list[dict] = []
    round_of_call: dict[str, int] = {}
    for position, message in enumerate(view):
        if isinstance(message, ToolResult) and message.call_id in round_of_call:
            unit = units[round_of_call[message.call_id]]
            unit["members"].append(message)
            unit["positions"].append(position)
            continue
        if isinstance(message, AssistantResponse) and message.tool_calls:
            for call in message.tool_calls:
                round_of_call[call.call_id] = len(units)
            kind = "round"
        elif isinstance(message, Note):
            kind = "note"
        else:
            kind = "message"
        units.append({"kind": kind, "members": [message], "positions": [position]})
    return tuple(
        Unit(u["kind"], tuple(u["members"]), chronology_key(u["members"][0], record), tuple(u["positions"]))
        for u in units
    )


def is_complete_round(unit: Unit) -> bool:
    """Whether a round unit holds a result for every call (always true for other units)."""
    if unit.kind != "round":
        return True
    response = unit.members[0]
    assert isinstance(response, AssistantResponse)
    answered = {r.call_id for r in unit.results}
    return all(call.call_id in answered for call in response.tool_calls)


def tail_units(units: Sequence[Unit], view_length: int, tail: int) -> set[int]:
    """Indices of the units holding any of the newest ``tail`` messages of the view."""
    if tail <= 0:
        return set()
    first_tail_position = max(0, view_length - tail)
    return {i for i, unit in enumerate(units) if unit.positions[-1] >= first_tail_position}


def task_instruction(view: Sequence[Message]) -> Instruction | None:
    """The current task: the newest instruction in the view."""
    for message in reversed(view):
        if isinstance(message, Instruction):
            return message
    return None


@attrs.frozen(eq=False)
class RecordReader:
    """:class:`RecordAccess` over a bare :class:`actors.record.Record` (a branch is one already)."""

    record: Any

    def message_at(self, index: int) -> Message:
        return self.record[index]

    def index_of(self, message_id: str) -> int | None:
        return self.record.index_of(message_id)

    def record_length(self) -> int:
        return len(self.record)
