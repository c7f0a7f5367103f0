"""The Anthropic SDK's retry rules, as pure functions.

foldline runs the SDK with ``max_retries=0`` and retries itself, by the SDK's
own rules, so that every attempt is measured and recorded before it is sent.
The rules (the SDK's ``_base_client``): retry connection errors and timeouts,
and statuses 408, 409, 429 and >= 500; an ``x-should-retry`` header of
``true``/``false`` overrides the status; wait ``retry-after-ms``, else
``retry-after`` (seconds or an HTTP date) when 0 < wait <= 60 s, else
``min(0.5 * 2**n, 8)`` seconds times a jitter in (0.75, 1].
"""

from __future__ import annotations

from collections.abc import Mapping

INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
DEFAULT_MAX_RETRIES = 2
RETRYABLE_STATUSES = frozenset({408, 409, 429})


def should_retry(status: int | None, headers: Mapping[str, str]) -> bool:
    """Whether a failed attempt is retried (``status`` None: a connection error)."""
    override = {k.lower(): v for k, v in headers.items()}.get("x-should-retry")
    if override == "true":
        return True
    if override == "false":
        return False
    if status is None:
        return True
    return status in RETRYABLE_STATUSES or status >= 500


def _retry_after(headers: Mapping[str, str], now: float) -> float | None:
    lower = {k.lower(): v for k, v in headers.items()}
    value = lower.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        import email.utils  # an HTTP date is rare; email.utils (and the socket module it brings) loads then

        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return float(email.utils.mktime_tz(parsed)) - now


def retry_delay(retries_done: int, headers: Mapping[str, str], *, jitter: float, now: float) -> float:
    """Seconds to wait before the next attempt.

    ``retries_done`` counts retries already made (0 before the first retry);
    ``jitter`` is a uniform random number in [0, 1) supplied by the caller.
    """
    after = _retry_after(headers, now)
    if after is not None and 0 < after <= 60:
        return after
    sleep = min(INITIAL_RETRY_DELAY * (2.0**retries_done), MAX_RETRY_DELAY)
    return max(sleep * (1 - 0.25 * jitter), 0.0)
