"""Running a scenario with a store, and resuming a stored run.

:func:`run_scenario_stored` is ``foldline run SCENARIO --store PATH``: the run
of :func:`runtime.scenarios.run.run_scenario`, with every branch change,
request and event written to the store as it happens (the scenario file's
text and path, the provider and the run id go in first, so the run can be
rebuilt without the file).

:func:`resume_stored_run` is ``foldline resume PATH``: it rebuilds the
scenario from the store, restores every branch, plans each node
(:func:`runtime.store.resume.plan_resume`), starts each node's script after
the requests it completed, and runs the flow again under the same run id,
numbering events after the last stored one. Finished nodes are not run
again; a node stopped mid-turn continues from its last stored state (calls a
Ctrl-C answered with "not run: cancelled" leave its view and run). The
report is rebuilt from all the run's stored events, the stopped run's and
the resumed run's, so its totals are the whole run's.

The run's calibration book (the provider/o200k scale per model
configuration, :mod:`runtime.measuring.model_calibration`) is kept in the store as it
changes, and :func:`stored_calibration` hands it to a new run
(``Runtime(calibration=ModelScales(book=...))``), which starts calibrated. A
resumed run starts from what the stopped run started from (nothing: a stored
run starts fresh), each branch with the evidence its stored state kept, so it
decides exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from actors.branch import Branch
from actors.env import ModelScales
from actors.tools import BUILTIN_TOOLS, ToolRegistry
from runtime.config import Scenario
from runtime.config.loader import loads_scenario
from runtime.errors import ConfigError
from runtime.measuring.model_calibration import CalibrationBook
from runtime.models.pricing import PricingTable
from runtime.providers.factory import open_provider
from runtime.report import ReportBuilder
from runtime.runtime import Runtime
from runtime.scenarios.run import ScenarioRun, build_flow, build_policies, run_scenario
from runtime.scenarios.tools import stored_run_tools, workspace_root
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy
from runtime.store.errors import NothingToResume, StoreError
from runtime.store.events_sink import SqliteSink
from runtime.store.integrity import (
    check_events_cover_rows,
    check_inputs,
    check_root,
    root_meta,
    stored_scenario_label,
)
from runtime.store.journal import RunStore
from runtime.store.reader import StoreReader
from runtime.store.resume import ResumePlan, plan_resume, view_without_cancelled_results
from signals.bus import Gap
from signals.envelope import Event


def policies_resumed_at(registry: PolicyRegistry, cursors: dict[str, int]) -> PolicyRegistry:
    """``registry`` with each node's script policy starting after its completed requests."""
    policies = dict(registry.policies)
    for node_id, policy in registry.policies.items():
        cursor = cursors.get(node_id, 0)
        if isinstance(policy, ScriptPolicy) and cursor:
            policies[node_id] = ScriptPolicy(policy.node_id, policy.steps, start=min(cursor, len(policy.steps)))
    return attrs.evolve(registry, policies=policies)


def stored_calibration(path: str | os.PathLike[str]) -> CalibrationBook:
    """The calibration book a stored run kept (for a new run to start from)."""
    with StoreReader(path) as reader:
        return reader.calibration()


def report_from_store(path: str | os.PathLike[str], model: str, pricing: PricingTable | None = None) -> dict:
    """The run's report rebuilt from every event in the store (priced by ``pricing``, else the packaged table);
    refused when the events miss stored requests."""
    with StoreReader(path) as reader:
        events = reader.events()
        check_events_cover_rows(reader.requests(), events, reader.label)
    return ReportBuilder(pricing or PricingTable.load_default(), model).feed_all(events).to_json()


async def run_scenario_stored(
    scenario: Scenario,
    *,
    store_path: str | os.PathLike[str],
    provider_kind: str | None = None,
    signals_path: str | Path | None = None,
    progress: Callable[[Event | Gap], None] | None = None,
    registry: ToolRegistry = BUILTIN_TOOLS,
    clock: Callable[[], float] = time.time,
    tools_meta: Mapping[str, str] | None = None,
) -> ScenarioRun:
    """Run a scenario, storing it as it goes (see the module docstring).

    ``tools_meta`` (:func:`runtime.scenarios.tools.tools_meta`) names the user's
    ``--tools`` registry so a resume loads it again; the built-ins, ``read_image``
    and the workspace tools are loaded again from the scenario itself.
    """
    if scenario.path is None:
        raise StoreError("a stored run needs its scenario file (this scenario was not loaded from one)")
    scenario_text = Path(scenario.path).read_text(encoding="utf-8")
    spec = scenario.provider if provider_kind is None else scenario.provider.with_kind(provider_kind)
    run_id = "run-" + secrets.token_hex(6)
    async with await RunStore.create(
        store_path,
        run_id=run_id,
        scenario_text=scenario_text,
        scenario_path=scenario.path,
        provider_kind=spec.kind,
        extra_meta={**(tools_meta or {}), **root_meta(workspace_root(scenario))},
    ) as store:
        run = await run_scenario(
            scenario,
            tune_gc=True,  # the command line's stored run: the process is its own
            provider_kind=spec.kind,
            signals_path=signals_path,
            registry=registry,
            clock=clock,
            progress=progress,
            run_id=run_id,
            journal=store,
            attach=(SqliteSink(store).attach,),
            calibration=ModelScales(keeper=store),
        )
        await store.flush()
    return run


