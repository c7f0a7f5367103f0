"""Output paths a command writes (``--signals``, ``--report``, ``--json``, ``--html``), checked before it starts.

A run writes its report after every request was sent, and opens its signals
file as it starts: a path it cannot write would fail after money was spent, or
with a traceback. :func:`output_path_problems` names each such argument up
front (the argument, the path and what is wrong), so the command exits 2 with
nothing sent. A write that still fails (the disk filled) is
:func:`write_output`'s clear one-line error.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path

OUTPUT_FLAGS: dict[str, tuple[tuple[str, str], ...]] = {
    "run": (("signals", "--signals"), ("report", "--report")),
    "resume": (("report", "--report"),),
    "attach": (("report", "--report"),),
    "bench": (("json", "--json"),),
    "report": (("html", "--html"),),
    "inspect": (("html", "--html"),),
}
"""Per command: (the argument's attribute, its flag) of every file it writes."""


class OutputNotWritten(OSError):
    """An output file could not be written; the message names the argument and the path."""


def output_path_problem(flag: str, path: str, inputs: tuple[str, ...] = ()) -> str | None:
    """What stops ``path`` (given as ``flag``) from being written as a new or replaced file, or None."""
    target = Path(path)
    if path == "":
        return f"{flag}: an empty path; expected a file path"
    if target.is_dir():
        return f"{flag}: {path} is a directory; expected a file path"
    parent = target.parent
    if not parent.is_dir():
        return f"{flag}: {path}: the directory {parent} does not exist"
    if target.exists():
        if not os.access(target, os.W_OK):
            return f"{flag}: {path}: the file is not writable"
        for source in inputs:
            if os.path.exists(source) and os.path.samefile(source, target):
                return f"{flag}: {path} is the input {source}; it would be overwritten"
    elif not os.access(parent, os.W_OK | os.X_OK):
        return f"{flag}: {path}: the directory {parent} is not writable"
    return None


def output_path_problems(args: argparse.Namespace) -> Iterator[str]:
    """Each problem with the output paths of the parsed command ``args`` (see :data:`OUTPUT_FLAGS`)."""
    inputs = tuple(
        str(value) for name in ("scenario", "path", "source") if isinstance(value := getattr(args, name, None), str)
    )
    for attribute, flag in OUTPUT_FLAGS.get(args.command, ()):
        value = getattr(args, attribute, None)
        if isinstance(value, str):
            problem = output_path_problem(flag, value, inputs)
            if problem is not None:
                yield problem


def write_output(flag: str, path: str, text: str) -> None:
    """Write ``text`` to ``path``; :class:`OutputNotWritten` naming ``flag`` and the path when it cannot."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputNotWritten(f"{flag}: {path}: cannot write ({exc.strerror or exc})") from exc
