"""A branch's context state: one frozen value, replaced whole on each change (owned by :mod:`actors.branch`)."""

from __future__ import annotations

import attrs

from runtime.errors import InputCeilingExceeded
from runtime.fold.marks import FoldMark
from runtime.fold.protected import ProtectedRound
from runtime.measuring.model_calibration import CalibrationBook


@attrs.frozen
class ContextState:
    """A branch's context state: a frozen value replaced whole on each change.

    - ``scale``: the calibration (>= 1.0, never falls).
    - ``delivered``: ids a completed main request carried (only these may fold).
    - ``refusal``: the sticky refusal, if any.
    - ``protected_round``: the first-round decision
      (:class:`runtime.fold.protected.ProtectedRound`), None while pending.
    - ``pending_marks``: the model's fold marks
      (:class:`runtime.fold.marks.FoldMark`) waiting for the next commit.
    - ``recovered``: originals restored or read (and recovery answers) since
      the last completed main request; no fold pass takes them before it.
    - ``last_request_digests``, ``rewrite_cause``: the append-only check and
      the recorded cause of the next rewrite (a fold commit or a restore).
    - ``fold_next``: the tool results the last completed main request carried
      fresh, with no cache mark after them, because the next request folds
      them once read (:meth:`runtime.cache.TailSkip.fold_next`); empty
      otherwise. A clone keeps those it sees: a child inherits its emitter's
      pending fold (:mod:`actors.inherit_fold`).
    """

    scale: float = 1.0
    delivered: frozenset[str] = frozenset()
    refusal: InputCeilingExceeded | None = None
    protected_round: ProtectedRound | None = None
    pending_marks: tuple[FoldMark, ...] = ()
    last_request_digests: tuple[str, ...] = ()
    rewrite_cause: str | None = None
    last_stable: tuple[str, str, str] | tuple[()] = ()
    """Digests of the last request's tools, system text and model (empty before the first)."""
    request_serial: int = 0
    """Requests this branch has started (numbers its request ids; never reused, across resumes too)."""
    open_turn: tuple[int, int] | None = None
    """While an operation runs: (instructions appended, requests completed); None between turns."""
    recovered: frozenset[str] = frozenset()
    calibrations: CalibrationBook = CalibrationBook()
    """This branch's own evidence of the provider's counts, by model (exact counts and large responses)."""
    calibrated_digests: tuple[str, ...] = ()
    """Message digests of the last request that evidence came from (what the calibration has seen)."""
    fold_next: frozenset[str] = frozenset()
