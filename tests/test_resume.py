"""Resume: a stopped run continues from its store and ends as an uninterrupted run would."""

from __future__ import annotations

import io
import sqlite3
import time
from pathlib import Path
from typing import Any, Literal

import anyio
import attrs
import pytest

from actors.branch import Branch
from actors.tools import BUILTIN_TOOLS
from runtime.cli.store import main
from runtime.config.loader import load_scenario
from runtime.contract.provider import Provider, ProviderReply
from runtime.providers.factory import open_provider
from runtime.request.compiler import Request
from runtime.runtime import Runtime
from runtime.scenarios.run import build_flow, build_policies
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy, ScriptStep
from runtime.store.errors import NothingToResume, StoreInUse
from runtime.store.events_sink import SqliteSink
from runtime.store.journal import RunStore
from runtime.store.reader import StoreReader
from runtime.store.resume import CANCELLED_RESULT, view_without_cancelled_results
from runtime.store.run import (
    policies_resumed_at,
    resume_stored_run,
    run_scenario_stored,
)
from runtime.values.messages import AssistantResponse, Instruction, ToolCall, ToolResult
from signals.envelope import Event

SCENARIO = """
schema = "foldline.scenario/v1"
name = "resumable"
[run]
concurrency = 3
[provider]
kind = "scripted"
model = "claude-haiku-5-5"
[profiles.default]
system = "You are a careful agent."
tools = ["synthetic_read", "synthetic_search", "spawn"]
[profiles.reviewer]
system = "You review."
tools = ["synthetic_read"]
[[nodes]]
id = "lead"
instruction = "Read and delegate."
script = [
  { text = "Reading.", tool_calls = [
      { name = "synthetic_read", arguments = { path = "a.md", size = 9000 } },
      { name = "synthetic_read", arguments = { path = "b.md", size = 7000 } },
  ] },
  { tool_calls = [ { name = "spawn", arguments = { node = "child-a" } } ] },
  { tool_calls = [ { name = "synthetic_search", arguments = { query = "x", size = 3000 } },
                   { name = "spawn", arguments = { node = "child-b" } } ] },
  { text = "Done leading." },
]
[[nodes]]
id = "child-a"
spawned_by = "lead"
profile = "reviewer"
instruction = "Review a."
script = [
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "c.md", size = 4000 } }] },
  { tool_calls = [{ name = "synthetic_read", arguments = { path = "d.md", size = 4000 } }] },
  { text = "A reviewed." },
]
[[nodes]]
id = "child-b"
spawned_by = "lead"
profile = "reviewer"
operation = "bounded"
instructions = ["First check.", "Second check."]
script = [{ text = "B one." }, { text = "B two." }]
[[nodes]]
id = "never"
spawned_by = "lead"
profile = "reviewer"
instruction = "Never spawned."
script = [{ text = "unused" }]
[[nodes]]
id = "side"
instruction = "Search."
script = [
  { tool_calls = [{ name = "synthetic_search", arguments = { query = "y", size = 5000 } }] },
  { tool_calls = [{ name = "synthetic_search", arguments = { query = "z", size = 5000 } }] },
  { text = "Side done." },
]
[[nodes]]
id = "summary"
depends_on = ["lead", "side"]
operation = "bounded"
instruction = "Summarize."
script = [{ text = "Summary." }]
"""

pytestmark = pytest.mark.anyio


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "resumable.toml"
    path.write_text(SCENARIO, encoding="utf-8")
    return path


def load(path: Path):
    return load_scenario(path, tool_names=BUILTIN_TOOLS.names())


async def stored_run(scenario_path: Path, store: Path, *, stop_after_responses: int | None = None) -> None:
    """Run with a store; with ``stop_after_responses``, cancel the run (Ctrl-C) after that many responses."""
    seen = 0
    with anyio.CancelScope() as scope:

        def progress(event: Any) -> None:
            nonlocal seen
            if event.type == "ResponseReceived":
                seen += 1
                if stop_after_responses is not None and seen >= stop_after_responses:
                    scope.cancel()

        await run_scenario_stored(load(scenario_path), store_path=store, progress=progress)


