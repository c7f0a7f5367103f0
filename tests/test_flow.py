"""The flow scheduler: dependencies, concurrency, spawning, supervision, cancellation."""

from __future__ import annotations

import anyio
import pytest
from support import READER, bounded, calls, flow, iterative, node, read, runtime_for, scripted, text

from actors.inherit import SETUP_HEADING
from runtime.errors import ConfigError
from runtime.flows.flow import Flow, Node
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.messages import AssistantResponse, Instruction, ToolResult
from signals.envelope import Event
from tests.pairing import check_pairing


async def collect(rt, fl) -> tuple[object, list[Event]]:
    events: list[Event] = []
    rt.signals.add_handler(events.append, name="test")
    result = await rt.run(fl)
    return result, events


@pytest.mark.anyio
async def test_dependencies_run_in_order_and_results_come_back() -> None:
    provider = scripted(
        {
            "a": [calls(read("a.md")), text("A done")],
            "b": [text("B done")],
            "c": [text("C done")],
        }
    )
    fl = flow(
        node("a", iterative("read a")),
        node("b", bounded("summarise"), depends_on=("a",)),
        node("c", bounded("independent")),
    )
    async with runtime_for(provider) as rt:
        result, events = await collect(rt, fl)
        report = rt.report()
    assert result.status == "ok"
    assert result["a"].result.answer == "A done"
    assert result["b"].result.answer == "B done"
    starts = [e.node_id for e in events if e.type == "NodeStarted"]
    finishes = [e.node_id for e in events if e.type == "NodeFinished"]
    assert starts.index("b") > finishes.index("a")
    assert set(report["nodes"]) == {"a", "b", "c"}
    assert all(v["status"] == "ok" for v in report["nodes"].values())
    seqs = [e.seq for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


@pytest.mark.anyio
async def test_a_failing_node_fails_alone_dependents_skip_siblings_finish() -> None:
    provider = scripted(
        {
            "broken": [calls(("fail", {"message": "disk on fire"}))],
            "exhausted": [calls(read("x"))],  # a second request has no scripted answer
            "sibling": [calls(read("s")), text("sibling ok")],
            "after": [text("never")],
        }
    )
    fl = flow(
        node("broken", iterative("break"), profile=READER.evolve(tool_errors="fail")),
        node("exhausted", iterative("run out")),
        node("sibling", iterative("work")),
        node("after", bounded("after"), depends_on=("broken",)),
    )
    async with runtime_for(provider) as rt:
        result, events = await collect(rt, fl)
        report = rt.report()
    assert result.status == "failed"
    assert result["broken"].status == "failed" and "disk on fire" in result["broken"].reason
    assert result["exhausted"].status == "failed" and "script" in result["exhausted"].reason
    assert result["sibling"].status == "ok"
    assert result["after"].status == "skipped" and "broken" in result["after"].reason
    assert report["status"] == "failed"
    assert report["nodes"]["after"]["status"] == "skipped"
    failed = [e for e in events if e.type == "NodeFailed"]
    assert {e.node_id for e in failed} == {"broken", "exhausted"}
    # The failed node's view stays paired: the failing call got an error result.
    view = result.branches["broken"].view()
    assert isinstance(view[-1], ToolResult) and view[-1].is_error
    request = compile_request(system=None, tools=(), view=view, settings=RequestSettings(model="claude-haiku-5-5"))
    check_pairing(request.payload())


@pytest.mark.anyio
async def test_spawned_children_clone_the_emitters_view_and_run_their_own_setup() -> None:
    reviewer = READER.evolve(system="You review.", tools=("synthetic_read",))
    provider = scripted(
        {
            "lead": [
                calls(read("design.md", 3000)),
                calls(("spawn", {"node": "kid"}), ("spawn", {"node": "fresh"})),
                text("lead done"),
            ],
            "kid": [text("kid done")],
            "fresh": [text("fresh done")],
        }
    )
    fl = flow(
        node("lead", iterative("lead the work")),
        node("kid", bounded("review what you read"), spawned_by="lead", profile=reviewer),
        node("fresh", bounded("start fresh"), spawned_by="lead", inherit="none", profile=reviewer),
    )
    async with runtime_for(provider) as rt:
        result, events = await collect(rt, fl)
    assert result.status == "ok"
    lead, kid, fresh = (result.branches[n] for n in ("lead", "kid", "fresh"))
    # the child saw the emitter's completed view (instruction, read round) but not the spawn round
    lead_ids = lead.view_ids()
    kid_ids = kid.view_ids()
    assert kid_ids[:3] == lead_ids[:3]
    assert not any(
        isinstance(m, AssistantResponse) and m.tool_calls and m.tool_calls[0].name == "spawn" for m in kid.view()
    )
    # by default the kid keeps the lead's stable segment; its own setup is an instruction after the inherited view
    assert kid.system is lead.system and kid.tools == lead.tools
    setup = kid.view()[3]
    assert isinstance(setup, Instruction) and setup.text.startswith(SETUP_HEADING) and "You review." in setup.text
    assert fresh.system.text == "You review." and [t.name for t in fresh.tools] == ["synthetic_read"]
    assert len(fresh.view_ids()) == 2  # its instruction and its answer
    spawned = [e for e in events if e.type == "ChildSpawned"]
    assert [(e.data["child"], e.data["inherit"]) for e in spawned] == [("kid", "view"), ("fresh", "none")]
    assert spawned[0].data["view_length"] == 3  # the messages it inherited (its setup instruction not counted)


@pytest.mark.anyio
async def test_unspawned_children_are_skipped_with_a_reason_and_spawn_errors_fail_the_emitter() -> None:
    provider = scripted({"lead": [calls(("spawn", {"node": "stranger"}))], "kid": [text("never")]})
    fl = flow(
        node("lead", iterative("go"), profile=READER.evolve(tool_errors="fail")),
        node("kid", bounded("x"), spawned_by="lead"),
    )
    async with runtime_for(provider) as rt:
        result, _ = await collect(rt, fl)
    assert result["lead"].status == "failed" and "cannot spawn 'stranger'" in result["lead"].reason
    assert result["kid"].status == "skipped" and "never spawned" in result["kid"].reason


@pytest.mark.anyio
async def test_concurrency_limit_holds() -> None:
    running = 0
    peak = 0

    from actors.tools import BUILTIN_TOOLS, Tool, ToolSpec

    two_at_once = anyio.Event()

    async def slow(arguments, context):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            two_at_once.set()
        with anyio.fail_after(30):  # the first nap waits for a second one: overlap by an event, not by timing
            await two_at_once.wait()
        await anyio.sleep(0.01)
        running -= 1
        return "slept"

    registry = BUILTIN_TOOLS.with_tool(Tool(ToolSpec.create("nap", "Sleep a little.", {"type": "object"}), slow))
    profile = READER.evolve(tools=("nap",))
    scripts = {f"n{i}": [calls(("nap", {})), text("ok")] for i in range(6)}
    fl = Flow([node(f"n{i}", iterative("nap"), profile=profile) for i in range(6)], concurrency=2)
    async with runtime_for(scripted(scripts), registry=registry) as rt:
        result = await rt.run(fl)
    assert result.status == "ok"
    assert peak == 2


def test_bad_graphs_are_refused() -> None:
    op = bounded("x")
    with pytest.raises(ConfigError, match="cycle a -> b -> a"):
        Flow([Node("a", op, depends_on=("b",)), Node("b", op, depends_on=("a",))])
    with pytest.raises(ConfigError, match=r'flow: nodes\[0\]\.depends_on\[0\]: "zz" names no node'):
        Flow([Node("a", op, depends_on=("zz",))])
    with pytest.raises(ConfigError, match=r'flow: nodes\[1\]\.id: "a" is already the id of nodes\[0\]'):
        Flow([Node("a", op), Node("a", op)])


@pytest.mark.anyio
async def test_cancelling_a_flow_leaves_every_view_paired() -> None:
    from actors.tools import BUILTIN_TOOLS, Tool, ToolSpec

    hanging = anyio.Event()

    async def forever(arguments, context):
        hanging.set()
        await anyio.sleep_forever()

    registry = BUILTIN_TOOLS.with_tool(Tool(ToolSpec.create("hang", "Never returns.", {"type": "object"}), forever))
    profile = READER.evolve(tools=("hang", "synthetic_read"))
    provider = scripted({"h": [calls(read("a"), ("hang", {}), read("b"))]})
    fl = flow(node("h", iterative("hang"), profile=profile))
    branches = {}
    async with runtime_for(provider, registry=registry) as rt, anyio.create_task_group() as tg:
        from runtime.flows import flow as flow_module

        original = flow_module._Scheduler.supervise

        async def spy(self, nd, branch, resume=False):
            branches[nd.id] = branch
            await original(self, nd, branch, resume)

        async def cancel_once_hanging() -> None:
            # Cancelled while the hanging tool runs, wherever the machine's load puts that moment.
            with anyio.fail_after(30):
                await hanging.wait()
            tg.cancel_scope.cancel()

        tg.start_soon(cancel_once_hanging)
        flow_module._Scheduler.supervise = spy
        try:
            await rt.run(fl)
        finally:
            flow_module._Scheduler.supervise = original
    view = branches["h"].view()
    results = [m for m in view if isinstance(m, ToolResult)]
    # Every call has a result: the hanging one an error; the reads ran (concurrently) or were
    # cancelled before they could, depending on where the deadline fell.
    assert len(results) == 3 and results[1].is_error and results[1].output == "not run: cancelled"
    assert all(not r.is_error or r.output == "not run: cancelled" for r in results)
    request = compile_request(system=None, tools=(), view=view, settings=RequestSettings(model="m"))
    check_pairing(request.payload())
    assert not branches["h"].busy
