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
