"""The payload oracle (first_divergence, stable_changed, settings_changed) the rewrite detector is held to."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.cache.rewrites import Rewrite, find_rewrite, stable_digests
from runtime.request.compiler import Request, RequestSettings, ToolSpec, compile_request
from runtime.values.messages import AssistantResponse, Instruction, Message, TextPart
from tests.payload_rewrites import first_divergence, settings_changed, stable_changed


def payload(n: int = 3) -> dict:
    return {
        "model": "m",
        "tools": [{"name": "a", "description": "d", "input_schema": {}}],
        "system": [{"type": "text", "text": "sys"}],
        "messages": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": f"m{i}"}]}
            for i in range(n)
        ],
    }


def test_a_prefix_has_no_divergence():
    assert first_divergence(payload(3), payload(5)) is None
    assert first_divergence(payload(3), payload(3)) is None
    assert first_divergence(payload(0), payload(2)) is None


def test_the_first_changed_message_is_named():
    nxt = payload(5)
    nxt["messages"][1]["content"][0]["text"] = "rewritten"
    nxt["messages"][3]["content"][0]["text"] = "rewritten too"
    assert first_divergence(payload(4), nxt) == 1


def test_a_changed_role_is_a_divergence():
    nxt = payload(3)
    nxt["messages"][2]["role"] = "assistant"
    assert first_divergence(payload(3), nxt) == 2


def test_a_shorter_next_request_diverges_where_it_ends():
    assert first_divergence(payload(4), payload(2)) == 2


def test_marks_and_string_form_are_not_rewrites():
    prev = payload(3)
    prev["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    nxt = payload(4)
    nxt["messages"][0]["content"] = "m0"
    assert first_divergence(prev, nxt) is None


def test_stable_changed_for_tools_system_and_tool_choice():
    base = payload()
    assert not stable_changed(base, payload(6))
    for change in (
        lambda p: p["tools"].append({"name": "b", "description": "d", "input_schema": {}}),
        lambda p: p["system"][0].update(text="other"),
        lambda p: p.__setitem__("tool_choice", {"type": "any"}),
    ):
        nxt = copy.deepcopy(base)
        change(nxt)
        assert stable_changed(base, nxt)


def test_stable_changed_ignores_marks_and_string_system():
    base = payload()
    marked = copy.deepcopy(base)
    marked["system"] = "sys"
    marked["tools"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    assert not stable_changed(base, marked)


def test_settings_changed_for_the_certificate_seeds():
    base = payload()
    assert not settings_changed(base, payload(5))
    for key, value in (
        ("model", "n"),
        ("thinking", {"type": "enabled"}),
        ("output_config", {"effort": "low"}),
        ("speed", "fast"),
    ):
        nxt = copy.deepcopy(base)
        nxt[key] = value
        assert settings_changed(base, nxt)


# --- the send path's digest detector agrees with the payload oracle -----------------------

_TOOL = ToolSpec.create("read_file", "Read a file.", {"type": "object"})


def _compiled(texts: list[str], *, system: str = "sys", tools: tuple[ToolSpec, ...] = (_TOOL,)) -> Request:
    view: list[Message] = []
    for i, text in enumerate(texts):
        view.append(Instruction(text) if i % 2 == 0 else AssistantResponse((TextPart(text),)))
    return compile_request(system=system, tools=tools, view=view, settings=RequestSettings(model="m"))


def _digests(request: Request) -> tuple[tuple[str, str, str], tuple[str, ...]]:
    s = request.settings
    stable = stable_digests([t.piece() for t in request.tools], request.system, s.model, s.tool_choice_json)
    return stable, request.message_digests()


words = st.lists(st.sampled_from(["a", "b", "c", "read it", "done"]), min_size=1, max_size=6)


@settings(max_examples=60)
@given(words, words, st.booleans())
def test_the_detector_names_the_message_the_payload_oracle_names(
    first: list[str], second: list[str], extend: bool
) -> None:
    later = first + second if extend else second
    prev, nxt = _compiled(first), _compiled(later)
    (stable_a, digests_a), (stable_b, digests_b) = _digests(prev), _digests(nxt)
    found = find_rewrite(stable_a, digests_a, stable_b, digests_b, "a fold")
    expected = first_divergence(prev.payload(), nxt.payload())
    assert (found.first_changed_message if found is not None else None) == expected
    if found is not None:
        assert found.cause == "a fold"


def test_a_stable_segment_change_is_the_whole_rewrite_and_names_what_changed() -> None:
    prev = _compiled(["a", "b"])
    nxt = _compiled(["x", "b"], system="other")
    (stable_a, digests_a), (stable_b, digests_b) = _digests(prev), _digests(nxt)
    assert stable_changed(prev.payload(), nxt.payload())
    assert find_rewrite(stable_a, digests_a, stable_b, digests_b, None) == Rewrite(
        0, "stable segment changed: system text"
    )
    assert find_rewrite((), (), stable_b, digests_b, None) is None  # the first request rewrites nothing


# --- errors name the message they are about ----------------------------------------------


def _two_messages(second_content: object) -> dict:
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": "the task"},
            {"role": "assistant", "content": second_content},
        ],
    }


def test_a_malformed_message_on_either_side_is_named_by_its_index():
    from runtime.cache.errors import CacheInputError

    good = _two_messages([{"type": "text", "text": "ok"}])
    named = r"^messages\[1\]\.content is int, expected a string or a list of blocks$"
    with pytest.raises(CacheInputError, match=named):
        first_divergence(_two_messages(5), good)
    with pytest.raises(CacheInputError, match=named):
        first_divergence(good, _two_messages(5))


def test_block_at_names_a_missing_message_and_a_malformed_one():
    from runtime.cache.blocks import block_at
    from runtime.cache.errors import CacheInputError

    payload = _two_messages(5)
    with pytest.raises(CacheInputError, match=r"^location \('messages', 2, 0\): the payload has 2 messages$"):
        block_at(payload, ("messages", 2, 0))
    with pytest.raises(CacheInputError, match=r"^messages\[1\]\.content is int"):
        block_at(payload, ("messages", 1, 0))
    assert block_at(payload, ("messages", 0, 0)) == {"type": "text", "text": "the task"}
