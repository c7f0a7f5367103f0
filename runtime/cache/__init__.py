"""Prompt-cache placement, the pure core (seed 001, Amendments 3 and 4).

Everything here is a synchronous function over frozen values: ``now`` and
process ids are arguments; there is no I/O, clock or event loop.

- :mod:`runtime.cache.certificates`: prefix certificates and lookback positions.
- :mod:`runtime.cache.reach`: which entries a mark reaches.
- :mod:`runtime.cache.ledger`: a branch's rows, written after each response.
- :mod:`runtime.cache.placement`: choosing a request's marks.
- :mod:`runtime.cache.verdict`: judging the read after the response.
- :mod:`runtime.cache.apply`: writing the marks into the payload.
- :mod:`runtime.cache.tail_skip`: no turn mark on a request a fold will follow.
- :mod:`runtime.cache.rewrites`: the rewrite detector (where one request stops being a prefix of the next).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime.values.exports import lazy_getattr

if TYPE_CHECKING:
    from runtime.cache.apply import apply_marks
    from runtime.cache.certificates import (
        BlockRef,
        CertifiedPayload,
        certify,
        certify_payload,
    )
    from runtime.cache.errors import CacheInputError
    from runtime.cache.ledger import CacheLedger
    from runtime.cache.marks import Mark
    from runtime.cache.placement import place_marks
    from runtime.cache.reach import reaches
    from runtime.cache.record import G1, Entry, Placement, Skipped
    from runtime.cache.rows import LedgerRow
    from runtime.cache.tail_skip import TailSkip, TailSkipRecord
    from runtime.cache.verdict import ReadVerdict, evaluate_read

# Loaded on first use, so that a module needing one part (the compiler needs
# runtime.request.prepared) does not import placement, ledger and the rest.
_EXPORTS = {
    "apply_marks": "runtime.cache.apply",
    "BlockRef": "runtime.cache.certificates",
    "CertifiedPayload": "runtime.cache.certificates",
    "certify": "runtime.cache.certificates",
    "certify_payload": "runtime.cache.certificates",
    "CacheInputError": "runtime.cache.errors",
    "CacheLedger": "runtime.cache.ledger",
    "Mark": "runtime.cache.marks",
    "place_marks": "runtime.cache.placement",
    "reaches": "runtime.cache.reach",
    "G1": "runtime.cache.record",
    "Entry": "runtime.cache.record",
    "Placement": "runtime.cache.record",
    "Skipped": "runtime.cache.record",
    "LedgerRow": "runtime.cache.rows",
    "TailSkip": "runtime.cache.tail_skip",
    "TailSkipRecord": "runtime.cache.tail_skip",
    "ReadVerdict": "runtime.cache.verdict",
    "evaluate_read": "runtime.cache.verdict",
}

__all__ = [
    "G1",
    "BlockRef",
    "CacheInputError",
    "CacheLedger",
    "CertifiedPayload",
    "Entry",
    "LedgerRow",
    "Mark",
    "Placement",
    "ReadVerdict",
    "Skipped",
    "TailSkip",
    "TailSkipRecord",
    "apply_marks",
    "certify",
    "certify_payload",
    "evaluate_read",
    "place_marks",
    "reaches",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS)
