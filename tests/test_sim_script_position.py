"""A script's position read from the conversation (runtime.sim.script_position): any simulator answers alike.

Pure and synchronous (no event loop): nothing here runs on asyncio or trio.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.scripted.policies import ScriptCall, ScriptPolicy, ScriptStep
from runtime.sim.conversations import ConversationScripts
from runtime.sim.script_position import StepIndex, script_position

TEXTS = st.sampled_from(["Reading.", "Done.", "Next.", "Checked."])  # few texts: repeats across steps


@st.composite
def scripts(draw: st.DrawFn) -> ScriptPolicy:
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        calls = [
            ScriptCall.create("synthetic_read", {"path": draw(st.sampled_from(["a.md", "b.md"]))})
            for _ in range(draw(st.integers(0, 2)))
        ]
        text = draw(st.one_of(st.none(), TEXTS)) if calls else draw(TEXTS)
        steps.append(ScriptStep(text=text, tool_calls=calls))
    return ScriptPolicy("reader", steps)


def _next_user(reply: Any) -> dict[str, Any]:
    results = [
        {"type": "tool_result", "tool_use_id": block["id"], "content": "ok"}
        for block in reply.content
        if block["type"] == "tool_use"
    ]
    return {"role": "user", "content": results or [{"type": "text", "text": "Go on."}]}


def _conversation(policy: ScriptPolicy, scripts_: ConversationScripts) -> list[tuple[dict[str, Any], Any]]:
    """Every request of the script's conversation, answered by ``scripts_``, with its answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Read the files."}]}]
    out = []
    for _ in policy.steps:
        payload = {"system": "You read.", "messages": list(messages)}
        reply = scripts_.respond(policy, payload)
        out.append((payload, reply))
        messages += [{"role": "assistant", "content": list(reply.content)}, _next_user(reply)]
    return out


@settings(max_examples=150, deadline=None)
@given(scripts(), st.data())
def test_a_fresh_simulator_answers_any_request_of_a_conversation_as_the_first_did(
    policy: ScriptPolicy, data: st.DataObject
) -> None:
    answered = _conversation(policy, ConversationScripts())
    assert [reply for _, reply in answered] == [
        ConversationScripts().respond(policy, payload) for payload, _ in answered
    ]  # each request alone, in a simulator that never saw the conversation (another worker's)
    # Earlier turns folded away (the first message kept, the last reply with its results kept): still the same,
    # unless a text-only reply's text is repeated in the script and its earlier uses were folded (see the module).
    payload, reply = answered[data.draw(st.integers(0, len(answered) - 1))]
    messages = payload["messages"]
    texts = [step.text for step in policy.steps if not step.tool_calls]
    if len(messages) > 3 and len(set(texts)) == len(texts):
        cut = data.draw(st.integers(1, len(messages) - 2))
        folded = {"system": "You read.", "messages": [messages[0], *messages[cut:]]}
        assert ConversationScripts().respond(policy, folded) == reply


def test_the_position_is_one_past_the_last_reply_the_request_holds() -> None:
    policy = ScriptPolicy(
        "lead",
        [
            ScriptStep(text="Reading.", tool_calls=[ScriptCall.create("read", {"path": "a"})]),
            ScriptStep(text="Done."),
            ScriptStep(text="Done."),
        ],
    )
    index = StepIndex.of(policy)
    [(first, _), (second, reply_0), (third, _)] = [(p, r) for p, r in _conversation(policy, ConversationScripts())][:3]
    assert script_position(index, 0, first) is None  # nothing of the script yet: the remembered cursor decides
    assert script_position(index, 0, second) == 1 and script_position(index, 0, third) == 2  # "Done." twice: in order
    # The results alone (the reply folded away) still name the step their calls came from.
    results_only = {"messages": [second["messages"][0], second["messages"][2]]}
    assert script_position(index, 0, results_only) == 1
    # Another node's replies with calls (an inherited view) are not this script's, whatever their text.
    other = {"role": "assistant", "content": [{"type": "text", "text": "Done."}, {"type": "tool_use", "id": "toolu_x"}]}
    assert script_position(index, 0, {"messages": [first["messages"][0], other]}) is None
    assert script_position(index, 0, {"messages": "not a list"}) is None


def test_a_simulator_that_answered_earlier_steps_follows_another_ones_later_steps() -> None:
    """Worker A's simulator answered steps 0-1, worker B's 2-3; a request for step 4 on A gets step 4, not 2."""
    policy = ScriptPolicy("n", [ScriptStep(tool_calls=[ScriptCall.create("read", {"path": str(i)})]) for i in range(5)])
    answered = _conversation(policy, ConversationScripts())
    a, b = ConversationScripts(), ConversationScripts()
    assert [a.respond(policy, p) for p, _ in answered[:2]] == [r for _, r in answered[:2]]
    assert [b.respond(policy, p) for p, _ in answered[2:4]] == [r for _, r in answered[2:4]]
    assert a.respond(policy, answered[4][0]) == answered[4][1]