def outcome_of(store: Path) -> dict[str, Any]:
    """What must equal an uninterrupted run's: the report's totals and outcome, each node's
    requests (by digest, in order) and each node's record (by content, byte for byte)."""
    from runtime.store.run import report_from_store

    report = report_from_store(store, "claude-haiku-5-5")
    with StoreReader(store) as reader:
        for message_id in reader.message_ids():
            reader.message(message_id)  # every stored message reads back and passes its SHA-256
        rows = [r for r in reader.requests() if r.status == "sent"]
        branches = reader.restore_branches()
    node_branch = {r.node_id: r.branch_id for r in rows if r.node_id}
    usage_sum = {k: sum(int((r.usage or {}).get(k, 0)) for r in rows) for k in report["usage"]}
    assert usage_sum == report["usage"]  # every counted response is a stored request, and no other
    assert len(rows) == report["requests"]
    return {
        "status": report["status"],
        "nodes": {n: v["status"] for n, v in report["nodes"].items()},
        "requests": report["requests"],
        "usage": report["usage"],
        "cost": report["cost"]["bit"],
        "digests": {n: [r.digest for r in rows if r.node_id == n] for n in node_branch},
        "records": {n: [m.sha256 for m in branches[b].record_messages()] for n, b in node_branch.items()},
    }


@attrs.define(eq=False)
class _WatchedStore:
    """The store as a signal sink's target, telling when the sink's stream has ended."""

    store: RunStore
    ended: anyio.Event = attrs.field(factory=anyio.Event)

    def events_attached(self) -> None:
        self.store.events_attached()

    def write_event(self, event: Event) -> None:
        self.store.write_event(event)

    def events_closed(self) -> None:
        self.store.events_closed()
        self.ended.set()


Cut = Literal["lost", "after_sink_stopped"]


@attrs.define(eq=False)
class _CutProvider:
    """A provider that stops the run (Ctrl-C: cancels ``scope``) when its ``cut_at``-th reply comes.

    ``reply="lost"``: the Ctrl-C lands while that request is in flight; its reply
    never reaches the engine. ``reply="after_sink_stopped"``: the reply reaches
    the engine only after the store's signal sink has stopped, the interleaving
    a scheduler may pick when the engine task passed its last checkpoint before
    the cancellation and the sink's task took the cancellation first (the
    shielded wait pins it down). The engine then records the response and
    publishes a usage event no sink will store.
    """

    inner: Provider
    cut_at: int
    reply: Cut
    scope: anyio.CancelScope
    sink_ended: anyio.Event
    sends: int = 0
    cut_digest: str | None = None
    name: str = "scripted"

    @property
    def caches_by_prefix(self) -> bool:
        return self.inner.caches_by_prefix

    @property
    def max_retries(self) -> int:
        return self.inner.max_retries

    @property
    def counts_tokens(self) -> bool:
        return self.inner.counts_tokens

    async def count_tokens(self, request: Request) -> int:
        return await self.inner.count_tokens(request)

    async def send(self, request: Request, *, node_id: str | None) -> ProviderReply:
        reply = await self.inner.send(request, node_id=node_id)
        self.sends += 1
        if self.sends != self.cut_at:
            return reply
        self.cut_digest = request.digest
        self.scope.cancel()
        if self.reply == "lost":
            await anyio.sleep_forever()
        with anyio.CancelScope(shield=True):
            await self.sink_ended.wait()
        return reply

    async def aclose(self) -> None:
        await self.inner.aclose()


async def cut_stored_run(scenario_path: Path, store_path: Path, *, cut_at: int, reply: Cut) -> str:
    """A stored run stopped as its ``cut_at``-th reply comes (see :class:`_CutProvider`);
    returns the digest of the request that reply answers."""
    assert reply in ("lost", "after_sink_stopped")
    scenario = load(scenario_path)
    spec = scenario.provider
    with anyio.CancelScope() as scope:
        async with await RunStore.create(
            store_path,
            run_id="run-cut",
            scenario_text=scenario_path.read_text(encoding="utf-8"),
            scenario_path=str(scenario_path),
            provider_kind=spec.kind,
        ) as store:
            watched = _WatchedStore(store)
            async with open_provider(spec, build_policies(scenario), clock=time.time) as inner:
                provider = _CutProvider(inner, cut_at, reply, scope, watched.ended)
                async with Runtime(
                    provider=provider,
                    model=spec.model_config,
                    run_id=store.run_id,
                    scenario=scenario.name,
                    journal=store,
                ) as rt:
                    SqliteSink(watched).attach(rt.signals)
                    await rt.run(build_flow(scenario))
    # Other engine tasks between checkpoints may still send once the run is cancelled.
    assert scope.cancelled_caught and provider.sends >= cut_at and watched.ended.is_set()
    assert provider.cut_digest is not None
    return provider.cut_digest


