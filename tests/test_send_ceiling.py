"""The ceiling on the send path: measured before every send, refused before the send."""

from __future__ import annotations

import pytest
from support import READER, bounded, calls, iterative, node, read, runtime_for, scripted, text

from actors.branch import Branch
from actors.operations import Operation, run_operation
from runtime.config import Profile
from runtime.errors import InputCeilingExceeded
from runtime.flows.flow import Flow


def decisions(events):
    return [e.data for e in events if e.type == "ContextDecision"]


async def run_one(profile: Profile, op: Operation, script, *, model: str = "claude-haiku-5-5"):
    provider = scripted({"n": script})
    events = []
    async with runtime_for(provider, model=model) as rt:
        rt.signals.add_handler(events.append, name="t")
        result = await rt.run(Flow([node("n", op, profile=profile)]))
    return result, events, provider


def reading_script():
    return [calls(read("notes.md", 8000)), text("done")]


def server_counts(events) -> list[int]:
    """What the server counted for each response (fresh + cache read + cache write input)."""
    return [
        sum(v for k, v in e.data["usage"].items() if k != "output_tokens")
        for e in events
        if e.type == "ResponseReceived"
    ]


@pytest.mark.anyio
async def test_estimate_at_the_ceiling_is_sent_and_one_over_is_refused_before_the_send() -> None:
    _, events, _ = await run_one(READER, iterative("read"), reading_script())
    ours = decisions(events)[1]["estimate_before"]
    second = server_counts(events)[1]  # near the ceiling the decision reads the provider's count (issue 11)
    assert ours > decisions(events)[0]["estimate_before"] and second > ours

    at, events_at, _ = await run_one(READER.evolve(max_input_tokens=second), iterative("read"), reading_script())
    assert at.status == "ok"
    assert [d["estimate_after"] for d in decisions(events_at)][1] == second
    assert decisions(events_at)[1]["sent"] is True and decisions(events_at)[1]["provider_count"] == second

    over, events_over, provider = await run_one(
        READER.evolve(max_input_tokens=second - 1), iterative("read"), reading_script()
    )
    assert over.status == "failed"
    error = over["n"].error
    assert isinstance(error, InputCeilingExceeded)
    assert (error.estimate, error.ceiling, error.scale) == (second, second - 1, 1.0)
    assert error.counted == ours and error.largest_parts
    refused = decisions(events_over)[-1]
    assert refused["action"] == "refuse" and refused["sent"] is False
    assert refused["ceiling"] == second - 1 and refused["ceiling_source"] == "profile"
    assert len(provider.app.requests) == 1  # the first request only: nothing sent on the refusal
    assert sum(1 for e in events_over if e.type == "RequestSent") == 1


@pytest.mark.anyio
async def test_unset_on_a_tier_priced_model_is_auto_with_the_tier_and_flat_models_have_none() -> None:
    _, events, _ = await run_one(READER, bounded("hi"), [text("hello")])
    d = decisions(events)[0]
    assert (d["ceiling"], d["ceiling_source"], d["tier"]) == (100_000, "auto", 0)
    _, events, _ = await run_one(READER, bounded("hi"), [text("hello")], model="claude-sonnet-4-5")
    d = decisions(events)[0]
    # Unpriced resolves to no ceiling; the model's context window then bounds it (issue 11).
    assert d["ceiling"] == 200_000 and d["ceiling_source"] == "window" and d["tier"] is None
    assert d["action"] == "pass"


@pytest.mark.anyio
async def test_no_ceiling_sends_the_same_bytes_as_an_explicit_none_and_as_a_flat_model() -> None:
    digests = []
    for profile, model in (
        (READER.evolve(max_input_tokens="none"), "claude-haiku-5-5"),
        (READER, "claude-sonnet-4-5"),
        (READER.evolve(max_input_tokens="none"), "claude-sonnet-4-5"),
    ):
        _, _, provider = await run_one(profile, iterative("read"), reading_script(), model=model)
        digests.append([r.payload_digest for r in provider.app.requests])
    # the model name differs in the payload between haiku and sonnet runs, so compare like with like
    assert digests[1] == digests[2]
    assert len(digests[0]) == 2


@pytest.mark.anyio
async def test_the_notice_line_is_appended_with_the_turn_and_never_rewritten() -> None:
    second_turn = "Now read this brief carefully. " + "The brief repeats its point. " * 400
    _, events, _ = await run_one(READER, bounded("first", second_turn), [text("a"), text("b")])
    plain = decisions(events)[1]["estimate_before"]
    result, events, provider = await run_one(
        READER.evolve(max_input_tokens=int(plain / 0.85)), bounded("first", second_turn), [text("a"), text("b")]
    )
    assert result.status == "ok"
    actions = [d["action"] for d in decisions(events)]
    assert actions[-1] == "notice"
    view = result.branches["n"].view()
    second = view[2]
    assert second.notice is not None and "context" in second.notice
    assert str(int(plain / 0.85)) in second.notice.replace(",", "")
    assert view[0].notice is None  # the earlier turn is never rewritten


