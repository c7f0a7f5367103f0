"""Removing a secret from text that leaves the process, masked and partial forms included (pure).

A proxy or gateway may echo a key masked (``sk-ant-...23456789``) or cut
(``sk-ant-api03-AbCd...``); replacing only the exact key lets such tails
through. :func:`scrub_secret` removes every run of :data:`MIN_RUN` or more
characters that appears in the secret, wherever it sits in the text: each
window of ``MIN_RUN`` characters found among the secret's own windows is
covered, and every covered run becomes ``[redacted]``. A run shorter than
``MIN_RUN`` (``sk-ant-`` itself, seven characters) is left: it is shared by
every key and tells nothing.
"""

from __future__ import annotations

MIN_RUN = 8
REDACTED = "[redacted]"


def scrub_secret(text: str, secret: str | None, *, min_run: int = MIN_RUN) -> str:
    """``text`` with every run of ``min_run``+ characters of ``secret`` replaced by ``[redacted]``.

    A secret shorter than ``min_run`` is replaced where it appears whole.
    """
    if not secret or not text:
        return text
    if len(secret) < min_run:
        return text.replace(secret, REDACTED)
    windows = {secret[i : i + min_run] for i in range(len(secret) - min_run + 1)}
    covered = bytearray(len(text))
    for i in range(len(text) - min_run + 1):
        if text[i : i + min_run] in windows:
            covered[i : i + min_run] = b"\x01" * min_run
    if not any(covered):
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        if covered[i]:
            while i < len(text) and covered[i]:
                i += 1
            out.append(REDACTED)
        else:
            j = i
            while j < len(text) and not covered[j]:
                j += 1
            out.append(text[i:j])
            i = j
    return "".join(out)