def responses_without_their_usage_event(store: Path) -> list[str]:
    """Stored sent requests whose ``ResponseReceived`` is not in the store (each must have it)."""
    with StoreReader(store) as reader:
        received = {e.request_id for e in reader.events(types=["ResponseReceived"])}
        return [r.request_id for r in reader.requests() if r.status == "sent" and r.request_id not in received]


async def test_an_uninterrupted_stored_run_reports_what_it_stored(scenario_file: Path, tmp_path: Path) -> None:
    await stored_run(scenario_file, tmp_path / "full.db")
    result = outcome_of(tmp_path / "full.db")
    assert result["status"] == "failed"  # "never" is never spawned, so it is skipped
    assert result["nodes"]["never"] == "skipped" and result["nodes"]["summary"] == "ok"
    assert result["requests"] == 13
    with pytest.raises(NothingToResume, match="already finished"):
        await resume_stored_run(tmp_path / "full.db")


def assert_resumes_to_the_uninterrupted_result(full: Path, cut: Path) -> None:
    """What a cut store must show, and what its resumed run must end with (run both first)."""
    assert responses_without_their_usage_event(cut) == []
    assert outcome_of(cut) == outcome_of(full)
    with StoreReader(cut) as reader:
        run_ids = {e.run_id for e in reader.events()}
        seqs = [e.seq for e in reader.events()]
    assert len(run_ids) == 1 and seqs == sorted(set(seqs))


async def resume_cut_run(cut: Path) -> None:
    with StoreReader(cut) as reader:
        assert not any(e.type == "RunFinished" for e in reader.events())
    assert responses_without_their_usage_event(cut) == []
    resumed = await resume_stored_run(cut)
    assert resumed.report["status"] == "failed" and resumed.report["nodes"]["summary"]["status"] == "ok"
    assert resumed.report["requests"] == 13


@pytest.mark.parametrize("cut_at", [1, 3, 5, 8, 11])
async def test_a_run_stopped_by_ctrl_c_resumes_to_the_uninterrupted_result(
    scenario_file: Path, tmp_path: Path, cut_at: int
) -> None:
    """Ctrl-C while request ``cut_at`` is in flight (its reply is lost)."""
    await stored_run(scenario_file, tmp_path / "full.db")
    await cut_stored_run(scenario_file, tmp_path / "cut.db", cut_at=cut_at, reply="lost")
    await resume_cut_run(tmp_path / "cut.db")
    assert_resumes_to_the_uninterrupted_result(tmp_path / "full.db", tmp_path / "cut.db")


@pytest.mark.parametrize("stop_after", [1, 5])
async def test_a_run_stopped_from_a_progress_handler_resumes_to_the_uninterrupted_result(
    scenario_file: Path, tmp_path: Path, stop_after: int
) -> None:
    """Ctrl-C from a bus handler lands wherever the engine next yields; while the first
    nodes run, it always lands before the run can finish."""
    await stored_run(scenario_file, tmp_path / "full.db")
    await stored_run(scenario_file, tmp_path / "cut.db", stop_after_responses=stop_after)
    await resume_cut_run(tmp_path / "cut.db")
    assert_resumes_to_the_uninterrupted_result(tmp_path / "full.db", tmp_path / "cut.db")


@pytest.mark.parametrize("cut_at", [1, 6, 9, 13])
async def test_a_reply_the_engine_takes_after_the_sink_stopped_is_not_stored_without_its_usage(
    scenario_file: Path, tmp_path: Path, cut_at: int
) -> None:
    await stored_run(scenario_file, tmp_path / "full.db")
    cut_digest = await cut_stored_run(scenario_file, tmp_path / "cut.db", cut_at=cut_at, reply="after_sink_stopped")
    with StoreReader(tmp_path / "cut.db") as reader:
        assert cut_digest not in {r.digest for r in reader.requests()}  # dropped with the event it never got
    await resume_cut_run(tmp_path / "cut.db")
    assert_resumes_to_the_uninterrupted_result(tmp_path / "full.db", tmp_path / "cut.db")


def _drop_events(store: Path, *where: str) -> None:
    connection = sqlite3.connect(store)
    with connection:
        for clause in where:
            connection.execute(f"DELETE FROM events WHERE {clause}")
    connection.close()


