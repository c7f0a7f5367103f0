"""Walking a workspace directory by descriptors: entries found, and entries skipped with the reason.

The walk opens each subdirectory with ``openat(O_NOFOLLOW | O_DIRECTORY)``
relative to its parent's descriptor and checks it is the directory it listed
(device and inode), so a directory swapped for a symlink mid-walk is skipped,
never entered. It lists what ``os.walk(followlinks=False)`` would: a
directory's files and symlinks (sorted), then its subdirectories in order. A
symlink is resolved through :meth:`Sandbox.open` (inside the root only). An
entry that cannot be read (a symlink loop, a symlink leading out, a name the
system refuses, a directory that cannot be listed, one deeper than
:data:`MAX_DEPTH`) is an :class:`Entry` saying why, named relative to the
root: one bad entry never fails the whole walk, and no host path is shown.
The walk checks the call's stop flag at every entry and ends after
:data:`MAX_WALK_ENTRIES` entries.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

import attrs

from actors.tools.sandbox import Opened, OutsideRoot, Sandbox, SandboxError, SymlinkLoop, os_reason, shown
from actors.tools.stopping import check_stop

MAX_DEPTH = 64
"""Directories a walk descends at most below its start (each level holds one descriptor)."""
MAX_WALK_ENTRIES = 100_000
"""Entries one walk visits at most."""

_SUBDIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@attrs.frozen
class Entry:
    """A walked entry: a readable file (``size`` set) or what it is instead (``note``)."""

    parts: tuple[str, ...]
    size: int | None = None
    note: str = ""
    skipped: bool = False
    """True for an entry that could not be read (a loop, a refused name): named, not failed on."""

    @property
    def name(self) -> str:
        return shown(self.parts)


@attrs.define
class Walked:
    entries: list[Entry] = attrs.Factory(list)
    visited: int = 0
    truncated: bool = False


def walk(sandbox: Sandbox, start: Opened, what: str) -> Walked:
    """The entries under ``start`` (a file: itself); ``what`` names the tool for a stop."""
    out = Walked()
    if not start.is_dir:
        out.entries.append(_file_or_other(start.parts, start.status))
        return out
    _walk_dir(sandbox, start.fd, start.parts, 0, out, lambda: check_stop(what))
    return out


def _walk_dir(
    sandbox: Sandbox, fd: int, parts: tuple[str, ...], depth: int, out: Walked, stop: Callable[[], None]
) -> None:
    try:
        names = sorted(os.listdir(fd))
    except OSError as exc:
        out.entries.append(Entry(parts, note=f"directory cannot be listed ({os_reason(exc)}); skipped", skipped=True))
        return
    subdirs: list[tuple[str, os.stat_result]] = []
    for name in names:
        stop()
        if out.visited >= MAX_WALK_ENTRIES:
            out.truncated = True
            return
        out.visited += 1
        try:
            status = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError as exc:
            out.entries.append(Entry((*parts, name), note=f"cannot be read ({os_reason(exc)}); skipped", skipped=True))
            continue
        if stat.S_ISDIR(status.st_mode):
            subdirs.append((name, status))
        elif stat.S_ISLNK(status.st_mode):
            out.entries.append(_link(sandbox, (*parts, name)))
        else:
            out.entries.append(_file_or_other((*parts, name), status))
    for name, status in subdirs:
        _descend(sandbox, fd, (*parts, name), status, depth, out, stop)
        if out.truncated:
            return


def _descend(
    sandbox: Sandbox,
    fd: int,
    parts: tuple[str, ...],
    status: os.stat_result,
    depth: int,
    out: Walked,
    stop: Callable[[], None],
) -> None:
    if depth + 1 > MAX_DEPTH:
        out.entries.append(Entry(parts, note=f"directory deeper than {MAX_DEPTH} levels; skipped", skipped=True))
        return
    try:
        sub = os.open(parts[-1], _SUBDIR_FLAGS, dir_fd=fd)
    except OSError as exc:  # swapped for a symlink or a file since it was listed, or unreadable
        out.entries.append(Entry(parts, note=f"directory cannot be opened ({os_reason(exc)}); skipped", skipped=True))
        return
    try:
        now = os.fstat(sub)
        if (now.st_dev, now.st_ino) != (status.st_dev, status.st_ino):
            out.entries.append(Entry(parts, note="directory changed while listed; skipped", skipped=True))
            return
        _walk_dir(sandbox, sub, parts, depth + 1, out, stop)
    finally:
        os.close(sub)


def _file_or_other(parts: tuple[str, ...], status: os.stat_result) -> Entry:
    if stat.S_ISREG(status.st_mode):
        return Entry(parts, size=status.st_size)
    return Entry(parts, note="not a regular file")


def _link(sandbox: Sandbox, parts: tuple[str, ...]) -> Entry:
    """A symlink, resolved inside the root: the file it names, or what it is instead."""
    try:
        with sandbox.open(parts) as target:
            if target.is_dir:
                return Entry(parts, note="symlink to a directory (not followed)")
            return _file_or_other(parts, target.status)
    except OutsideRoot:
        return Entry(parts, note="symlink leading outside the workspace (not followed)")
    except SymlinkLoop:
        return Entry(parts, note="symlink loop; skipped", skipped=True)
    except SandboxError:
        return Entry(parts, note="symlink that cannot be followed (its target is missing or unreadable); skipped")
