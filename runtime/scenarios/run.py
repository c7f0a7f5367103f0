"""Running a scenario file: from frozen scenario values to a finished run.

:func:`build_flow` turns a :class:`~runtime.config.Scenario` into a
:class:`~runtime.flows.flow.Flow` and the policy registry that scripts each node's
model; :func:`run_scenario` opens the provider the scenario names (by default
the simulated Anthropic server on loopback), runs the flow in a
:class:`~runtime.runtime.Runtime` and returns its report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.branch import BranchJournal
from actors.env import ModelScales
from actors.tools import BUILTIN_TOOLS, ToolRegistry
from runtime.config import Scenario
from runtime.config.operation import Operation
from runtime.flows.flow import Flow, FlowResult, Node
from runtime.providers.factory import open_provider
from runtime.runtime import Runtime
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy
from runtime.sim.summary_policy import FoldSummaryPolicy
from signals.bus import Gap, SignalBus
from signals.envelope import Event


def build_flow(scenario: Scenario) -> Flow:
    """The flow a scenario describes (nodes in file order)."""
    nodes = []
    for spec in scenario.nodes:
        operation = Operation(
            kind=spec.operation,
            instructions=spec.planned_instructions(),
            max_rounds=spec.max_rounds,
            max_input_tokens=spec.max_input_tokens,
            output=spec.output,
        )
        nodes.append(
            Node(
                id=spec.id,
                operation=operation,
                profile=scenario.profile_of(spec.id),
                depends_on=spec.depends_on,
                spawned_by=spec.spawned_by,
                inherit=spec.inherit,
                inputs=spec.inputs,
                accept_failures=spec.accept_failures,
            )
        )
    return Flow(nodes, concurrency=scenario.run.concurrency, spawn_limit=scenario.run.spawn_limit)


def build_policies(scenario: Scenario) -> PolicyRegistry:
    """One script policy per node with a ``script``; a node without one is answered
    by the default model (:mod:`runtime.scripted.default_model`, each offered tool once); fold summary requests
    (which name no node) by the deterministic extractive summarizer."""
    return PolicyRegistry(
        {spec.id: ScriptPolicy(spec.id, spec.script) for spec in scenario.nodes if spec.script},
        default=FoldSummaryPolicy(),
        fallback=DefaultModel(calls="each", request_unique_ids=False),
    )


@attrs.frozen
class ScenarioRun:
    report: dict[str, Any]
    result: FlowResult


async def run_scenario(
    scenario: Scenario,
    *,
    provider_kind: str | None = None,
    signals_path: str | Path | None = None,
    registry: ToolRegistry = BUILTIN_TOOLS,
    clock: Callable[[], float] = time.time,
    progress: Callable[[Event | Gap], None] | None = None,
    run_id: str | None = None,
    journal: BranchJournal | None = None,
    attach: Sequence[Callable[[SignalBus], object]] = (),
    calibration: ModelScales | None = None,
    tune_gc: bool = False,
) -> ScenarioRun:
    """Run a whole scenario and return its report and per-node outcomes.

    ``journal`` (a durable store) receives every branch's changes; each
    callable in ``attach`` is given the run's signal bus before the run starts
    (e.g. a store's signal sink); ``tune_gc`` as :class:`~runtime.runtime.Runtime`'s
    (the command line's runs turn it on).
    """
    spec = scenario.provider if provider_kind is None else scenario.provider.with_kind(provider_kind)
    flow = build_flow(scenario)
    extra: dict[str, Any] = {"run_id": run_id} if run_id is not None else {}
    if calibration is not None:
        extra["calibration"] = calibration  # the run's calibration book (a stored run's is kept in its store)
    async with open_provider(spec, build_policies(scenario), clock=clock, run_id=run_id) as provider:
        async with Runtime(
            provider=provider,
            model=spec.model_config,
            registry=registry,
            clock=clock,
            signals_path=signals_path,
            scenario=scenario.name,
            journal=journal,
            tune_gc=tune_gc,
            pricing=scenario.prices(),
            **extra,
        ) as rt:
            for hook in attach:
                hook(rt.signals)
            if progress is not None:
                rt.signals.add_handler(progress, policy="block", name="progress")
            result = await rt.run(flow)
            report = rt.report()
    return ScenarioRun(report=report, result=result)