async def test_outcomes_whose_events_never_reached_the_disk_are_recovered(scenario_file: Path, tmp_path: Path) -> None:
    await stored_run(scenario_file, tmp_path / "full.db")
    expected = outcome_of(tmp_path / "full.db")
    # As if the process died after summary's turn ended but before its events were written.
    _drop_events(
        tmp_path / "full.db",
        "type = 'RunFinished'",
        "type = 'NodeFinished' AND node_id = 'summary'",
        "type = 'NodeSkipped' AND node_id = 'never'",
    )
    resumed = await resume_stored_run(tmp_path / "full.db")
    assert resumed.result.outcomes["summary"].status == "ok"
    assert resumed.result.outcomes["never"].status == "skipped"
    assert outcome_of(tmp_path / "full.db") == expected  # nothing was sent again


async def test_a_store_in_use_is_not_resumed(scenario_file: Path, tmp_path: Path) -> None:
    await stored_run(scenario_file, tmp_path / "cut.db", stop_after_responses=2)
    holder = await RunStore.open_existing(tmp_path / "cut.db")
    try:
        with pytest.raises(StoreInUse):
            await resume_stored_run(tmp_path / "cut.db")
    finally:
        await holder.aclose()


def test_the_resume_command_continues_and_reports(scenario_file: Path, tmp_path: Path) -> None:
    anyio.run(lambda: stored_run(scenario_file, tmp_path / "cut.db", stop_after_responses=4))
    out, err = io.StringIO(), io.StringIO()
    assert main(["resume", str(tmp_path / "cut.db"), "--quiet"], out=out, err=err) == 1  # "never" is skipped
    assert "requests: 13 (" in out.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main(["resume", str(tmp_path / "cut.db"), "--quiet"], out=out, err=err) == 1
    assert "nothing to resume" in err.getvalue() and "requests: 13 (" in out.getvalue()
    assert main(["resume", str(tmp_path / "nothing.db")], out=out, err=err) == 2


def test_script_policies_start_after_the_completed_requests() -> None:
    steps = [ScriptStep(text="one"), ScriptStep(text="two"), ScriptStep(text="three")]
    registry = PolicyRegistry({"a": ScriptPolicy("a", steps), "b": ScriptPolicy("b", steps)})
    resumed = policies_resumed_at(registry, {"a": 2})
    assert resumed.policy_for("a").respond({}).content[0]["text"] == "three"
    assert resumed.policy_for("b").respond({}).content[0]["text"] == "one"
    with pytest.raises(ValueError, match="ScriptPolicy.start: 4 is not a step index from 0 to 3"):
        ScriptPolicy("a", steps, start=4)


def test_a_cancelled_round_resumes_by_running_its_calls() -> None:
    branch = Branch.create(system="s")
    call_a, call_b = ToolCall.create("a", "synthetic_read"), ToolCall.create("b", "synthetic_read")

    async def build() -> None:
        async with branch.turn() as turn:
            turn.open_turn(1, 1)
            turn.append(Instruction("go"))
            turn.append(AssistantResponse((call_a, call_b), "tool_use"))
            turn.append(ToolResult.for_call(call_a, "done"))
            turn.append(ToolResult.for_call(call_b, CANCELLED_RESULT, is_error=True))

    anyio.run(build)
    kept = view_without_cancelled_results(branch)
    assert kept == branch.view_ids()[:-1]
    assert view_without_cancelled_results(Branch.create()) is None


def test_a_run_stored_by_another_engine_is_refused_by_resume(scenario_file: Path, tmp_path: Path) -> None:
    from runtime.store.run import ENGINE_META_KEY

    async def create() -> None:
        text = scenario_file.read_text(encoding="utf-8")
        async with await RunStore.create(
            tmp_path / "t.db",
            run_id="run-on-temporal",
            scenario_text=text,
            scenario_path=str(scenario_file),
            provider_kind="scripted",
            extra_meta={ENGINE_META_KEY: "temporal"},
        ):
            pass

    anyio.run(create)
    out, err = io.StringIO(), io.StringIO()
    # Resumed here, its nodes would run a second time beside the engine's own continuation.
    assert main(["resume", str(tmp_path / "t.db"), "--quiet"], out=out, err=err) == 1  # cannot resume
    assert "ran on the temporal engine" in err.getvalue() and "foldline worker" in err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1 and out.getvalue() == ""
