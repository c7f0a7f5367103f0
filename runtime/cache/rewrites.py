"""Where one request stops being a prefix of the next: the rewrite detector.

The send path remembers what each request was made of (the digests of its
stable segment's parts and of each rendered message, marks left out) and
checks the next request against it. A change of the stable segment (tools,
system text, model and tool choice) rewrites everything after it and is
reported with what changed; a message that differs from the one at its place
in the previous request is reported with the recorded cause (a fold commit,
a restore), or as unexplained when none was recorded. Pure: digests in, a
:class:`Rewrite` or None out.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from runtime.values.canonical import sha256_hex

STABLE_PARTS = ("tools", "system text", "model")
"""The parts of the stable segment whose digests :func:`stable_digests` returns, in order."""


def stable_digests(
    tool_pieces: Sequence[str], system: str | None, model: str, tool_choice_json: str | None
) -> tuple[str, str, str]:
    """Digests of the parts of the stable segment whose change rewrites the whole prefix."""
    tools = sha256_hex("\x1e".join(tool_pieces))
    system_digest = sha256_hex(system or "")
    settings = sha256_hex(f"{model}\x1e{tool_choice_json}")
    return tools, system_digest, settings


@attrs.frozen
class Rewrite:
    """An earlier prefix the next request does not keep: from which message, and why (None: unexplained)."""

    first_changed_message: int
    cause: str | None


def find_rewrite(
    last_stable: tuple[str, ...],
    last_messages: Sequence[str],
    stable: tuple[str, str, str],
    messages: Sequence[str],
    cause: str | None,
) -> Rewrite | None:
    """The rewrite the request (``stable``, ``messages``) makes of the previous one, if any.

    ``last_stable`` empty means there was no previous request. A stable
    segment change is the whole rewrite (from message 0); otherwise the first
    message of the previous request that differs (or that the request lacks)
    is reported with ``cause``.
    """
    if last_stable and stable != last_stable:
        changed = [name for name, a, b in zip(STABLE_PARTS, last_stable, stable, strict=True) if a != b]
        return Rewrite(0, f"stable segment changed: {', '.join(changed)}")
    previous = tuple(last_messages)
    if not previous or tuple(messages[: len(previous)]) == previous:
        return None
    padded = tuple(messages) + ("",) * len(previous)
    first = next(i for i, (a, b) in enumerate(zip(previous, padded, strict=False)) if a != b)
    return Rewrite(first, cause)
