"""Streamed reply pieces as low-priority ``ReplyDelta`` events, through the official SDK against the simulator.

A subscription that names ``ReplyDelta`` (drop_oldest) gets each text and
thinking piece as it streams; one of every type (a sink, a report) never does;
with no such subscription nothing is built and no number is taken; a
subscriber that never reads drops deltas but never holds the stream up.
"""

from __future__ import annotations

from typing import Any

import pytest
from sdk_sim import Capture, simulated
from support import READER, calls, iterative, node, read, text

from actors.publisher import Publisher
from runtime.flows.flow import Flow
from runtime.runtime import Runtime
from runtime.scripted.faults import FaultRule
from runtime.sim.config import SimConfig
from runtime.values.messages import AssistantResponse, ThinkingPart
from signals.bus import DROP_OLDEST, SignalBus
from signals.envelope import Event
from signals.events import LOW_PRIORITY_TYPES, ReplyDelta, ResponseReceived
from signals.subscription import Gap, Subscription

pytestmark = pytest.mark.anyio

THINKING = {"type": "enabled", "budget_tokens": 1024}
ANSWER = " ".join(f"word{i}" for i in range(300))


async def drain(subscription: Subscription) -> list[Any]:
    """Everything buffered in ``subscription`` (its gap first), without waiting for more."""
    items: list[Any] = []
    while subscription.statistics().buffered or subscription._gap:
        items.append(await subscription.__anext__())
    return items


async def run_watched(
    capture: Capture, clock: Any, profile: Any, operation: Any, *, maxsize: int = 100_000
) -> tuple[Any, list[Any], list[Event]]:
    """Run one node; return its result, what a ReplyDelta subscription got and what an all-types one got."""
    async with Runtime(provider=capture, clock=clock, monotonic=clock) as rt:  # type: ignore[arg-type]
        bus = rt.signals
        async with (
            bus.subscribe(policy=DROP_OLDEST, types={"ReplyDelta"}, maxsize=maxsize, name="deltas") as deltas,
            bus.subscribe(maxsize=100_000, name="everything") as everything,
        ):
            result = await rt.run(Flow([node("n", operation, profile=profile)]))
            return result, await drain(deltas), await drain(everything)


async def test_text_and_thinking_pieces_arrive_as_deltas_and_join_to_the_reply() -> None:
    script = [calls(read("a.md", 300), say="Reading a.md first."), text(ANSWER)]
    profile = READER.evolve(thinking=THINKING, max_tokens=4096)
    async with simulated({"n": script}) as (_sim, capture, clock):
        result, deltas, everything = await run_watched(capture, clock, profile, iterative("read"))
    assert result.status == "ok", result["n"].reason
    assert all(isinstance(d, Event) and d.type == "ReplyDelta" for d in deltas)  # nothing dropped: no Gap
    responses = [e for e in everything if e.type == ResponseReceived.TYPE]
    assert len(responses) == 2
    replies = [m for m in result.branches["n"].view() if isinstance(m, AssistantResponse)]
    for response, reply in zip(responses, replies, strict=True):
        mine = [d for d in deltas if d.request_id == response.request_id]
        assert [d.data["index"] for d in mine] == list(range(len(mine)))
        assert {d.data["attempt"] for d in mine} == {1} and {d.node_id for d in mine} == {"n"}
        by_kind = {
            kind: "".join(d.data["text"] for d in mine if d.data["kind"] == kind) for kind in ("text", "thinking")
        }
        assert by_kind["text"] == reply.text
        (thinking,) = [p for p in reply.parts if isinstance(p, ThinkingPart)]
        assert by_kind["thinking"] == thinking.thinking and thinking.thinking
        # each delta lies between its request's RequestSent and its ResponseReceived
        sent = next(e for e in everything if e.type == "RequestSent" and e.request_id == response.request_id)
        assert sent.seq < mine[0].seq and mine[-1].seq < response.seq
    assert ANSWER == replies[-1].text and len([d for d in deltas if d.data["kind"] == "text"]) > 10
    # a subscription of every type (a sink, the report) never sees one
    assert not any(e.type in LOW_PRIORITY_TYPES for e in everything)


