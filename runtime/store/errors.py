"""The store's error types. Every message names what was wrong and where."""

from __future__ import annotations

from runtime.errors import FoldlineError


class StoreError(FoldlineError):
    """Base of every error the store raises on purpose."""


class NotAStore(StoreError):
    """A path that is missing, or is not a foldline store (or is one of an unknown schema)."""


class StorePathRefused(StoreError):
    """A path a new store cannot be created at (it already holds a run, or its directory is missing)."""


class StoreInUse(StoreError):
    """Another process holds the store for writing (a run or a resume is going on)."""


class StoreCorrupt(StoreError):
    """The store's content is malformed: a row is missing, unreadable or fails its SHA-256."""


class StoreEncodeError(StoreError):
    """A value cannot be written to the store (its type has no stored form)."""


class StoreWriteFailed(StoreError):
    """The store's writer failed; nothing more is written and the run cannot be made durable."""


class ReplayError(StoreError):
    """A stored request cannot be rebuilt or does not rebuild to its recorded digest.

    ``request`` names the request (its id and its row in the store).
    """

    def __init__(self, request: str, problem: str) -> None:
        super().__init__(f"request {request}: {problem}")
        self.request = request
        self.problem = problem


class UnknownRecipe(ReplayError):
    """The request was built by a compiler recipe version this build cannot rebuild."""


class ReplayMismatch(ReplayError):
    """The rebuilt request's SHA-256 differs from the digest recorded when it was sent."""


class NothingToResume(StoreError):
    """The stored run has already finished (or never started)."""
