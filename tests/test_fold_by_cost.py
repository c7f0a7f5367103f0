"""Folding by cost on the send path: the profile key, the growth meter, the cost model's target, FoldCommitted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from support import calls, iterative, node, read, runtime_for, scripted, text

from actors.branch import Branch
from actors.folding import view_growth
from runtime.config import Profile
from runtime.errors import ConfigError
from runtime.flows.flow import Flow
from runtime.fold.cost import COST_TARGETS, CostPrices, usage_cost
from runtime.fold.settings import DEFAULT_POLICY, FoldSettings
from runtime.scripted.policies import ScriptStep
from runtime.values.messages import AssistantResponse, Instruction, Message, Note, TextPart, ToolResult
from runtime.values.usage import Usage

SYSTEM = "You read files one at a time and report what they say. " * 4
CEILING = 20_000
BY_COST = Profile(
    system=SYSTEM,
    tools=("synthetic_read",),
    max_input_tokens=CEILING,
    context_management=True,
    prompt_caching=True,
)


def reading(n: int, size: int = 5000) -> list[ScriptStep]:
    return [calls(read(f"src/m{i:02d}.py", size)) for i in range(n)] + [text("done")]


async def run(profile: Profile, steps: Sequence[ScriptStep]) -> tuple[Any, list[Any], dict[str, Any]]:
    events: list[Any] = []
    async with runtime_for(scripted({"n": steps})) as rt:
        rt.signals.add_handler(events.append, name="test")
        result = await rt.run(Flow([node("n", iterative("read", max_rounds=60), profile=profile)]))
        report = rt.report()
    return result, events, report


def of(events: Sequence[Any], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


# -- the profile key ----------------------------------------------------------------------------


def test_the_default_policy_is_cost_in_the_profile_and_the_settings() -> None:
    assert Profile().fold_policy == "cost" == DEFAULT_POLICY == FoldSettings(ceiling=1_000).policy


def test_a_policy_that_is_not_cost_or_fixed_is_refused_with_its_key_path() -> None:
    with pytest.raises(ConfigError, match=r'profiles\.reader\.fold_policy: "cheapest" is not one of "cost", "fixed"'):
        Profile.from_obj({"fold_policy": "cheapest"}, "profiles.reader")
    with pytest.raises(ConfigError, match="fold_policy"):
        Profile(fold_policy=1)  # type: ignore[arg-type]


def test_only_the_fold_strategy_folds_by_cost() -> None:
    assert FoldSettings(ceiling=1_000).by_cost
    assert not FoldSettings(ceiling=1_000, policy="fixed").by_cost
    assert not FoldSettings(ceiling=1_000, strategy="compaction").by_cost


# -- the growth meter ---------------------------------------------------------------------------


class Counted:
    """A measurer counting each message's text length in tokens of four characters, at scale 2."""

    scale = 2.0

    def estimate(self, view: Sequence[Message]) -> int:
        return sum(self.block_tokens(m)[0] for m in view)

    def block_tokens(self, message: Message) -> tuple[int, int]:
        if isinstance(message, ToolResult):
            size = len(message.output)
        elif isinstance(message, AssistantResponse):
            size = sum(len(p.text) for p in message.parts if isinstance(p, TextPart))
        elif isinstance(message, Instruction):
            size = len(message.text)
        else:
            size = 4_000
        return size // 4, size


@pytest.mark.anyio
async def test_growth_is_the_mean_of_what_each_request_carried_new_and_skips_fold_and_side_messages() -> None:
    branch = Branch.create(system=None)
    async with branch.turn() as turn:
        turn.append(Instruction("t" * 400))  # before the first response: not growth
        turn.append(AssistantResponse((TextPart("a" * 40),)))
        assert view_growth(turn, Counted()) is None  # one increment is not a rate
        turn.append(Instruction("u" * 360))
        turn.append(AssistantResponse((TextPart("b" * 80),)))
        turn.append(Instruction("v" * 120))
        turn.deliver(m.id for m in branch.view())
        # A fold's note and a summary prompt outside the view are not the view's growth.
        turn.add_to_record(Note("[note] " + "x" * 40, (), 1, "tool_io"))
        turn.add_to_record(Instruction("summarize " + "s" * 4_000))
        # (40 + 360) / 4 = 100 and (80 + 120) / 4 = 50 tokens, at scale 2: a mean of 150.
        assert view_growth(turn, Counted()) == pytest.approx(150.0)
        turn.append(AssistantResponse((TextPart("c" * 400),)))  # a third increment of 100 tokens
        assert view_growth(turn, Counted()) == pytest.approx((100 + 50 + 100) / 3 * 2)
        assert view_growth(turn, Counted(), window=2) == pytest.approx((100 + 50) / 2 * 2)