async def test_without_a_delta_subscriber_nothing_is_built_and_no_number_is_taken() -> None:
    async with simulated({"n": [text(ANSWER)]}) as (_sim, capture, clock):
        async with Runtime(provider=capture, clock=clock, monotonic=clock) as rt:  # type: ignore[arg-type]
            async with rt.signals.subscribe(maxsize=100_000) as everything:
                assert not rt.signals.wants_progress
                result = await rt.run(Flow([node("n", iterative("write"), profile=READER)]))
                events = await drain(everything)
    assert result.status == "ok"
    seqs = [e.seq for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no holes: the stream's deltas took no numbers


async def test_a_subscriber_that_never_reads_drops_deltas_and_never_holds_the_stream() -> None:
    # A block subscriber that never read would stop the run at its 4th event; this one cannot:
    # the run finishes while it holds 4 deltas, and its reader then learns how many it missed.
    async with simulated({"n": [text(ANSWER)]}) as (_sim, capture, clock):
        result, deltas, _everything = await run_watched(capture, clock, READER, iterative("write"), maxsize=4)
    assert result.status == "ok" and result["n"].result.answer == ANSWER
    gap, *kept = deltas
    assert isinstance(gap, Gap) and gap.count > 10 and len(kept) == 4
    total = gap.count + len(kept)
    assert [d.data["index"] for d in kept] == list(range(total - 4, total))  # the newest kept, oldest dropped


async def test_low_priority_events_have_their_own_door() -> None:
    async with SignalBus("run-d", lambda: 1.0) as bus:
        delta = ReplyDelta(kind="text", text="hi", attempt=1, index=0)
        assert bus.publish_progress(delta) is None and bus.next_seq == 1  # nobody listens: nothing built
        with pytest.raises(
            ValueError, match="ReplyDelta is low priority and may only be taken with policy 'drop_oldest'"
        ):
            async with bus.subscribe(types={"ReplyDelta", "NodeStarted"}):
                pass
        with pytest.raises(TypeError, match="ReplyDelta is a low-priority event; publish it with publish_progress"):
            await bus.publish(delta)
        async with bus.subscribe(policy=DROP_OLDEST, types={"ReplyDelta"}, maxsize=2) as deltas:
            assert bus.wants_progress
            event = bus.publish_progress(delta, request_id="r1")
            assert event is not None and event.seq == 1 and event.request_id == "r1"
            with pytest.raises(TypeError, match="is not a low-priority event"):
                bus.publish_progress(object())
            assert [item.data["text"] for item in await drain(deltas)] == ["hi"]
        assert not bus.wants_progress


async def test_a_retried_attempt_streams_its_deltas_again_under_its_attempt_number() -> None:
    # the first attempt's stream stops after its first delta (an error event); the second streams whole
    config = SimConfig(faults=(FaultRule.from_obj({"kind": "stream_error", "on_request": 1}, "f"),))
    async with simulated({"n": [text(ANSWER)]}, config=config) as (_sim, capture, clock):
        result, deltas, _everything = await run_watched(capture, clock, READER, iterative("write"))
    assert result.status == "ok" and result["n"].result.answer == ANSWER
    first = [d for d in deltas if d.data["attempt"] == 1]
    second = [d for d in deltas if d.data["attempt"] == 2]
    assert len(first) == 1 and ANSWER.startswith(first[0].data["text"])
    assert [d.data["index"] for d in second] == list(range(len(second)))
    assert "".join(d.data["text"] for d in second) == ANSWER


async def test_the_hook_builds_nothing_without_subscribers_and_numbers_every_piece() -> None:
    async with SignalBus("run-h", lambda: 1.0) as bus:
        hook = Publisher(bus, "br-1", "n").reply_progress("br-1:1", 1)
        for piece in ("a", "b", "c"):
            hook("text", piece)
        assert bus.next_seq == 1  # no event built, no number taken
        async with bus.subscribe(policy=DROP_OLDEST, types={"ReplyDelta"}) as deltas:
            hook("thinking", "d")
            (event,) = await drain(deltas)
        assert event.data == {"kind": "thinking", "text": "d", "attempt": 1, "index": 3}
        assert (event.branch_id, event.node_id, event.request_id) == ("br-1", "n", "br-1:1")