@pytest.mark.anyio
async def test_a_bounded_run_over_the_ceiling_sends_nothing_and_records_the_count() -> None:
    provider = scripted({"n": [text("never")]})
    events = []
    branch = Branch.create(system="s")
    from runtime.values.messages import Instruction

    async with branch.turn() as turn:
        turn.append(Instruction("x" * 40_000))
    async with runtime_for(provider) as rt:
        rt.signals.add_handler(events.append, name="t")
        result = await rt.run(
            Flow([node("n", bounded("review it"), branch=branch, profile=READER.evolve(max_input_tokens=2000))])
        )
    assert result["n"].status == "failed"
    assert "> ceiling 2000" in result["n"].reason and "nothing was sent" in result["n"].reason
    assert provider.app.requests == ()
    d = decisions(events)[0]
    assert d["action"] == "refuse" and d["sent"] is False and d["estimate_before"] > 2000


@pytest.mark.anyio
async def test_refusal_is_sticky_on_the_branch_and_not_on_its_siblings() -> None:
    provider = scripted({"n": [text("unused")], "m": [text("sibling fine")]})
    emitter = Branch.create(system="s")
    from runtime.values.messages import Instruction

    async with emitter.turn() as turn:
        turn.append(Instruction("y" * 20_000))
    refused_clone, sibling = emitter.clone(), emitter.clone()
    async with runtime_for(provider) as rt:
        env = rt.env()
        tight = READER.evolve(max_input_tokens=3000)
        with pytest.raises(InputCeilingExceeded) as first:
            await run_operation(refused_clone, bounded("a"), env=env, profile=tight, node_id="n")
        # sticky: a later, different operation on the same branch cannot go on to send
        with pytest.raises(InputCeilingExceeded) as again:
            await run_operation(refused_clone, bounded("b"), env=env, profile=READER, node_id="n")
        assert again.value is first.value
        # the sibling (same emitter, same size) is not refused by its sibling's refusal
        answer = await run_operation(sibling, bounded("c"), env=env, profile=READER, node_id="m")
        assert answer.answer == "sibling fine"
        assert emitter.refusal is None and sibling.refusal is None
        refused_clone.clear_refusal()
        assert refused_clone.refusal is None
    assert len(provider.app.requests) == 1


@pytest.mark.anyio
async def test_what_the_cache_would_read_counts_against_the_ceiling() -> None:
    cached = READER.evolve(prompt_caching=True)
    provider = scripted({"n": [calls(read("big.md", 20_000)), calls(read("small.md", 500)), text("one")]})
    branch = Branch.create(system="You read files.", tools=())
    async with runtime_for(provider) as rt:
        env = rt.env()
        from actors.tools import BUILTIN_TOOLS

        branch.configure(tools=BUILTIN_TOOLS.specs(("synthetic_read",)))
        await run_operation(branch, iterative("read"), env=env, profile=cached, node_id="n")
        last = provider.app.requests[-1].usage
        assert last.cache_read_input_tokens > 3000  # most of the request came from the cache
        with pytest.raises(InputCeilingExceeded) as refused:
            await run_operation(
                branch, Operation("bounded", ("again",), max_input_tokens=3000), env=env, profile=cached, node_id="n"
            )
    assert refused.value.estimate > 3000
    assert len(provider.app.requests) == 3


@pytest.mark.anyio
async def test_one_large_result_is_counted_by_the_tokenizer_not_by_a_byte_ratio() -> None:
    from runtime.measuring.tokenizer import count_tokens

    dense = "".join(chr(0x4E00 + (i * 7919) % 20000) for i in range(6000))  # ~1 token per character
    assert count_tokens(dense) > 4000
    from runtime.values.messages import Instruction

    branch = Branch.create()
    async with branch.turn() as turn:
        turn.append(Instruction(dense))
    provider = scripted({"n": [text("x")]})
    async with runtime_for(provider) as rt:
        with pytest.raises(InputCeilingExceeded) as refused:
            await run_operation(
                branch, bounded("go"), env=rt.env(), profile=READER.evolve(max_input_tokens=40_000 // 10), node_id="n"
            )
    assert refused.value.estimate >= count_tokens(dense)


@pytest.mark.anyio
async def test_a_call_value_may_lower_the_ceiling_never_raise_it() -> None:
    from runtime.errors import ConfigError

    result, events, _ = await run_one(
        READER.evolve(max_input_tokens=5000), Operation("bounded", ("x",), max_input_tokens=4000), [text("ok")]
    )
    assert decisions(events)[0]["ceiling"] == 4000 and decisions(events)[0]["ceiling_source"] == "call"
    # Issue 11: a call value that would raise or remove the profile's ceiling is refused when the node is built.
    for call in (6000, "none"):
        with pytest.raises(ConfigError, match="would raise the profile's ceiling of 5000"):
            node("n", Operation("bounded", ("x",), max_input_tokens=call), profile=READER.evolve(max_input_tokens=5000))
