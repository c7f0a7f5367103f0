"""What Ctrl-C prints: one line saying what was interrupted and how to go on, and exit 130.

The exit status is the shell's for a process ended by SIGINT (128 + 2). A run
with ``--store`` (and a ``resume``) keeps every step it finished in its store,
so the line names the command that continues it; a run without a store says
how to make the next one resumable. No traceback: the interrupt is the
user's, not a failure of the program.
"""

from __future__ import annotations

import argparse
import shlex

EXIT_INTERRUPTED = 130


def interrupted_line(args: argparse.Namespace) -> str:
    """The one line Ctrl-C prints for the command ``args`` describes."""
    command = getattr(args, "command", None)
    store = getattr(args, "store", None) if command == "run" else getattr(args, "path", None)
    if command in ("run", "resume") and store and getattr(args, "engine", "local") != "temporal":
        return (
            f"foldline: {command} interrupted; the store keeps every step it finished: "
            f"continue with `foldline resume {shlex.quote(str(store))}`"
        )
    if command == "run":
        return "foldline: run interrupted; it was not stored (run with --store PATH to be able to resume it)"
    return f"foldline: {command or 'command'} interrupted"
