"""``foldline events PATH --follow`` on a store no local process writes: a Temporal run's.

A local run (or resume) holds the store's writer lock while it writes, and
its follower stops when no writer is left. A Temporal run's events are
written by its workers, wherever they run, through short transactions, and
no lock tells when the run is over: the store's meta says the Temporal
engine writes it (``engine = temporal``, set by ``run --store`` and by every
write of an ``--events-db`` file), and the follower stops at the run's
``RunFinished``, as the Postgres follower does.
"""

from __future__ import annotations

import time
from typing import TextIO

import attrs

from runtime.values.canonical import canonical_json


def stored_engine(path: str) -> str:
    """The engine that writes the store at ``path`` (its meta; ``local`` when it names none)."""
    from runtime.store.reader import StoreReader
    from runtime.store.run import ENGINE_META_KEY

    with StoreReader(path) as reader:
        return reader.meta().get(ENGINE_META_KEY, "local")


@attrs.define
class RunsSeen:
    """The events a follower has read, per run: a run is over once its ``RunFinished`` came and every seq before it."""

    counts: dict[str, int] = attrs.field(factory=dict)
    finished_at: dict[str, int] = attrs.field(factory=dict)

    def add(self, run_id: str, seq: int, kind: str) -> None:
        self.counts[run_id] = self.counts.get(run_id, 0) + 1
        if kind == "RunFinished":
            self.finished_at[run_id] = seq

    def all_finished(self) -> bool:
        return bool(self.counts) and all(self.finished_at.get(run) == n for run, n in self.counts.items())


def follow_to_finish(path: str, types: set[str] | None, out: TextIO, poll_s: float) -> int:
    """Follow a store no local process writes (a Temporal run's workers write it): until every run in it finished.

    No writer lock tells when such a run is over; its ``RunFinished`` does, once every event before it is
    in (the workers commit batches in seq order; a retried batch adds nothing). Ctrl-C stops sooner.
    """
    from runtime.store.events_sink import read_events

    last = 0
    seen = RunsSeen()
    while True:
        for rowid, event in read_events(path, after_rowid=last, order="rowid", check_types=last == 0):
            last = max(last, rowid)
            seen.add(event.run_id, event.seq, event.type)
            if types is None or event.type in types:
                print(canonical_json(event.to_json()), file=out, flush=True)
        if seen.all_finished():
            return 0
        time.sleep(poll_s)
