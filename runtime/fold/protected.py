"""The protected first round (seed 000 Amendment 4), while the prompt cache is placed.

The **first round** is the conversation's first instruction, its answer and
that answer's tool results. There is none before its answer (and all its
results) exist, and none when a note directly follows the first instruction
(the note stands for rounds it folded).

With caching on and a fold installed, the round is **decided once**, in the
compile of the first request that carries it whole: included when its
messages, compiled alone and scaled, come to at most a tenth of the ceiling
(equality fits), excluded otherwise. The decision is recorded on the branch
(:class:`ProtectedRound`) and kept by clones. Until it is decided the round
is pending, and a pending round is protected. An included round is protected
from every fold stage and both clip paths, and the end of it is a cache
anchor.

It is revisited once, only to release it (issue 28): when a later request of
the branch runs under a ceiling whose tenth cannot hold the round (a clone, or
a later operation, under a smaller ceiling), :func:`revisit` releases it, so a
fold may take it where the protection would have had the request refused. That
costs one cache miss (the anchor goes), and the caller records its cause.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from runtime.values.canonical import sha256_hex
from runtime.values.messages import AssistantResponse, Instruction, Message, Note, ToolResult


@attrs.frozen
class ProtectedRound:
    """A recorded first-round decision.

    ``member_ids`` in view order; ``digest`` over the members' digests;
    ``size`` the round's scaled estimate against ``budget`` (a tenth of
    ``ceiling``); ``result_bound`` the bound its results compiled under;
    ``decided_at`` the injected clock's time; ``decided_by`` the request id.
    """

    included: bool
    member_ids: tuple[str, ...]
    digest: str
    ceiling: int
    budget: int
    size: int
    scale: float
    result_bound: int | None
    decided_at: float
    decided_by: str

    @property
    def end_id(self) -> str:
        return self.member_ids[-1]

    def releases_to(self, other: ProtectedRound) -> bool:
        """Whether ``other`` is this included round released under a smaller ceiling (:func:`revisit`)."""
        return self.included and not other.included and other.member_ids == self.member_ids


def revisit(decision: ProtectedRound | None, ceiling: int, *, now: float, by: str) -> ProtectedRound | None:
    """The release of an included ``decision`` a tenth of ``ceiling`` cannot hold, else None (kept as it is).

    The round keeps its members, digest and size; the release records the
    ceiling in force, the time and the request that released it.
    """
    if decision is None or not decision.included or decision.size * 10 <= ceiling:
        return None
    return attrs.evolve(
        decision, included=False, ceiling=ceiling, budget=ceiling // 10, decided_at=float(now), decided_by=by
    )


def release_cause(released: ProtectedRound, kept_under: int) -> str:
    """The rewrite cause a release records (the one cache miss it costs)."""
    return (
        f"protected first round released: its {released.size} tokens no longer fit a tenth of the ceiling "
        f"{released.ceiling} (protected under {kept_under})"
    )


def first_round(view: Sequence[Message]) -> tuple[Message, ...] | None:
    """The view's complete first round, or None (see the module docstring)."""
    i = next((k for k, m in enumerate(view) if isinstance(m, Instruction)), None)
    if i is None or i + 1 >= len(view):
        return None
    message = view[i]
    answer = view[i + 1]
    if isinstance(answer, Note) or not isinstance(answer, AssistantResponse):
        return None
    members: list[Message] = [message, answer]
    wanted = [call.call_id for call in answer.tool_calls]
    if wanted:
        results = {m.call_id: m for m in view[i + 2 :] if isinstance(m, ToolResult) and m.call_id in wanted}
        if len(results) != len(wanted):
            return None
        members.extend(results[call_id] for call_id in wanted)
    return tuple(members)


def decide(
    round_messages: Sequence[Message],
    *,
    estimate_of: Callable[[Sequence[Message]], int],
    ceiling: int,
    scale: float,
    result_bound: int | None,
    now: float,
    by: str,
) -> ProtectedRound:
    """Decide the first round once: included when its scaled estimate is at most a tenth of the ceiling."""
    size = estimate_of(round_messages)
    return ProtectedRound(
        included=size * 10 <= ceiling,
        member_ids=tuple(m.id for m in round_messages),
        digest=sha256_hex("\n".join(m.sha256 for m in round_messages)),
        ceiling=ceiling,
        budget=ceiling // 10,
        size=size,
        scale=scale,
        result_bound=result_bound,
        decided_at=float(now),
        decided_by=by,
    )


def protected_ids(decision: ProtectedRound | None, view: Sequence[Message]) -> frozenset[str]:
    """Ids the fold may not take: an included round's members, or a pending round's."""
    if decision is None:
        pending = first_round(view)
        return frozenset(m.id for m in pending) if pending else frozenset()
    if decision.included:
        return frozenset(decision.member_ids)
    return frozenset()


def round_end_in_view(decision: ProtectedRound | None, view_ids: Sequence[str]) -> str | None:
    """The id of the last member of an included round still in the view (its cache anchor)."""
    if decision is None or not decision.included:
        return None
    present = set(view_ids)
    for member in reversed(decision.member_ids):
        if member in present:
            return member
    return None
