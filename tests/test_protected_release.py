"""Issue 28, item 3: the first round protected under one ceiling is released under one that cannot hold it.

A branch's first round is protected (seed 000 Amendment 4) when it fits a
tenth of the ceiling it was decided under. A later operation of the same
branch under a smaller ceiling, whose tenth the round does not fit, used to be
refused ("the fold found nothing it may take") where folding the round would
fit. Now the protection is revisited: released under that ceiling (one cache
miss, its cause recorded), kept under a ceiling that still holds it. Both
sides run the real send path against the simulator's counting code.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import calls, iterative, read, runtime_for, text

from actors.branch import Branch
from actors.operations import run_operation
from runtime.config import Profile
from runtime.fold.protected import ProtectedRound, revisit
from runtime.providers.scripted import ScriptedProvider
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy
from runtime.sim.clock import ManualClock
from runtime.sim.summary_policy import FoldSummaryPolicy

SYSTEM = "You read files one at a time and report what they say."
ROOMY = Profile(
    system=SYSTEM,
    tools=("synthetic_read",),
    max_input_tokens=200_000,
    context_management=True,
    prompt_caching=True,
    fold_policy="fixed",
)
LONG_TASK = "Now review the whole design against these notes. " + " ".join(
    f"Note {i}: the fold keeps every original recoverable by its index and checks it on the way back."
    for i in range(230)
)
"""A second operation's instruction of about 5,000 tokens: never folded (an instruction of the turn)."""


async def two_operations(second_ceiling: int) -> tuple[Branch, list[Any], Any, ProtectedRound | None]:
    """A first round (one read of about 3,500 tokens) protected under 200,000, then a long task under ``second_ceiling``."""
    script = [calls(read("docs/design.md", 14_000)), text("read it"), text("reviewed")]
    registry = PolicyRegistry({"n": ScriptPolicy("n", script)}, default=FoldSummaryPolicy())
    provider = ScriptedProvider(registry, clock=ManualClock(1_000.0))
    branch = Branch.create(system=SYSTEM, tools=())
    events: list[Any] = []
    async with runtime_for(provider) as rt:
        rt.signals.add_handler(events.append, name="t")
        env = rt.env()
        branch.configure(tools=env.registry.specs(ROOMY.tools))
        await run_operation(branch, iterative("Read the design."), env=env, profile=ROOMY, node_id="n")
        first = branch.state.protected_round
        outcome = None
        try:
            outcome = await run_operation(
                branch,
                iterative(LONG_TASK),
                env=env,
                profile=ROOMY.evolve(max_input_tokens=second_ceiling),
                node_id="n",
            )
        except Exception as exc:  # the refusal this issue removes
            outcome = exc
    return branch, events, outcome, first


@pytest.mark.anyio
async def test_under_a_ceiling_that_cannot_hold_it_the_round_is_released_and_folded() -> None:
    branch, events, outcome, first = await two_operations(9_000)
    assert first is not None and first.included and first.ceiling == 200_000
    assert first.size * 10 > 9_000  # the round does not fit a tenth of the second ceiling
    assert getattr(outcome, "answer", None) == "reviewed", outcome  # before: InputCeilingExceeded, nothing sent
    released = branch.state.protected_round
    assert released is not None and not released.included and released.ceiling == 9_000
    assert released.member_ids == first.member_ids and released.size == first.size
    assert not set(first.member_ids[2:]) <= set(branch.view_ids())  # its result folded away
    sent = [e.data for e in events if e.type == "ContextDecision" and e.data["sent"]]
    assert all(d["estimate_after"] <= d["ceiling"] for d in sent)
    rewrites = [e.data for e in events if e.type == "CacheRewrite"]
    assert len(rewrites) == 1 and "protected first round released" in rewrites[0]["cause"]  # one miss, explained


@pytest.mark.anyio
async def test_under_a_ceiling_that_still_holds_it_the_round_stays_protected() -> None:
    branch, events, outcome, first = await two_operations(60_000)
    assert first is not None and first.size * 10 <= 60_000
    assert getattr(outcome, "answer", None) == "reviewed", outcome
    assert branch.state.protected_round == first  # kept exactly: nothing revisited
    assert set(first.member_ids) <= set(branch.view_ids())
    assert not [e for e in events if e.type == "CacheRewrite"]


def test_revisit_releases_only_an_included_round_the_ceiling_cannot_hold() -> None:
    included = ProtectedRound(True, ("a", "b"), "d", 200_000, 20_000, 3_000, 1.0, None, 0.0, "r:2")
    assert revisit(None, 100, now=1.0, by="r:9") is None
    assert revisit(included, 30_000, now=1.0, by="r:9") is None  # 3,000 x 10 fits 30,000: kept
    released = revisit(included, 29_999, now=5.0, by="r:9")
    assert released is not None and not released.included
    assert (released.ceiling, released.budget, released.decided_by, released.decided_at) == (29_999, 2_999, "r:9", 5.0)
    assert included.releases_to(released) and not released.releases_to(included)
    excluded = ProtectedRound(False, ("a", "b"), "d", 20_000, 2_000, 3_000, 1.0, None, 0.0, "r:2")
    assert revisit(excluded, 100, now=1.0, by="r:9") is None
