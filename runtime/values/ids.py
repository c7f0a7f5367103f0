"""Where ids come from: one id source per run, random by default.

Every message id (:func:`runtime.values.messages.new_message_id`), branch id
(:func:`actors.branch.new_branch_id`), run id and request id of foldline comes
from an :class:`IdSource`. The default, :class:`RandomIds`, draws message,
branch and run ids from the operating system's random source and numbers
request ids by their branch's serial, as foldline always has. A host that must
replay a run exactly (a durable workflow engine, a replay) supplies its own
source: :class:`CountingIds` is a deterministic one, and any object with the
four methods will do.

The source in force is scoped: ``with use_ids(source): ...`` installs it for
the code (and the tasks it starts) inside the block; outside every block the
random source is in force. :class:`runtime.runtime.Runtime` installs its
``ids`` for a whole run. This module is pure: it reads no clock and does no I/O
beyond asking ``secrets`` for random bits in the default source.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

import attrs


class IdSource(Protocol):
    """Makes the ids of one run."""

    def message_id(self) -> str:
        """A fresh message id (ids carry no content and are never sent to a provider)."""
        ...

    def branch_id(self) -> str:
        """A fresh branch id."""
        ...

    def run_id(self) -> str:
        """A fresh run id."""
        ...

    def request_id(self, branch_id: str, serial: int, side: int | None = None) -> str:
        """The id of request ``serial`` of a branch (``side``: the n-th side request sent under it)."""
        ...


def serial_request_id(branch_id: str, serial: int, side: int | None = None) -> str:
    """``<branch>:<serial>``, and ``<branch>:<serial>:summary-<n>`` for a fold's n-th summary request."""
    return f"{branch_id}:{serial}" if side is None else f"{branch_id}:{serial}:summary-{side}"


@attrs.frozen
class RandomIds:
    """The default source: random message, branch and run ids; request ids by serial."""

    def message_id(self) -> str:
        return secrets.token_hex(8)

    def branch_id(self) -> str:
        return "br-" + secrets.token_hex(6)

    def run_id(self) -> str:
        return "run-" + secrets.token_hex(6)

    def request_id(self, branch_id: str, serial: int, side: int | None = None) -> str:
        return serial_request_id(branch_id, serial, side)


@attrs.define(eq=False)
class CountingIds:
    """A deterministic source: ids numbered in the order they are asked for, under a prefix.

    Two runs that ask in the same order get the same ids, so a replayed run
    rebuilds the same records.
    """

    prefix: str = "id"
    _next: int = attrs.field(default=0, init=False)

    def _take(self) -> int:
        self._next += 1
        return self._next

    def message_id(self) -> str:
        return f"{self.prefix}-m{self._take():06d}"

    def branch_id(self) -> str:
        return f"br-{self.prefix}-{self._take():06d}"

    def run_id(self) -> str:
        return f"run-{self.prefix}-{self._take():06d}"

    def request_id(self, branch_id: str, serial: int, side: int | None = None) -> str:
        return serial_request_id(branch_id, serial, side)


DEFAULT_IDS: IdSource = RandomIds()

_current: ContextVar[IdSource] = ContextVar("foldline_ids", default=DEFAULT_IDS)


def current_ids() -> IdSource:
    """The id source in force here (the random one outside every ``use_ids`` block)."""
    return _current.get()


@contextmanager
def use_ids(source: IdSource) -> Iterator[IdSource]:
    """Make ``source`` the id source in force inside the block (and in the tasks started there)."""
    token = _current.set(source)
    try:
        yield source
    finally:
        _current.reset(token)
