"""Issue 11, case 12: measured in the provider's tokens from the first request, the calibration shared and kept.

Every test here runs the real send path against the simulator's own counting
code: the scripted provider in process (its count_tokens is the simulator's
count-tokens code) or the real ``anthropic`` SDK over HTTP to the simulated
server. What the server counts is what its responses bill (fresh + cache read +
cache write input), so "over by the server's count" is read from the usage.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import READER, ProviderWrapper, bounded, node, text

from actors.env import ModelScales
from runtime.contract.provider import ProviderError
from runtime.flows.flow import Flow
from runtime.measuring.model_calibration import UNCALIBRATED_MAX_SCALE, CalibrationBook, ModelCalibration
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.scripted import ScriptedProvider
from runtime.request.compiler import RequestSettings, compile_request
from runtime.runtime import Runtime
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.sim.clock import ManualClock
from runtime.sim.config import SimConfig
from runtime.sim.server import serve_simulator
from runtime.values.messages import Instruction

MODEL = "claude-haiku-5-5"
TASK = "Say what the notes below are about.\n" + " ".join(
    f"note {i}: the fold keeps every original recoverable by its index." for i in range(420)
)
"""A first request of about 6,000 o200k tokens: past MIN_CALIBRATION_TOKENS, so its count calibrates."""


def scripted_at(factor: float, scripts: dict[str, list[ScriptStep]]) -> ScriptedProvider:
    registry = PolicyRegistry({n: ScriptPolicy(n, steps) for n, steps in scripts.items()})
    return ScriptedProvider(registry, clock=ManualClock(1_000.0), token_factor=factor)


def decisions(events: list[Any]) -> list[dict[str, Any]]:
    return [dict(e.data) for e in events if e.type == "ContextDecision"]


def billed(events: list[Any]) -> list[int]:
    """What the server counted for each response (fresh + cache read + cache write input)."""
    return [
        sum(v for k, v in e.data["usage"].items() if k != "output_tokens")
        for e in events
        if e.type == "ResponseReceived"
    ]


async def run_flow(provider: Any, flow: Flow, **kw: Any) -> tuple[Any, list[Any], dict[str, Any]]:
    events: list[Any] = []
    clock = ManualClock(1_000.0)
    async with Runtime(provider=provider, clock=clock, monotonic=clock, model=MODEL, **kw) as rt:
        rt.signals.add_handler(events.append, name="t")
        result = await rt.run(flow)
        report = rt.report()
    return result, events, report


def one_node(ceiling: int | str, *, profile: Any = READER, instruction: str = TASK) -> Flow:
    return Flow([node("n", bounded(instruction), profile=profile.evolve(max_input_tokens=ceiling))])


_SERVER_COUNTS: dict[float, tuple[int, int]] = {}


async def server_count(factor: float) -> tuple[int, int]:
    """(our estimate at scale 1.0, the server's count) of the task's first request, with no notice."""
    if factor not in _SERVER_COUNTS:
        _, events, _ = await run_flow(scripted_at(factor, {"n": [text("ok")]}), one_node("none"))
        _SERVER_COUNTS[factor] = (decisions(events)[0]["estimate_after"], billed(events)[0])
    return _SERVER_COUNTS[factor]


# -- the case: a first request under the ceiling by our count, over by the server's ---------------


@pytest.mark.anyio
@pytest.mark.parametrize("factor", [1.15, 1.37])
async def test_a_first_request_over_by_the_servers_count_is_refused_with_nothing_sent(factor: float) -> None:
    ours, server = await server_count(factor)
    ceiling = (ours + server) // 2  # fits by our count at scale 1.0 (the bug), not by the server's
    assert ours <= ceiling < server
    provider = scripted_at(factor, {"n": [text("never sent")]})
    result, events, report = await run_flow(provider, one_node(ceiling))
    assert result["n"].status == "failed" and provider.app.requests == ()  # nothing on the wire
    (refused,) = decisions(events)
    assert refused["action"] == "refuse" and not refused["sent"]
    assert refused["provider_count"] == refused["estimate_after"] == server
    assert refused["method"] == "provider count_tokens" and refused["count_calls"] == 1
    assert report["count_tokens_calls"] == 1


@pytest.mark.anyio
async def test_at_the_servers_count_it_is_sent_and_the_count_is_asked_once() -> None:
    _, server = await server_count(1.37)
    provider = scripted_at(1.37, {"n": [text("ok")]})
    result, events, report = await run_flow(provider, one_node(server + 500))  # the notice needs room too
    assert result["n"].status == "ok"
    assert all(b <= server + 500 for b in billed(events))
    (decision,) = decisions(events)
    assert decision["sent"] and decision["provider_count"] == billed(events)[0]
    assert report["count_tokens_calls"] == decision["count_calls"] >= 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(-120, 120))
@example(offset=-1)
@example(offset=0)
@example(offset=40)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_property_near_a_fresh_branchs_first_request_nothing_over_is_sent_nothing_that_fits_is_refused(
    backend: str, offset: int
) -> None:
    """Random ceilings around the server's count of a fresh branch's first request, at factor 1.37.

    The band covers the bare request (offset < 0: over by the server's count)
    and the notice's room (0 <= offset < the notice's size: fits only without it).
    """
    _, server = anyio.run(server_count, 1.37, backend=backend)
    ceiling = server + offset

    async def run() -> tuple[Any, list[Any]]:
        result, events, _ = await run_flow(scripted_at(1.37, {"n": [text("ok")]}), one_node(ceiling))
        return result, events

    result, events = anyio.run(run, backend=backend)
    assert all(b <= ceiling for b in billed(events)), (billed(events), ceiling)  # nothing over is sent
    if server <= ceiling:  # nothing that fits (without the notice) is refused, for the notice's sake or any other
        assert result["n"].status == "ok", decisions(events)
    else:
        assert result["n"].status == "failed" and billed(events) == []


# -- a branch's own evidence, its dependencies', the run's start and the book for later runs ------------------


@attrs.define(eq=False)
class Ordered(ProviderWrapper):
    """Answers ``first``'s sends before ``then``'s: ``then`` waits (its count and its send) until ``first`` is answered."""

    first: str = "a"
    then: str = "c"
    answered: anyio.Event = attrs.field(factory=anyio.Event)

    async def count_tokens(self, request: Any) -> int:
        return await self.inner.count_tokens(request)

    async def send(self, request: Any, *, node_id: str | None) -> Any:
        if node_id == self.then:
            await self.answered.wait()
        reply = await self.inner.send(request, node_id=node_id)
        if node_id == self.first:
            self.answered.set()
        return reply


def diamond(ceiling: int) -> Flow:
    """a and c side by side (siblings: neither reads the other's evidence), b after both, d after b."""
    profile = READER.evolve(max_input_tokens=ceiling)
    return Flow(
        [
            node("a", bounded(TASK), profile=profile),
            node("c", bounded(TASK + " Briefly."), profile=profile),
            node("b", bounded(TASK + " Again."), profile=profile, depends_on=("a", "c")),
            node("d", bounded(TASK + " Once more."), profile=profile, depends_on=("b",)),
        ]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("first", ["a", "c"])
async def test_a_node_starts_with_its_dependencies_evidence_whatever_order_they_finished(first: str) -> None:
    ours, server = await server_count(1.15)
    ceiling = ours + ours // 2  # our count x 2 is over it: an uncalibrated model asks; calibrated it fits far under
    scales = ModelScales()
    scripts = {n: [text("ok")] for n in "abcd"}
    provider = Ordered(scripted_at(1.15, scripts), first=first, then="c" if first == "a" else "a")
    result, events, report = await run_flow(provider, diamond(ceiling), calibration=scales)
    assert result.status == "ok"
    sent = [e.node_id for e in events if e.type == "ResponseReceived"]
    assert sent.index(first) < sent.index("c" if first == "a" else "a")  # the order this case forces
    by_node = {e.node_id: dict(e.data) for e in events if e.type == "ContextDecision"}
    # Siblings each ask once for themselves: neither reads the other's evidence as it arrives.
    for name in ("a", "c"):
        assert by_node[name]["count_calls"] == 1 and by_node[name]["provider_count"] is not None
    # b and d start calibrated by their dependencies' evidence, but their first request is content that evidence
    # never saw (DESIGN.md section 13): bounded at the family's maximum it could pass the ceiling, so each asks once.
    shared = result.branches["a"].calibrations.joined(result.branches["c"].calibrations)
    assert shared.get(MODEL).calibrated
    bills = dict(zip(sent, billed(events), strict=True))
    for name in ("b", "d"):
        decision = by_node[name]
        assert decision["count_calls"] == 1 and decision["provider_count"] == bills[name]
        assert decision["method"] == "provider count_tokens" and decision["sent"]
        assert "new since the last calibrated request, bounded at 2 x" in decision["reason"]
    b_book = result.branches["b"].calibrations.get(MODEL)
    assert b_book.scale >= shared.get(MODEL).scale and b_book.samples >= shared.get(MODEL).samples  # never falls
    assert result.branches["d"].calibrations.get(MODEL).scale >= b_book.scale
    assert scales.get(MODEL) == ModelCalibration()  # the run's start is unchanged
    learned = scales.book.get(MODEL)  # the book for the next run learned every observation
    assert learned.calibrated and learned.scale == pytest.approx(server / ours, rel=0.05)
    assert scales.count_calls == report["count_tokens_calls"] == 4


@pytest.mark.anyio
async def test_the_dependents_decisions_do_not_hang_on_which_dependency_finished_first() -> None:
    ours, _ = await server_count(1.15)

    async def dependents(first: str) -> tuple[Any, ...]:
        scripts = {n: [text("ok")] for n in "abcd"}
        provider = Ordered(scripted_at(1.15, scripts), first=first, then="c" if first == "a" else "a")
        result, events, _ = await run_flow(provider, diamond(ours + ours // 2))
        decisions_ = [
            (e.node_id, e.data["estimate_after"], e.data["count_calls"], e.data["method"])
            for e in events
            if e.type == "ContextDecision" and e.node_id in ("b", "d")
        ]
        digests = [(e.node_id, e.data["digest"]) for e in events if e.type == "RequestSent" and e.node_id in "bd"]
        return decisions_, digests, result.branches["b"].calibrations, result.branches["d"].calibrations

    assert await dependents("a") == await dependents("c")


@pytest.mark.anyio
async def test_a_branch_takes_evidence_once_journaled_and_never_inside_a_turn() -> None:
    from actors.branch import Branch, BranchBusy, StateSet

    changes: list[Any] = []

    class Journal:
        def branch_created(self, branch: Branch) -> None:
            pass

        def changed(self, branch: Branch, batch: Any) -> None:
            changes.extend(batch)

    branch = Branch.create(system="s")
    branch.attach_journal(Journal())
    evidence = CalibrationBook().observe(MODEL, 5000, 6850)
    branch.take_evidence(evidence)
    assert branch.calibrations == evidence
    assert [type(c) for c in changes] == [StateSet] and changes[0].state.calibrations == evidence
    branch.take_evidence(evidence)  # again (a resumed node): nothing changes, nothing is journaled
    assert len(changes) == 1
    async with branch.turn():
        branch.take_evidence(evidence)  # nothing to take: no refusal
        with pytest.raises(BranchBusy, match="is in a turn"):
            branch.take_evidence(CalibrationBook().observe(MODEL, 5000, 7000))
    assert branch.calibrations.get(MODEL).scale == 1.37  # never falls: a lower scale's evidence keeps it
    branch.take_evidence(CalibrationBook().observe(MODEL, 5000, 5500))
    assert branch.calibrations.get(MODEL).scale == 1.37 and branch.calibrations.get(MODEL).low == 1.1


@pytest.mark.anyio
async def test_a_later_run_starts_from_the_book() -> None:
    ours, server = await server_count(1.15)
    scales = ModelScales()
    scripts = {n: [text("ok")] for n in "abcd"}
    await run_flow(scripted_at(1.15, scripts), diamond(ours + ours // 2), calibration=scales)
    learned = scales.book.get(MODEL)
    later = ModelScales(book=scales.book)  # calibrated from its first request
    result, events, report = await run_flow(scripted_at(1.15, scripts), diamond(ours + ours // 2), calibration=later)
    assert result.status == "ok" and later.count_calls == report["count_tokens_calls"]
    assert result.branches["a"].scale == pytest.approx(learned.scale)  # measured at the book's scale at once
    # The book describes the content it was fitted on, not these requests (DESIGN.md section 13): each node's
    # first request, bounded at the family's maximum, could pass the ceiling, so it is counted, and says why.
    for decision in decisions(events):
        assert decision["method"] == "provider count_tokens", decision
        assert "new since the last calibrated request" in decision["reason"]


@pytest.mark.anyio
async def test_no_ceiling_and_far_under_it_never_ask() -> None:
    provider = scripted_at(1.37, {"n": [text("ok")]})
    _, events, report = await run_flow(provider, one_node(100_000))
    assert report["count_tokens_calls"] == 0 and decisions(events)[0]["method"] == "o200k_base x scale"


# -- a count that fails, hangs or cannot be had: never hangs, never sends over, says why ---------------------


@attrs.define(eq=False)
class FailingCounts(ProviderWrapper):
    """Sends through ``inner``; its count-tokens endpoint fails (``mode``: error, hang or absent)."""

    mode: str = "error"
    asked: int = 0

    @property
    def counts_tokens(self) -> bool:
        return self.mode != "absent"

    async def count_tokens(self, request: Any) -> int:
        self.asked += 1
        if self.mode == "hang":
            await anyio.Event().wait()  # never answers
        raise ProviderError("count_tokens: HTTP 529 overloaded_error: Overloaded", status=529)

    async def send(self, request: Any, *, node_id: str | None) -> Any:
        return await self.inner.send(request, node_id=node_id)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("error", "failed (count_tokens: HTTP 529 overloaded_error"),
        ("hang", "failed (no answer within 0.05 s)"),
        ("absent", "has no count-tokens endpoint"),
    ],
)
async def test_without_a_count_the_prior_decides_and_the_decision_says_why(mode: str, why: str) -> None:
    ours, server = await server_count(1.37)
    fallback = math.ceil(ours * UNCALIBRATED_MAX_SCALE)
    assert server <= fallback  # the family's uncalibrated maximum holds for every factor the simulator takes
    # At or over the bound (the notice's room included) it is sent without asking; under it, no count to be had
    # means the bound decides: refused, nothing sent, and the decision says why.
    provider = FailingCounts(scripted_at(1.37, {"n": [text("ok")]}), mode=mode)
    result, events, _ = await run_flow(provider, one_node(fallback + 600), count_timeout_s=0.05)
    assert result["n"].status == "ok" and provider.asked == 0
    assert all(b <= fallback + 600 for b in billed(events))
    provider = FailingCounts(scripted_at(1.37, {"n": [text("ok")]}), mode=mode)
    result, events, _ = await run_flow(provider, one_node(fallback - 1), count_timeout_s=0.05)
    assert result["n"].status == "failed" and billed(events) == []
    decision = decisions(events)[0]
    assert decision["method"] == "o200k_base x conservative scale" and decision["provider_count"] is None
    assert why in decision["reason"] and f"the uncalibrated maximum scale 2 for {MODEL}" in decision["reason"]
    assert provider.asked == (0 if mode == "absent" else 1)  # a failed count is not asked again this turn


# -- the real SDK over HTTP: the same count as the simulator's own code --------------------------------------


@pytest.mark.anyio
async def test_the_sdk_count_is_the_simulators_count_and_a_failure_is_a_provider_error() -> None:
    request = compile_request(
        system="Be brief.", tools=(), view=[Instruction(TASK)], settings=RequestSettings(model=MODEL)
    )
    policies = PolicyRegistry(default=ScriptPolicy("default", [ScriptStep(text="ok")]))
    clock = ManualClock()
    in_process = await ScriptedProvider(policies, clock=clock, token_factor=1.37).count_tokens(request)
    async with serve_simulator(SimConfig(token_factor=1.37), policies, clock, sleep=clock.sleep) as sim:
        provider = AnthropicProvider.create(api_key="sk-sim-count-test", base_url=sim.base_url)
        try:
            assert provider.counts_tokens and await provider.count_tokens(request) == in_process
            unknown = compile_request(
                system=None, tools=(), view=[Instruction("hi")], settings=RequestSettings(model="no-such-model")
            )
            with pytest.raises(ProviderError, match="count_tokens: HTTP 404 not_found_error") as caught:
                await provider.count_tokens(unknown)
            assert "sk-sim-count-test" not in str(caught.value)
            reply = await provider.send(request, node_id=None)
        finally:
            await provider.aclose()
    assert reply.usage.total_input == in_process  # what the count says is what the response bills


# -- every shipped scenario, at both factors: nothing over by the server's count ------------------------------


def _script_module() -> Any:
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "scripts" / "over_ceiling_by_server.py"
    spec = importlib.util.spec_from_file_location("foldline_over_ceiling", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


OVER = _script_module()


@pytest.mark.anyio
@pytest.mark.parametrize("factor", OVER.FACTORS)
@pytest.mark.parametrize("path", OVER.scenario_paths(), ids=lambda p: p.name)
async def test_no_shipped_scenario_sends_over_its_ceiling_by_the_servers_count(path: Path, factor: float) -> None:
    tally = await OVER.scenario_tally(path, factor, "scripted")
    assert tally.responses > 0 and tally.over == 0, tally.worst


# -- the calibration kept in the store: a resumed run and a new run start calibrated -------------------------


def stored_scenario(tmp_path: Path, ceiling: int) -> Path:
    """Two nodes in turn, each a first request of about 6,000 tokens under ``ceiling``."""
    path = tmp_path / "calibrated.toml"
    path.write_text(
        f"""schema = "foldline.scenario/v1"
name = "calibrated"
[provider]
kind = "scripted"
model = "{MODEL}"
token_factor = 1.37
[profiles.default]
system = "You answer briefly."
max_input_tokens = {ceiling}
[[nodes]]
id = "a"
operation = "bounded"
instruction = {TASK!r}
script = [{{ text = "A." }}]
[[nodes]]
id = "b"
depends_on = ["a"]
operation = "bounded"
instruction = {(TASK + " Again.")!r}
script = [{{ text = "B." }}]
""",
        encoding="utf-8",
    )
    return path


@pytest.mark.anyio
async def test_the_store_keeps_the_calibration_for_resume_and_for_a_new_run(tmp_path: Path) -> None:
    from runtime.config.loader import load_scenario
    from runtime.scenarios.run import run_scenario
    from runtime.store.reader import StoreReader
    from runtime.store.run import resume_stored_run, run_scenario_stored, stored_calibration

    ours, _ = await server_count(1.37)
    path = stored_scenario(tmp_path, ours + ours // 2)
    scenario = load_scenario(path, tool_names=("synthetic_read",))
    store = tmp_path / "run.sqlite3"
    with anyio.CancelScope() as scope:  # stopped (Ctrl-C) once a's response is in: b has not started

        def stop_after_a(event: Any) -> None:
            if event.type == "ResponseReceived" and event.node_id == "a":
                scope.cancel()

        await run_scenario_stored(scenario, store_path=store, progress=stop_after_a)
    kept = stored_calibration(store).get(MODEL)
    assert kept.calibrated and kept.scale > 1.2  # a's exact count (and response) at factor 1.37

    with StoreReader(store) as reader:
        stopped_at = reader.last_seq()
    resumed = await resume_stored_run(store)
    assert resumed.report["status"] == "ok"
    with StoreReader(store) as reader:
        b_decisions = [dict(e.data) for e in reader.events(["ContextDecision"]) if e.node_id == "b"]
        assert all(e.seq > stopped_at for e in reader.events(["ContextDecision"]) if e.node_id == "b")
        assert reader.calibration().get(MODEL).scale >= kept.scale  # kept, and never fallen
    # The resumed run decides as the uninterrupted one: b starts with a's evidence (kept in a's stored branch);
    # its first turn is content that evidence never saw, so it is counted once (DESIGN.md section 13).
    assert b_decisions and b_decisions[0]["count_calls"] == 1

    seen: list[Any] = []
    fresh = await run_scenario(scenario, progress=seen.append)  # without the store's book: a asks, b takes a's
    assert fresh.report["count_tokens_calls"] >= 1
    fresh_b = [dict(e.data) for e in seen if e.type == "ContextDecision" and e.node_id == "b"]
    assert [d["estimate_after"] for d in fresh_b] == [d["estimate_after"] for d in b_decisions]
    seeded = await run_scenario(scenario, calibration=ModelScales(book=stored_calibration(store)))
    assert seeded.report["status"] == "ok"


@pytest.mark.anyio
async def test_a_tampered_stored_calibration_is_refused_naming_the_model(tmp_path: Path) -> None:
    import sqlite3

    from runtime.store.errors import StoreCorrupt
    from runtime.store.journal import RunStore
    from runtime.store.reader import StoreReader

    path = tmp_path / "s.sqlite3"
    async with await RunStore.create(
        path, run_id="run-1", scenario_text="", scenario_path="x.toml", provider_kind="scripted"
    ) as store:
        scales = ModelScales(keeper=store)
        scales.observe(MODEL, 5000, 6850)
        scales.observe(MODEL, 5000, 5000)  # no change to the scale: the row keeps the largest and the lowest
        await store.flush()
    with StoreReader(path) as reader:
        kept = reader.calibration().get(MODEL)
    assert (kept.scale, kept.low, kept.samples) == (1.37, 1.0, 2)
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE calibration SET scale = 0.5")
    with StoreReader(path) as reader, pytest.raises(StoreCorrupt, match=f"calibration of '{MODEL}'.*scale"):
        reader.calibration()
