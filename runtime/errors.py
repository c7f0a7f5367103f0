"""foldline's error types.

Every error foldline raises on purpose derives from :class:`FoldlineError`, so
a caller can tell foldline's refusals from bugs.
"""

from __future__ import annotations


class FoldlineError(Exception):
    """Base of every error foldline raises on purpose."""


class ConfigError(FoldlineError, ValueError):
    """Bad input: the message names where (file and key path), the value and what was expected."""
