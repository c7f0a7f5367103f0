"""Removing a secret from text that leaves the process, masked and partial forms included (pure).

A proxy or gateway may echo a key masked (``sk-ant-...23456789``) or cut
(``sk-ant-api03-AbCd...``); replacing only the exact key lets such tails
through. :func:`scrub_secret` removes every run of :data:`MIN_RUN` or more
characters that appears in the secret, wherever it sits in the text: each
window of ``MIN_RUN`` characters found among the secret's own windows is
covered, and every covered run becomes ``[redacted]``. A run shorter than
``MIN_RUN`` (``sk-ant-`` itself, seven characters) is left: it is shared by
every key and tells nothing.

The windows are found with ``str.find`` (one scan of the text per distinct
window of the secret, in C), so a tool's 2 MB output is scrubbed in
milliseconds rather than a Python step per character.

:func:`redact_named` is the other rule, for values that are not the
provider's key but sit in the environment under a secret-looking name
(``*_KEY``, ``*_TOKEN``, ...): their whole value is replaced by
``[NAME redacted]``. Only whole values: a variable such as ``SSH_AUTH_SOCK``
holds a path whose pieces are ordinary text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

MIN_RUN = 8
REDACTED = "[redacted]"
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
"""Environment variable names whose values are redacted whole from text that leaves a tool."""
MIN_SECRET_CHARS = 8
"""A named value shorter than this is not redacted (it would match ordinary words)."""

Scrub = Callable[[str], str]


def _covered(text: str, secret: str, min_run: int) -> list[tuple[int, int]]:
    """The merged spans of ``text`` covered by a window of ``secret``, in order."""
    spans: list[tuple[int, int]] = []
    for window in {secret[i : i + min_run] for i in range(len(secret) - min_run + 1)}:
        at = text.find(window)
        while at != -1:
            spans.append((at, at + min_run))
            at = text.find(window, at + 1)
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def scrub_secret(text: str, secret: str | None, *, min_run: int = MIN_RUN) -> str:
    """``text`` with every run of ``min_run``+ characters of ``secret`` replaced by ``[redacted]``.

    A secret shorter than ``min_run`` is replaced where it appears whole.
    """
    if not secret or not text:
        return text
    if len(secret) < min_run:
        return text.replace(secret, REDACTED)
    spans = _covered(text, secret, min_run)
    if not spans:
        return text
    out: list[str] = []
    done = 0
    for start, end in spans:
        out.append(text[done:start])
        out.append(REDACTED)
        done = end
    out.append(text[done:])
    return "".join(out)


def redact_named(text: str, environ: Mapping[str, str]) -> str:
    """``text`` with the whole value of each secret-looking variable of ``environ`` replaced by its name."""
    for name, value in environ.items():
        if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_CHARS and value in text:
            text = text.replace(value, f"[{name} redacted]")
    return text


def scrubber(secrets: Iterable[str | None]) -> Scrub:
    """One function scrubbing every secret of ``secrets`` (and its pieces) from a text."""
    held = tuple(s for s in secrets if s)

    def scrub(text: str) -> str:
        for secret in held:
            text = scrub_secret(text, secret)
        return text

    return scrub
