"""A branch you can talk to: chat, run, fork; same ceiling, events and tools as a flow's node."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from support import calls, read, text

from actors.conversation import BranchInTurn, Conversation
from actors.tools import tool
from runtime.config import Profile
from runtime.config.operation import Operation, OperationError
from runtime.errors import InputCeilingExceeded
from runtime.flows.flow import Flow, Node
from runtime.providers.scripted import ScriptedProvider
from runtime.runtime import Runtime
from runtime.scenarios.defaults import default_policies
from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy
from runtime.sim.clock import ManualClock
from runtime.values.messages import AssistantResponse, Instruction, ToolResult


@tool
def double(n: int) -> int:
    """Double a number."""
    return 2 * n


def provider(scripts: dict | None = None) -> ScriptedProvider:
    registry = default_policies()
    for node, steps in (scripts or {}).items():
        registry = registry.with_policy(node, ScriptPolicy(node, steps))
    return ScriptedProvider(registry, clock=ManualClock(1_000.0))


def runtime(p: ScriptedProvider) -> Runtime:
    clock = ManualClock(1_000.0)
    return Runtime(provider=p, clock=clock, monotonic=clock)


@pytest.mark.anyio
async def test_run_is_the_tool_loop_and_chat_one_bounded_request() -> None:
    async with runtime(provider()) as rt:
        branch = rt.branch(Profile(system="You double numbers.", tools=[double]))
        assert isinstance(branch, Conversation) and branch.name == "branch-1"
        answer = await branch.run("Double 1.")
        assert answer == "Simulated answer after 1 tool result(s): 2"
        assert branch.last is not None and branch.last.rounds == 2 and branch.last.requests == 2
        bare = rt.branch(Profile(system="You talk."))
        assert bare.name == "branch-2"
        reply = await bare.chat("Hello there, how are you?")
        assert reply == "Simulated answer to: Hello there, how are you?"
        report = rt.report()
    assert report["nodes"]["branch-1"]["status"] == "ok" and report["nodes"]["branch-1"]["requests"] == 2
    assert report["nodes"]["branch-2"]["requests"] == 1
    assert report["tools"] == {"calls": 1, "errors": 0, "result_bytes": 1}


@pytest.mark.anyio
async def test_a_second_run_continues_the_same_conversation() -> None:
    async with runtime(provider()) as rt:
        branch = rt.branch(Profile(tools=[double]))
        await branch.run("Double 1.")
        await branch.run("Again.")
        instructions = [m.text for m in branch.branch.view() if isinstance(m, Instruction)]
        results = [m for m in branch.branch.view() if isinstance(m, ToolResult)]
    assert instructions == ["Double 1.", "Again."]
    assert len(results) == 2  # the default model calls each tool once per instruction


@pytest.mark.anyio
async def test_chat_on_a_reply_with_tool_calls_fails_as_a_bounded_operation_does() -> None:
    async with runtime(provider()) as rt:
        branch = rt.branch(Profile(tools=[double]), name="chatty")
        with pytest.raises(OperationError, match="answered with tool calls"):
            await branch.chat("Double 2.")
        events_report = rt.report()
    assert events_report["nodes"]["chatty"]["status"] == "failed"
    results = [m for m in branch.branch.view() if isinstance(m, ToolResult)]
    assert results and all(r.is_error for r in results)  # no orphaned call


@pytest.mark.anyio
async def test_the_ceiling_holds_for_a_conversation_as_for_a_node() -> None:
    async with runtime(provider()) as rt:
        branch = rt.branch(Profile(system="s", max_input_tokens=1000), name="tight")
        with pytest.raises(InputCeilingExceeded):
            await branch.chat("word " * 5000)
        assert rt.report()["refusals"] == 1


@pytest.mark.anyio
async def test_a_fork_clones_the_view_and_lives_on_its_own() -> None:
    async with runtime(provider()) as rt:
        lead = rt.branch(Profile(tools=[double]), name="lead")
        await lead.run("Double 1.")
        before = lead.branch.view_ids()
        left, right = lead.fork(), lead.fork(name="other")
        assert (left.name, right.name) == ("lead.fork-1", "other")
        assert left.branch.view_ids() == before and left.branch.id != lead.branch.id
        async with anyio.create_task_group() as tg:
            tg.start_soon(left.run, "Left question.")
            tg.start_soon(right.run, "Right question.")
        assert lead.branch.view_ids() == before  # the children never touch the lead
        assert left.branch.view_ids()[: len(before)] == before
        assert left.branch.view_ids()[len(before) :] != right.branch.view_ids()[len(before) :]
        report = rt.report()
    assert {n: report["nodes"][n]["requests"] for n in ("lead", "lead.fork-1", "other")} == {
        "lead": 2,
        "lead.fork-1": 2,
        "other": 2,
    }


@pytest.mark.anyio
async def test_a_branch_is_not_forked_during_its_turn() -> None:
    gate = anyio.Event()

    @tool
    async def wait() -> str:
        """Wait for the test."""
        await gate.wait()
        return "done"

    async with runtime(provider()) as rt:
        branch = rt.branch(Profile(tools=[wait]))
        async with anyio.create_task_group() as tg:
            tg.start_soon(branch.run, "Wait.")
            while not branch.branch.busy:
                await anyio.lowlevel.checkpoint()
            with pytest.raises(BranchInTurn, match="forked between its turns"):
                branch.fork()
            gate.set()


@pytest.mark.anyio
async def test_a_scripted_policy_of_the_conversations_name_answers_it() -> None:
    p = provider({"scripted": [calls(read("a.md", 500)), text("scripted answer")]})
    async with runtime(p) as rt:
        branch = rt.branch(Profile(tools=("synthetic_read",)), name="scripted")
        assert await branch.run("Read a.md.") == "scripted answer"


@pytest.mark.anyio
async def test_a_flow_may_wrap_a_conversations_branch() -> None:
    async with runtime(provider()) as rt:
        talk = rt.branch(Profile(tools=[double]), name="talk")
        await talk.run("Double 1.")
        flow = Flow(
            [Node("wrapped", Operation("iterative", ("Once more.",)), profile=talk.profile, branch=talk.branch)]
        )
        result = await rt.run(flow)
    assert result["wrapped"].status == "ok"
    instructions = [m.text for m in talk.branch.view() if isinstance(m, Instruction)]
    assert instructions == ["Double 1.", "Once more."]
    assert isinstance(talk.branch.view()[-1], AssistantResponse)


def test_the_default_model_is_the_registrys_fallback_and_summaries_keep_their_policy() -> None:
    registry = default_policies()
    assert isinstance(registry.policy_for("anything"), DefaultModel)
    assert type(registry.policy_for(None)).__name__ == "FoldSummaryPolicy"
    strict = PolicyRegistry({"a": ScriptPolicy("a", ())})
    with pytest.raises(LookupError, match="no policy for node 'b'"):
        strict.policy_for("b")
