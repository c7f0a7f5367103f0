"""The append-only record of a branch.

A record is the full, ordered list of every message a branch ever held. Nothing
is removed or edited. A message's full-record index never changes, and it is
what ``read_result`` and ``restore`` address.

Forking is O(1): a fork shares its parent's first ``n`` messages (the parent
may go on appending; the fork never sees those appends) and keeps its own
appends in a list of its own. Messages are shared, never copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import attrs

from runtime.values.messages import AssistantResponse, Message, ToolResult


@attrs.define(eq=False)
class Record:
    _base: Record | None = None
    _base_len: int = 0
    _own: list[Message] = attrs.field(factory=list)
    _own_index: dict[str, int] = attrs.field(factory=dict)

    def __len__(self) -> int:
        return self._base_len + len(self._own)

    def __getitem__(self, index: int) -> Message:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"record index {index} out of range (record has {len(self)} messages)")
        if index < self._base_len:
            assert self._base is not None
            return self._base[index]
        return self._own[index - self._base_len]

    def __iter__(self) -> Iterator[Message]:
        for i in range(len(self)):
            yield self[i]

    def append(self, message: Message) -> int:
        """Append one message; return its full-record index."""
        if self.index_of(message.id) is not None:
            raise ValueError(f"message {message.id} is already in this record")
        index = len(self)
        self._own.append(message)
        self._own_index[message.id] = index
        return index

    def index_of(self, message_id: str) -> int | None:
        """The full-record index of a message id, or None when it is not here."""
        index = self._own_index.get(message_id)
        if index is not None:
            return index
        if self._base is not None:
            index = self._base.index_of(message_id)
            if index is not None and index < self._base_len:
                return index
        return None

    def get(self, message_id: str) -> Message:
        index = self.index_of(message_id)
        if index is None:
            raise KeyError(f"message {message_id} is not in this record")
        return self[index]

    def fork(self) -> Record:
        """A record sharing this one's messages as they are now (O(1))."""
        return Record(base=self, base_len=len(self))


class Indexed(Protocol):
    def index_of(self, message_id: str) -> int | None: ...

    def message_at(self, index: int) -> Message: ...


def describe_part(record: Indexed, label: str) -> str:
    """A measured part's label for people: a message's record index and kind, not its id (any other label as is)."""
    index = record.index_of(label)
    if index is None:
        return label
    message = record.message_at(index)
    if isinstance(message, ToolResult):
        return f"#{index} tool result {message.name}"
    if isinstance(message, AssistantResponse):
        return f"#{index} assistant response"
    return f"#{index} {message.kind}"