ENGINE_META_KEY = "engine"
"""The meta key naming the engine a stored run ran on (absent: this process, ``local``)."""


def load_stored_plan(
    path: str | os.PathLike[str], *, registry: ToolRegistry | None = None
) -> tuple[Scenario, ResumePlan, dict[str, str], ToolRegistry]:
    """The stored run's scenario, its resume plan, its meta and its tools; :class:`NothingToResume` if it finished.

    Without ``registry`` the run's own tools are loaded again
    (:func:`runtime.scenarios.tools.stored_run_tools`): the built-ins,
    ``read_image`` beside the scenario file, the workspace tools and the
    ``--tools`` registry it was run with.
    """
    with StoreReader(path) as reader:
        meta = reader.meta()
        for key in ("run_id", "scenario_text", "scenario_path", "provider_kind"):
            if key not in meta:
                raise StoreError(f"{reader.label}: holds no run to resume (its meta has no {key!r})")
        check_inputs(meta, reader.label)
        events = reader.events()
        if any(event.type == "RunFinished" for event in events):
            raise NothingToResume(f"{reader.label}: run {meta['run_id']} already finished; there is nothing to resume")
        if meta.get(ENGINE_META_KEY, "local") != "local":
            raise StoreError(
                f"{reader.label}: run {meta['run_id']} ran on the {meta[ENGINE_META_KEY]} engine, which continues it "
                "itself (start a worker: `foldline worker`); `foldline resume` continues local runs only"
            )
        if registry is None:
            tools = stored_run_tools(meta)
            scenario = _stored_scenario(meta, tools.names(), reader.label)
            _check_workspace(meta, scenario, reader.label)
            registry = tools.registry(scenario)
        else:
            scenario = _stored_scenario(meta, registry.names(), reader.label)
            _check_workspace(meta, scenario, reader.label)
        branches = reader.restore_branches()
        plan = plan_resume(
            scenario,
            branches=branches,
            branch_rows=reader.branch_rows(),
            requests=reader.requests(),
            events=events,
        )
    return scenario, plan, meta, registry


def _stored_scenario(meta: Mapping[str, str], tool_names: frozenset[str], label: str) -> Scenario:
    """The stored scenario; an error in it names the store (runtime.store.integrity), not the user's file."""
    where = stored_scenario_label(label, meta)
    scenario = loads_scenario(meta["scenario_text"], path_label=where, tool_names=tool_names)
    return scenario.evolve(path=meta["scenario_path"])


def _check_workspace(meta: Mapping[str, str], scenario: Scenario, label: str) -> None:
    """Refuse a resume whose workspace root is gone or is not the run's (runtime.store.integrity.check_root)."""
    try:
        resolved, why_not = workspace_root(scenario), None
    except ConfigError as exc:
        resolved, why_not = None, str(exc)
    check_root(meta, resolved, why_not, label)


async def _drop_cancelled_results(branch: Branch) -> None:
    view = view_without_cancelled_results(branch)
    if view is not None:
        async with branch.turn() as turn:
            turn.set_view(view)


async def resume_stored_run(
    store_path: str | os.PathLike[str],
    *,
    provider_kind: str | None = None,
    progress: Callable[[Event | Gap], None] | None = None,
    registry: ToolRegistry | None = None,
    clock: Callable[[], float] = time.time,
) -> ScenarioRun:
    """Continue a stored run that stopped (see the module docstring); ``registry`` defaults to the run's own tools."""
    scenario, plan, meta, registry = load_stored_plan(store_path, registry=registry)
    spec = scenario.provider.with_kind(provider_kind or meta["provider_kind"])
    policies = policies_resumed_at(build_policies(scenario), dict(plan.cursors))
    flow = build_flow(scenario)
    async with await RunStore.open_existing(store_path) as store:
        for restored in plan.restored.values():
            if restored.branch is not None and restored.branch.id in plan.node_branches.values():
                restored.branch.attach_journal(store)
                if restored.outcome is None:
                    await _drop_cancelled_results(restored.branch)
        async with open_provider(spec, policies, clock=clock, run_id=meta["run_id"]) as provider:
            async with Runtime(
                provider=provider,
                model=spec.model_config,
                registry=registry,
                clock=clock,
                tune_gc=True,  # resume is the command line's: the process is its own
                run_id=meta["run_id"],
                scenario=scenario.name,
                journal=store,
                first_seq=plan.first_seq,
                pricing=scenario.prices(),
                calibration=ModelScales(book=store.calibration, keeper=store, start=CalibrationBook()),
            ) as rt:
                SqliteSink(store).attach(rt.signals)
                if progress is not None:
                    rt.signals.add_handler(progress, policy="block", name="progress")
                for recovered in plan.recovered:
                    await rt.signals.publish(recovered.event, node_id=recovered.node_id, branch_id=recovered.branch_id)
                result = await rt.run(flow, restored=plan.restored)
        await store.flush()
    report = report_from_store(store_path, spec.model_config.name, scenario.prices())
    return ScenarioRun(report=report, result=result)
