"""The Runtime: the entry point for running flows in code.

::

    async with Runtime(provider=provider, model="claude-haiku-5-5") as rt:
        async with rt.signals.subscribe(policy="drop_oldest") as events:
            ...
        result = await rt.run(flow)
        print(rt.report()["status"])

A runtime owns one run: its signal bus (and the JSONL sink when asked), the
provider it was given, the pricing table, the token counter and the tool
registry. It builds each node's branch from the node's profile, runs the flow
under supervision, audits that every message any view let go of is still
recoverable byte for byte, and keeps a report rebuilt from the events.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import anyio
import attrs

from actors.env import DEFAULT_COUNT_TIMEOUT_S, ModelScales, RunEnv
from actors.tools import BUILTIN_TOOLS, ToolRegistry
from runtime.config.provider import ModelConfig
from runtime.contract.provider import Provider
from runtime.flows.flow import Flow, FlowResult, Node, Restored, run_flow
from runtime.fold.audit import unrecoverable_bytes
from runtime.logs import bound_contextvars, get_logger
from runtime.measuring.measure import TokenCounter
from runtime.models.pricing import PricingTable
from runtime.report import ReportBuilder
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.ids import IdSource, current_ids, use_ids
from signals.bus import Gap, SignalBus
from signals.envelope import Event
from signals.events import RunFinished, RunStarted
from signals.sinks import JsonlSink

if TYPE_CHECKING:
    from actors.branch import Branch, BranchJournal
    from actors.conversation import Conversation
    from runtime.config.profile import Profile

log = get_logger("foldline.runtime")


def audit_recoverability(branches: list[Branch]) -> int:
    """Bytes of what the run's conversations worked on that can no longer be had back.

    Two checks per branch: every record message's content must still match its
    SHA-256 (a corrupted original counts whole), and every original a view let
    go of must still have a recovery path (:func:`runtime.fold.audit.unrecoverable_bytes`:
    what a compaction dropped, or a note naming a message the record lacks).
    """
    bad = 0
    for branch in branches:
        for message in branch.record_messages():
            text = canonical_json(message.content())
            if sha256_hex(text) != message.sha256:
                bad += len(text.encode("utf-8"))
        bad += unrecoverable_bytes(branch)
    return bad


DEFAULT_MODEL = "claude-haiku-5-5"

GC_YOUNG_THRESHOLD = 10_000
"""Allocations between two young collections during a run (Python's default is 700): a run makes
many small long-lived values (messages, pieces, events) and each young collection walks the survivors;
at 10,000 the scale run's collector share halved (``scripts/scale.py``). Garbage cycles wait at most
that many allocations longer."""

_tuned = False


def tune_collector() -> bool:
    """Set the cyclic collector up for a run, once a process; True if it did now.

    Modules, classes, the pricing and model tables, the tool registry, a
    scenario and its scripts live as long as the process: every full
    collection would walk them again. A collection first (start-up's own
    garbage cycles would otherwise be kept for good), then ``gc.freeze()``:
    the objects stay, reference counting still frees them, the collector
    no longer scans them. Then young collections come every
    :data:`GC_YOUNG_THRESHOLD` allocations (a host's higher setting is kept).
    Once: a later run's objects are that run's, not start-up's.
    """
    global _tuned
    if _tuned:
        return False
    _tuned = True
    gc.collect()
    gc.freeze()
    young, *older = gc.get_threshold()
    if young < GC_YOUNG_THRESHOLD:
        gc.set_threshold(GC_YOUNG_THRESHOLD, *older)
    return True


def _model_config(model: str | ModelConfig) -> ModelConfig:
    """A model name or configuration as a configuration."""
    return ModelConfig(name=model) if isinstance(model, str) else model


@attrs.define(eq=False)
class Runtime:
    """One run of flows against one provider. Use as an async context manager."""

    provider: Provider
    model: ModelConfig = attrs.field(
        default=attrs.Factory(lambda: ModelConfig(name=DEFAULT_MODEL)), converter=_model_config
    )
    pricing: PricingTable = attrs.field(factory=PricingTable.load_default)
    registry: ToolRegistry = BUILTIN_TOOLS
    clock: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    ids: IdSource = attrs.field(factory=current_ids, kw_only=True)
    """Where the run's ids come from (random by default; a deterministic host passes its own)."""
    run_id: str = attrs.field(default=attrs.Factory(lambda self: self.ids.run_id(), takes_self=True))
    signals_path: str | Path | None = None
    scenario: str | None = None
    journal: BranchJournal | None = None
    first_seq: int = 1
    """Event numbering for this run (a resumed run continues its predecessor's)."""
    jitter: Callable[[], float] = attrs.field(default=random.random, kw_only=True)
    """A uniform number in [0, 1) for each retry's wait (a deterministic host, e.g. a workflow, passes its own)."""
    calibration: ModelScales = attrs.field(factory=ModelScales, kw_only=True)
    """The run's calibration book (one per run; a stored run's comes from its store)."""
    count_timeout_s: float = attrs.field(default=DEFAULT_COUNT_TIMEOUT_S, kw_only=True)
    """How long a send waits for the provider's count-tokens answer before deciding on the fallback."""
    tune_gc: bool = attrs.field(default=False, kw_only=True)
    """Before the process's first flow runs, freeze start-up's objects and space young collections
    (:func:`tune_collector`). Off by default: a library leaves its host's collector alone (a frozen object
    is never scanned again, a cost only the process's owner should choose); the command line turns it on."""
    _stack: AsyncExitStack | None = attrs.field(default=None, init=False)
    _bus: SignalBus | None = attrs.field(default=None, init=False)
    _report: ReportBuilder | None = attrs.field(default=None, init=False)
    _report_done: anyio.Event | None = attrs.field(default=None, init=False)
    _counter: TokenCounter = attrs.field(factory=TokenCounter, init=False)

    async def __aenter__(self) -> Self:
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            self._bus = await stack.enter_async_context(SignalBus(self.run_id, self.clock, first_seq=self.first_seq))
            if self.signals_path is not None:
                JsonlSink(self.signals_path).attach(self._bus)
            self._report = ReportBuilder(self.pricing, self.model.name)
            self._report_done = anyio.Event()
            self._bus.add_handler(self._feed_report, policy="block", maxsize=4096, name="report")
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        assert self._stack is not None
        return await self._stack.__aexit__(exc_type, exc, traceback)

    def _feed_report(self, event: Event | Gap) -> None:
        assert self._report is not None and self._report_done is not None
        if isinstance(event, Gap):
            raise TypeError("the report's blocking subscription lost events")  # a block policy never drops
        self._report.feed(event)
        if event.type == "RunFinished":
            self._report_done.set()

    @property
    def signals(self) -> SignalBus:
        """The run's signal bus: ``async with rt.signals.subscribe(...) as events``."""
        if self._bus is None:
            raise RuntimeError("the runtime is not open: use `async with Runtime(...) as rt`")
        return self._bus

    def env(self) -> RunEnv:
        return RunEnv(
            run_id=self.run_id,
            bus=self.signals,
            provider=self.provider,
            model=self.model,
            pricing=self.pricing,
            counter=self._counter,
            registry=self.registry,
            clock=self.clock,
            monotonic=self.monotonic,
            process_id=self.run_id,
            journal=self.journal,
            ids=self.ids,
            jitter=self.jitter,
            calibration=self.calibration,
            count_timeout_s=self.count_timeout_s,
        )

    def new_branch(self, node: Node) -> Branch:
        """A fresh branch set up from a node's profile (system text and tools)."""
        from actors.branch import Branch  # the branch and its record load with the first node (not with the import)

        profile = node.profile
        with use_ids(self.ids):
            return Branch.create(system=profile.system, tools=self.registry.specs(profile.tools))

    def branch(self, profile: Profile | None = None, *, name: str | None = None) -> Conversation:
        """A branch you can talk to: ``await rt.branch(profile).run("...")`` (see :mod:`actors.conversation`)."""
        from actors.conversation import Conversation
        from runtime.config.profile import Profile

        return Conversation.open(self, profile if profile is not None else Profile(), name=name)

    async def run(self, flow: Flow, *, restored: Mapping[str, Restored] | None = None) -> FlowResult:
        """Run a flow to completion and publish its start and finish.

        ``restored`` resumes an interrupted run (see :func:`runtime.flows.flow.run_flow`).
        """
        with bound_contextvars(run_id=self.run_id), use_ids(self.ids):
            return await self._run(flow, restored)

    async def _run(self, flow: Flow, restored: Mapping[str, Restored] | None) -> FlowResult:
        bus = self.signals
        await bus.publish(
            RunStarted(scenario=self.scenario, provider=self.provider.name, nodes=[n.id for n in flow.nodes])
        )
        if self.tune_gc:
            tune_collector()
        result = await run_flow(flow, self.env(), self.new_branch, restored)
        lost = audit_recoverability(list(result.branches.values()))
        await bus.publish(
            RunFinished(
                status=result.status,
                nodes={nid: o.status for nid, o in result.outcomes.items()},
                bytes_unrecoverable=lost,
            )
        )
        assert self._report_done is not None
        await self._report_done.wait()
        return result

    def report(self) -> dict[str, Any]:
        """The run's report (the DESIGN.md section 11 contract) as a JSON-able dict."""
        if self._report is None:
            raise RuntimeError("the runtime has not been opened")
        return self._report.to_json()
