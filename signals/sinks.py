"""Durable sinks for the signal stream: JSON Lines.

:class:`JsonlSink` writes every event of a bus, one compact JSON object per
line (``Event.to_json()`` in canonical JSON: sorted keys, no whitespace),
through a ``block`` handler so it never loses an event. Each line is written
and flushed to the operating system in one go, so a crash of the process
loses at most the line being written (the file is not fsynced: a crash of the
machine may lose more). :func:`read_jsonl` reads such a file back.

The sink writes synchronously from its handler task: a line is small and the
write goes to the OS page cache, so it costs less than handing it to a thread.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO

import attrs

from runtime.values.canonical import canonical_json
from signals.bus import BusClosedError, Gap, SignalBus, Subscription
from signals.envelope import Event, InvalidEventError


@attrs.define(eq=False)
class JsonlSink:
    """Writes a bus's events to ``path`` as JSON Lines.

    ``sink.attach(bus)`` opens the file (truncating it, or appending with
    ``append=True``) and subscribes; the file is closed when the bus closes,
    or when a write fails (the error is then in the subscription's
    statistics). A sink attaches to one bus, once.
    """

    path: Path = attrs.field(converter=Path)
    append: bool = attrs.field(default=False, kw_only=True)
    _file: IO[str] | None = attrs.field(init=False, default=None)
    _subscription: Subscription | None = attrs.field(init=False, default=None)
    _lines: int = attrs.field(init=False, default=0)

    @property
    def lines_written(self) -> int:
        """How many events this sink has written."""
        return self._lines

    @property
    def closed(self) -> bool:
        """True once the sink was attached and its file is closed again."""
        return self._subscription is not None and self._file is None

    def attach(self, bus: SignalBus) -> Subscription:
        """Open the file and write every event ``bus`` publishes from now on; return the subscription."""
        if self._subscription is not None:
            raise RuntimeError(f"JsonlSink({str(self.path)!r}) is already attached; make a new sink for another bus")
        if not bus.is_open:
            # Checked before opening, so a failed attach never truncates the file.
            raise BusClosedError(f"JsonlSink({str(self.path)!r}): the bus for run {bus.run_id!r} is not open")
        # Not a `with`: the file stays open for the subscription's life; its on_close closes it.
        file = open(self.path, "a" if self.append else "w", encoding="utf-8", newline="\n")  # noqa: SIM115
        try:
            subscription = bus.add_handler(self._write, policy="block", name=f"jsonl:{self.path}", on_close=self._close)
        except BaseException:
            file.close()
            raise
        self._file = file
        self._subscription = subscription
        return subscription

    def _write(self, item: Event | Gap) -> None:
        if not isinstance(item, Event):
            # A block subscription never drops; a gap here is a bus bug, and the file must say nothing false.
            raise RuntimeError(f"JsonlSink({str(self.path)!r}) received {item!r} on a block subscription")
        file = self._file
        assert file is not None
        file.write(canonical_json(item.to_json()) + "\n")
        file.flush()
        self._lines += 1

    def _close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            file.close()


def read_jsonl(path: str | os.PathLike[str]) -> list[Event]:
    """Read the events of a JSON Lines file, in file order.

    Blank lines are skipped. A final line without its newline that does not
    parse is a write torn by a crash and is left out; any other line that is
    not a valid event raises :class:`signals.envelope.InvalidEventError`
    naming the file and line number.
    """
    events: list[Event] = []
    with open(path, encoding="utf-8", newline="\n") as file:
        lines = file.read().split("\n")
    # split() leaves "" after a final newline; anything else there is an unterminated last line.
    last_index = len(lines) - 1
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as error:
            if index == last_index:
                break
            raise InvalidEventError(f"{os.fspath(path)}:{index + 1}: not JSON ({error.msg}): {line[:200]!r}") from error
        except RecursionError:  # a line nested thousands deep: no event is
            raise InvalidEventError(f"{os.fspath(path)}:{index + 1}: JSON nested too deep: {line[:80]!r}") from None
        try:
            events.append(Event.from_json(obj))
        except InvalidEventError as error:
            raise InvalidEventError(f"{os.fspath(path)}:{index + 1}: {error}") from error
    return events