# -- on the send path ---------------------------------------------------------------------------


def _cycle_starts(events: Sequence[Any]) -> dict[int, int]:
    """For each FoldCommitted (by position): where its send's spending was taken (after the last main reply)."""
    side = {e.request_id for e in events if e.type == "RequestSent" and e.data["intent"] == "side"}
    starts: dict[int, int] = {}
    last_main = 0
    for i, e in enumerate(events):
        if e.type == "ResponseReceived" and e.request_id not in side:
            last_main = i + 1
        elif e.type == "FoldCommitted":
            starts[i] = last_main
    return starts


def _spent(events: Sequence[Any], start: int, end: int, prices: CostPrices) -> float:
    return sum(usage_cost(Usage(**e.data["usage"]), prices) for e in events[start:end] if e.type == "ResponseReceived")


@pytest.mark.anyio
async def test_the_cost_policy_folds_to_its_chosen_target_and_records_prediction_and_realised_cost() -> None:
    # The verbatim tail's cost line (fold after read is tests/test_fold_after_read.py's).
    result, events, report = await run(BY_COST.evolve(fold_tail="verbatim"), reading(30))
    assert result.status == "ok", result["n"].reason
    decisions = [d.data for d in of(events, "ContextDecision") if d.data["sent"]]
    assert all(d["estimate_after"] <= CEILING for d in decisions)
    folded = [d for d in decisions if d["stages"]]
    assert folded and all("(cost model): " in d["reason"] for d in folded)
    # The line and target each decision names are the ones in force: every fold began at or past its line.
    main = [d for d in decisions if not d["reason"].startswith("fold summary request")]
    assert main and all(d["fold_line"] is not None and d["fold_target"] is not None for d in main)
    assert all(d["estimate_before"] >= d["fold_line"] or d["estimate_before"] > CEILING for d in folded)
    commits = of(events, "FoldCommitted")
    assert len(commits) >= 3, "30 reads of 5,000 characters under 20,000 tokens must fold several times"
    targets = {round(t * CEILING) for t in COST_TARGETS}
    for commit in commits:
        data = commit.data
        assert data["policy"] == "cost" and data["target_tokens"] in targets
        assert data["growth_tokens"] > 0 and data["predicted_bit"] > 0 and data["predicted_requests"] >= 1
    assert commits[0].data["realised_bit"] is None and commits[0].data["realised_requests"] is None
    # Each later commit records what the cycle the previous one started cost: every reply priced.
    prices = CostPrices()  # the scripted provider's model is not in the pricing table: the defaults
    positions = [i for i, e in enumerate(events) if e.type == "FoldCommitted"]
    starts = _cycle_starts(events)
    for before, after in zip(positions, positions[1:], strict=False):
        data = events[after].data
        assert data["realised_bit"] == pytest.approx(_spent(events, starts[before], starts[after], prices), abs=0.01)
        mains = sum(1 for e in events[starts[before] : starts[after]] if e.type == "ContextDecision" and e.data["sent"])
        assert data["realised_requests"] >= 1 and data["realised_requests"] <= mains
    assert report["bytes_unrecoverable"] == 0 and report["rewrites"]["unexplained"] == 0


@pytest.mark.anyio
async def test_the_fixed_policy_folds_toward_its_target_and_predicts_nothing() -> None:
    result, events, _ = await run(BY_COST.evolve(fold_policy="fixed"), reading(30))
    assert result.status == "ok", result["n"].reason
    commits = [c.data for c in of(events, "FoldCommitted")]
    assert commits
    for data in commits:
        assert data["policy"] == "fixed" and data["target_tokens"] == int(0.6 * CEILING)
        assert data["predicted_bit"] is None and data["growth_tokens"] is None
    assert all(d.data["estimate_before"] >= 0.8 * CEILING for d in of(events, "ContextDecision") if d.data["stages"])


@pytest.mark.anyio
async def test_the_cost_policy_costs_less_than_the_fixed_fractions_on_a_long_reading_run() -> None:
    _, by_cost, cost_report = await run(BY_COST, reading(30))
    _, fixed, fixed_report = await run(BY_COST.evolve(fold_policy="fixed"), reading(30))
    assert cost_report["cost"]["bit"] < fixed_report["cost"]["bit"]
    assert of(by_cost, "FoldCommitted") and of(fixed, "FoldCommitted")
