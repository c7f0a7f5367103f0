"""A branch's cache ledger: the entries its completed requests wrote or read.

Rows are keyed by prefix certificate and written only from a completed
request's own placement and usage (:meth:`CacheLedger.after_response`), never
at compile time. Rows leave at expiry. Past ``max_rows`` (512) the rows that
matter least are evicted: five-minute rows first, then the shortest prefixes
(an unknown length counts as shortest), then the soonest to expire; the latest
expiry evicted is kept as a watermark, and until then the read guarantee does
not apply (g1 is excluded with ``ledger_evicted``).

Evidence is per process: a row counts as established only for the process
that saw it. A clone should start from :meth:`CacheLedger.empty`; a ledger
restored from records (:meth:`CacheLedger.from_records`) or kept across a
process boundary (:meth:`CacheLedger.without_evidence`) keeps its rows as
probe candidates but no evidence.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from typing import Any

import attrs

from runtime.cache.errors import CacheInputError
from runtime.cache.marks import TTL_SECONDS, Lifetime
from runtime.cache.record import Placement
from runtime.cache.rows import LedgerRow
from runtime.cache.verdict import attempt_route, evaluate_read
from runtime.values.usage import Usage

MAX_ROWS = 512


def _frozen_rows(value: Mapping[str, LedgerRow]) -> Mapping[str, LedgerRow]:
    return types.MappingProxyType(dict(value))


def _eviction_key(row: LedgerRow) -> tuple[int, int, float]:
    return (
        0 if row.lifetime == "5m" else 1,
        -1 if row.stored_length is None else row.stored_length,
        row.expires_at,
    )


def _check_time(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CacheInputError(f"{name} {value!r} is not a finite time in seconds")
    return float(value)


def _check_id(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise CacheInputError(f"{name} {value!r} is not a non-empty string")
    return value


@attrs.frozen
class CacheLedger:
    """The rows of one branch, at most ``max_rows``, and the eviction watermark."""

    rows: Mapping[str, LedgerRow] = attrs.field(factory=dict, converter=_frozen_rows)
    watermark: float | None = None
    max_rows: int = MAX_ROWS

    def __attrs_post_init__(self) -> None:
        if isinstance(self.max_rows, bool) or not isinstance(self.max_rows, int) or self.max_rows < 1:
            raise CacheInputError(f"max_rows {self.max_rows!r} is not a positive integer")
        for key, row in self.rows.items():
            if not isinstance(row, LedgerRow) or row.certificate != key:
                raise CacheInputError(
                    f"ledger row under {key!r} is {row!r:.80}; expected a LedgerRow keyed by its certificate"
                )

    @classmethod
    def empty(cls, *, max_rows: int = MAX_ROWS) -> CacheLedger:
        """A ledger with no rows and no evidence (what a clone starts with)."""
        return cls(rows={}, watermark=None, max_rows=max_rows)

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, certificate: str) -> LedgerRow | None:
        return self.rows.get(certificate)

    def live_rows(self, now: float) -> tuple[LedgerRow, ...]:
        return tuple(row for row in self.rows.values() if row.live(now))

    def guarantee_suspended(self, now: float) -> bool:
        """Whether an evicted row may still be live at ``now`` (the read guarantee does not apply)."""
        return self.watermark is not None and now < self.watermark

    def pruned(self, now: float) -> CacheLedger:
        """This ledger without the rows expired at ``now``."""
        now = _check_time("now", now)
        if all(row.live(now) for row in self.rows.values()):
            return self
        return attrs.evolve(self, rows={k: row for k, row in self.rows.items() if row.live(now)})

    def without_evidence(self) -> CacheLedger:
        """The same rows with no process's evidence: every row is a probe candidate, none established."""
        return attrs.evolve(self, rows={k: attrs.evolve(row, seen=()) for k, row in self.rows.items()})

    def after_response(
        self,
        placement: Placement,
        usage: Usage,
        attempt_start: float,
        route: str,
        process_id: str,
    ) -> CacheLedger:
        """The ledger after one attempt of ``placement`` completed with ``usage``.

        - Expired rows (at ``attempt_start``) leave.
        - Each marked entry is recorded as written on ``route`` by
          ``process_id``, marked at ``attempt_start``, expiring one lifetime
          later. Its lifetime is the mark's, except that a row still live with
          a shorter lifetime keeps the shorter one: the mark may have read
          that entry rather than written a new one, and the shorter lifetime
          is the one that cannot overstate.
        - The deepest mark's stored length becomes read + cache write. When
          the response wrote one-hour tokens, the deepest one-hour mark's
          stored length becomes read + one-hour write: the API bills
          read(A) + 1h-write(B - A) + 5m-write(C - B), A the deepest hit, B
          the deepest 1h mark after it, C the last mark, so a positive 1h
          write puts B exactly there. Neither is recorded with a server tool
          in the request, whose usage need not describe this prefix alone.
        - An identified hit's read time moves to ``attempt_start`` and its
          lifetime renews from there.
        - When usage shows nothing read and nothing written, nothing was
          cached (the prefix was below the model's minimum), so no entry is
          recorded as written.
        - Past ``max_rows``, rows are evicted (see the module docstring).
        """
        if not isinstance(placement, Placement):
            raise CacheInputError(f"placement is {type(placement).__name__}, expected a Placement")
        if not isinstance(usage, Usage):
            raise CacheInputError(f"usage is {type(usage).__name__}, expected runtime.values.usage.Usage")
        start = _check_time("attempt_start", attempt_start)
        route = attempt_route(placement, _check_id("route", route))
        process_id = _check_id("process_id", process_id)

        rows = dict(self.pruned(start).rows)
        stored_total = usage.cache_read_input_tokens + usage.cache_write_tokens
        deepest = placement.deepest_mark()
        one_hour = [mark for mark in placement.marks if mark.ttl == "1h"]
        deepest_1h = one_hour[-1] if one_hour and usage.cache_write_1h_tokens > 0 else None
        if stored_total > 0:
            for mark in placement.marks:
                ref = placement.ref_at(mark.location)
                old = rows.get(ref.certificate)
                lifetime: Lifetime = mark.ttl
                if old is not None and TTL_SECONDS[old.lifetime] < TTL_SECONDS[lifetime]:
                    lifetime = old.lifetime
                stored_length = None if old is None else old.stored_length
                if not placement.server_tool:
                    if mark == deepest:
                        stored_length = stored_total
                    elif mark == deepest_1h:
                        stored_length = usage.cache_read_input_tokens + usage.cache_write_1h_tokens
                row = LedgerRow(
                    certificate=ref.certificate,
                    lifetime=lifetime,
                    tier=ref.tier,
                    stored_length=stored_length,
                    last_marked=start,
                    last_read=None if old is None else old.last_read,
                    expires_at=start + TTL_SECONDS[lifetime],
                    seen=() if old is None else old.seen,
                )
                rows[ref.certificate] = row.seen_on(route, process_id)

        verdict = evaluate_read(placement, usage, attempt_start=start, route=route)
        if verdict.hit == "identified" and verdict.hit_certificate is not None:
            hit_row = rows.get(verdict.hit_certificate)
            if hit_row is None:
                # Pruned at attempt_start, yet the provider still served it.
                hit_row = next(e.row for e in placement.landing if e.certificate == verdict.hit_certificate)
            rows[verdict.hit_certificate] = hit_row.refreshed(start).seen_on(route, process_id)

        return self._evicted_to_fit(rows)

    def _evicted_to_fit(self, rows: dict[str, LedgerRow]) -> CacheLedger:
        watermark = self.watermark
        excess = len(rows) - self.max_rows
        if excess > 0:
            for row in sorted(rows.values(), key=_eviction_key)[:excess]:
                del rows[row.certificate]
                watermark = row.expires_at if watermark is None else max(watermark, row.expires_at)
        return attrs.evolve(self, rows=rows, watermark=watermark)

    def to_records(self) -> dict[str, Any]:
        """A JSON-ready form for a store (``metadata["prompt_cache"]``)."""
        return {
            "rows": [row.to_dict() for row in self.rows.values()],
            "watermark": self.watermark,
            "max_rows": self.max_rows,
        }

    @classmethod
    def from_records(cls, records: Mapping[str, Any]) -> CacheLedger:
        """Rebuild a stored ledger, with no evidence (it is read in another process).

        A row without the shape :meth:`to_records` writes is dropped.
        """
        if not isinstance(records, Mapping):
            raise CacheInputError(f"ledger records are {type(records).__name__}, expected a mapping")
        max_rows = records.get("max_rows", MAX_ROWS)
        watermark = records.get("watermark")
        if watermark is not None:
            watermark = _check_time("ledger watermark", watermark)
        rows: dict[str, LedgerRow] = {}
        raw_rows = records.get("rows")
        for raw in raw_rows if isinstance(raw_rows, list) else ():
            row = _row_from_record(raw)
            if row is not None:
                rows[row.certificate] = row
        ledger = cls(rows={}, watermark=watermark, max_rows=max_rows)
        return ledger._evicted_to_fit(rows)


def _row_from_record(raw: Any) -> LedgerRow | None:
    if not isinstance(raw, Mapping):
        return None
    try:
        certificate = raw["certificate"]
        stored = raw["stored_length"]
        last_read = raw["last_read"]
        if not isinstance(certificate, str) or len(certificate) != 64:
            return None
        return LedgerRow(
            certificate=certificate,
            lifetime=raw["lifetime"],
            tier=raw["tier"],
            stored_length=stored,
            last_marked=_check_time("last_marked", raw["last_marked"]),
            last_read=None if last_read is None else _check_time("last_read", last_read),
            expires_at=_check_time("expires_at", raw["expires_at"]),
            seen=(),
        )
    except (KeyError, CacheInputError):
        return None
