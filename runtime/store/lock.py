"""One writer per store: an exclusive lock on a file beside the store.

A run or a resume holds the lock for as long as it writes; a second writer is
refused with :class:`StoreInUse`. The lock is an ``flock`` on ``<store>.lock``,
so the operating system releases it when the holder exits, killed or not.
Readers (events, inspect, replay) take no lock; ``events --follow`` asks
:func:`writer_active` to know whether more may come.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import attrs

from runtime.store.errors import StoreInUse


def lock_path(store_file: Path) -> Path:
    return store_file.with_name(store_file.name + ".lock")


@attrs.define(eq=False)
class WriterLock:
    """The held lock of one store file; ``release()`` gives it up."""

    store_file: Path
    _fd: int | None = attrs.field(default=None, init=False)

    @classmethod
    def acquire(cls, store_file: Path) -> WriterLock:
        lock = cls(store_file)
        fd = os.open(lock_path(store_file), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreInUse(f"{store_file}: another process is writing this store (a run or a resume)") from None
        lock._fd = fd
        return lock

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def writer_active(store_file: Path) -> bool:
    """Whether some process holds the store's writer lock right now."""
    path = lock_path(store_file)
    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
