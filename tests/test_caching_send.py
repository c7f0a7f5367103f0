"""Prompt-cache placement on the send path (seed 001 D7 and Amendment 3 acceptance)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import attrs
import pytest
from support import READER, ProviderWrapper, bounded, calls, iterative, node, read, runtime_for, scripted, text

from actors.cache_step import plan_cache, read_verdict, record_cache_outcome
from runtime.flows.flow import Flow
from runtime.providers.scripted import ScriptedProvider
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.messages import Instruction
from tests.payload_rewrites import first_divergence

SYSTEM = "You are a meticulous reader. " * 120  # long enough to be cacheable on its own


@attrs.define(eq=False)
class Capture(ProviderWrapper):
    """A provider wrapper that keeps every payload it is asked to send."""

    inner: ScriptedProvider
    payloads: list[dict[str, Any]] = attrs.field(factory=list)

    async def send(self, request, *, node_id):
        self.payloads.append(request.payload())
        return await self.inner.send(request, node_id=node_id)


def reading_script(n: int = 4):
    return [calls(read(f"doc{i}.md", 3000)) for i in range(n)] + [text("read them all")]


async def run_capture(profile, op, script, *, declares: bool = True) -> Capture:
    inner = scripted({"n": script})
    if not declares:
        inner = ScriptedProvider(inner.app.policies, clock=inner.app.clock, caches_by_prefix=False)
    capture = Capture(inner)
    async with runtime_for(capture) as rt:  # type: ignore[arg-type]
        result = await rt.run(Flow([node("n", op, profile=profile)]))
    assert result.status == "ok", result["n"].reason
    return capture


def marks_of(payload: dict[str, Any]) -> list[tuple[str, str]]:
    found = []
    for tool in payload.get("tools", []):
        if "cache_control" in tool:
            found.append(("tools", tool["cache_control"].get("ttl", "5m")))
    for block in payload.get("system", []):
        if "cache_control" in block:
            found.append(("system", block["cache_control"].get("ttl", "5m")))
    for message in payload["messages"]:
        for block in message["content"]:
            if "cache_control" in block:
                found.append(("messages", block["cache_control"].get("ttl", "5m")))
    return found


def strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


@pytest.mark.anyio
async def test_a_cached_tool_loop_keeps_the_stable_layout_and_appends_only() -> None:
    profile = READER.evolve(system=SYSTEM, prompt_caching=True)
    capture = await run_capture(profile, iterative("read the docs"), reading_script())
    payloads = capture.payloads
    assert len(payloads) == 5
    for payload in payloads:
        assert [t["name"] for t in payload["tools"]] == ["synthetic_read", "spawn", "fail"]
        users = json.dumps([m for m in payload["messages"] if m["role"] == "user"])
        assert "meticulous reader" not in users and "Read a file" not in users
        marks = marks_of(payload)
        assert 1 <= len(marks) <= 4
        ttls = [ttl for _, ttl in marks]
        assert ttls == sorted(ttls, key=lambda t: t != "1h")  # every 1h mark before every 5m mark
        assert "prompt_caching" not in json.dumps(payload)
    for before, after in itertools.pairwise(payloads):
        assert first_divergence(before, after) is None  # messages of each a prefix of the next
        assert len(after["messages"]) > len(before["messages"])
    usages = [r.usage for r in capture.inner.app.requests]
    assert all(u.cache_read_input_tokens > 0 for u in usages[1:])  # every later request read the cache


@pytest.mark.anyio
async def test_caching_off_is_byte_identical_whichever_way_it_is_off() -> None:
    runs = [
        await run_capture(READER.evolve(system=SYSTEM), iterative("read"), reading_script(2)),
        await run_capture(READER.evolve(system=SYSTEM, prompt_caching=False), iterative("read"), reading_script(2)),
        await run_capture(
            READER.evolve(system=SYSTEM, prompt_caching=True), iterative("read"), reading_script(2), declares=False
        ),
    ]
    texts = [[json.dumps(p, sort_keys=True) for p in run.payloads] for run in runs]
    assert texts[0] == texts[1] == texts[2]
    assert all("cache_control" not in t for t in texts[0])
    cached = await run_capture(READER.evolve(system=SYSTEM, prompt_caching=True), iterative("read"), reading_script(2))
    assert [strip(p) for p in cached.payloads] == runs[0].payloads


@pytest.mark.anyio
async def test_a_final_request_keeps_the_stable_segment_bytes_and_places_no_turn_mark() -> None:
    profile = READER.evolve(system=SYSTEM, prompt_caching=True)
    capture = await run_capture(profile, bounded("first", "last"), [text("a"), text("b")])
    first, final = capture.payloads
    assert first["tools"] == final["tools"] and first["system"] == final["system"]
    assert first["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    last_block = final["messages"][-1]["content"][-1]
    assert "cache_control" not in last_block
    assert "cache_control" in first["messages"][-1]["content"][-1]


@pytest.mark.anyio
async def test_second_request_reads_the_first_requests_turn_mark() -> None:
    provider = scripted({"n": [text("one"), text("two")]})
    settings = RequestSettings(model="claude-haiku-5-5")
    view = [Instruction("Please read carefully. " * 300)]
    async with runtime_for(provider) as rt:
        env = rt.env()
        first = compile_request(system=SYSTEM, tools=(), view=view, settings=settings)
        plan1 = plan_cache(first, None, now=env.clock(), env=env)
        roles1 = {m.role for m in plan1.placement.marks}
        assert {"turn", "stable"} <= roles1
        reply1 = await provider.send(first.with_marks(plan1.placement.marks), node_id="n")
        ledger = record_cache_outcome(plan1, reply1.usage, attempt_start=env.clock(), env=env)

        from runtime.values.messages import AssistantResponse, TextPart

        view2 = view + [AssistantResponse((TextPart("one"),)), Instruction("and again")]
        second = compile_request(system=SYSTEM, tools=(), view=view2, settings=settings)
        plan2 = plan_cache(second, ledger, now=env.clock(), env=env, previous=plan1.placement)
        turn1 = next(m for m in plan1.placement.marks if m.role == "turn")
        assert plan2.placement.read_target is not None
        assert plan2.placement.read_target.ref.location == turn1.location
        reply2 = await provider.send(second.with_marks(plan2.placement.marks), node_id="n")
        verdict = read_verdict(plan2, reply2.usage)
    assert plan2.placement.g1.status == "met"
    assert verdict.read == "at_or_above"
    assert reply2.usage.cache_read_input_tokens > 0


@pytest.mark.anyio
async def test_a_tool_set_change_is_a_rewrite_with_its_cause() -> None:
    from actors.branch import Branch
    from actors.operations import run_operation
    from actors.tools import BUILTIN_TOOLS

    provider = scripted({"n": [text("one"), text("two"), text("three")]})
    branch = Branch.create(system=SYSTEM, tools=BUILTIN_TOOLS.specs(("synthetic_read",)))
    events = []
    async with runtime_for(provider) as rt:
        rt.signals.add_handler(events.append, name="t")
        env = rt.env()
        profile = READER.evolve(system=SYSTEM, prompt_caching=True)
        await run_operation(branch, bounded("first"), env=env, profile=profile, node_id="n")
        await run_operation(branch, bounded("second"), env=env, profile=profile, node_id="n")
        branch.configure(tools=BUILTIN_TOOLS.specs(("synthetic_read", "synthetic_search")))
        await run_operation(branch, bounded("third"), env=env, profile=profile, node_id="n")
    rewrites = [e.data for e in events if e.type == "CacheRewrite"]
    assert rewrites == [
        {
            "cause": "stable segment changed: tools",
            "first_changed_message": 0,
            "request_digest": rewrites[0]["request_digest"],
        }
    ]
    report = rt.report()
    assert report["rewrites"] == {"explained": 1, "unexplained": 0}
