"""Prefix certificates: seeds, the message envelope, content forms, runs, reuse."""

from __future__ import annotations

import copy

import pytest

from runtime.cache.certificates import BlockRef, certify, certify_payload
from runtime.cache.errors import CacheInputError


def base_payload() -> dict:
    return {
        "model": "claude-haiku-5-5",
        "max_tokens": 100,
        "tools": [
            {"name": "read", "description": "read a file", "input_schema": {"type": "object"}},
            {"name": "grep", "description": "search", "input_schema": {"type": "object"}},
        ],
        "system": [{"type": "text", "text": "You are careful."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "task"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": "a", "name": "read", "input": {"p": 1}},
                ],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]},
        ],
    }


def certs(payload: dict) -> dict:
    return {ref.location: ref.certificate for ref in certify(payload)}


def changed_tiers(a: dict, b: dict) -> set[str]:
    """The tiers whose certificates differ between two payloads with the same block layout."""
    ca, cb = certs(a), certs(b)
    assert ca.keys() == cb.keys()
    return {loc[0] for loc in ca if ca[loc] != cb[loc]}


def unchanged_tiers(a: dict, b: dict) -> set[str]:
    ca, cb = certs(a), certs(b)
    return {loc[0] for loc in ca if ca[loc] == cb[loc]}


def test_every_block_is_certified_in_api_order():
    refs = certify(base_payload())
    assert [ref.location for ref in refs] == [
        ("tools", 0),
        ("tools", 1),
        ("system", 0),
        ("messages", 0, 0),
        ("messages", 1, 0),
        ("messages", 1, 1),
        ("messages", 2, 0),
    ]
    assert [ref.kind for ref in refs] == ["tool", "tool", "text", "text", "text", "tool_use", "tool_result"]
    assert all(len(ref.certificate) == 64 for ref in refs)
    assert len({ref.certificate for ref in refs}) == len(refs)
    assert [ref.tier for ref in refs][:3] == ["tools", "tools", "system"]


def test_certificates_are_deterministic():
    assert certify(base_payload()) == certify(copy.deepcopy(base_payload()))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model", "claude-opus-5"),
        ("thinking", {"type": "enabled", "budget_tokens": 2000}),
        ("output_config", {"effort": "high"}),
    ],
)
def test_tools_tier_seeds_change_every_certificate(field, value):
    changed = base_payload()
    changed[field] = value
    assert changed_tiers(base_payload(), changed) == {"tools", "system", "messages"}
    assert unchanged_tiers(base_payload(), changed) == set()


def test_effort_is_the_only_output_config_field_in_the_seed():
    a = base_payload()
    a["output_config"] = {"effort": "low", "format": {"type": "json"}}
    b = base_payload()
    b["output_config"] = {"effort": "low"}
    assert certs(a) == certs(b)


def test_speed_seeds_the_system_tier():
    changed = base_payload()
    changed["speed"] = "fast"
    assert changed_tiers(base_payload(), changed) == {"system", "messages"}
    assert unchanged_tiers(base_payload(), changed) == {"tools"}


def test_tool_choice_seeds_the_messages_tier():
    changed = base_payload()
    changed["tool_choice"] = {"type": "any"}
    assert changed_tiers(base_payload(), changed) == {"messages"}
    assert unchanged_tiers(base_payload(), changed) == {"tools", "system"}


def test_a_changed_tool_changes_everything_after_it():
    changed = base_payload()
    changed["tools"][1]["description"] = "search files"
    before, after = certs(base_payload()), certs(changed)
    assert before[("tools", 0)] == after[("tools", 0)]
    assert all(before[loc] != after[loc] for loc in before if loc != ("tools", 0))


def test_the_system_tier_continues_the_tools_tier():
    no_tools = base_payload()
    del no_tools["tools"]
    with_tools = base_payload()
    assert certs(no_tools)[("system", 0)] != certs(with_tools)[("system", 0)]


def test_cache_control_on_the_block_itself_is_ignored():
    marked = base_payload()
    marked["tools"][1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    marked["system"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    marked["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert certs(marked) == certs(base_payload())


def test_string_content_certifies_as_one_text_block():
    as_string = base_payload()
    as_string["messages"][0]["content"] = "task"
    as_string["system"] = "You are careful."
    assert certs(as_string) == certs(base_payload())


def test_the_role_is_in_the_message_envelope():
    changed = base_payload()
    changed["messages"][1]["role"] = "user"
    before, after = certs(base_payload()), certs(changed)
    assert before[("messages", 0, 0)] == after[("messages", 0, 0)]
    assert before[("messages", 1, 0)] != after[("messages", 1, 0)]
    assert before[("messages", 2, 0)] != after[("messages", 2, 0)]


def test_every_message_field_but_content_is_in_the_envelope():
    changed = base_payload()
    changed["messages"][1]["name"] = "helper"
    before, after = certs(base_payload()), certs(changed)
    assert before[("messages", 1, 0)] != after[("messages", 1, 0)]


def test_a_block_moved_across_a_message_boundary_changes_later_certificates():
    def text(t: str) -> dict[str, str]:
        return {"type": "text", "text": t}

    split_late = {
        "model": "m",
        "messages": [{"role": "user", "content": [text("a"), text("b")]}, {"role": "user", "content": [text("c")]}],
    }
    split_early = {
        "model": "m",
        "messages": [{"role": "user", "content": [text("a")]}, {"role": "user", "content": [text("b"), text("c")]}],
    }
    late, early = certify(split_late), certify(split_early)
    assert late[0].certificate == early[0].certificate
    assert late[1].certificate != early[1].certificate
    assert late[2].certificate != early[2].certificate


def test_an_inserted_empty_message_changes_every_later_certificate():
    inserted = base_payload()
    inserted["messages"].insert(1, {"role": "user", "content": []})
    before, after = certify(base_payload()), certify(inserted)
    assert len(before) == len(after)
    assert before[3].certificate == after[3].certificate  # messages[0] is untouched
    assert all(b.certificate != a.certificate for b, a in zip(before[4:], after[4:], strict=True))


def test_appending_messages_keeps_earlier_certificates():
    longer = base_payload()
    longer["messages"].append({"role": "assistant", "content": "done"})
    assert certify(longer)[: len(certify(base_payload()))] == certify(base_payload())


def run_payload(blocks_per_message: list[list[str]]) -> dict:
    def block(kind: str, i: int) -> dict:
        if kind == "tool_use":
            return {"type": "tool_use", "id": f"u{i}", "name": "f", "input": {}}
        if kind == "tool_result":
            return {"type": "tool_result", "tool_use_id": f"u{i}", "content": "r"}
        if kind == "thinking":
            return {"type": "thinking", "thinking": "hmm", "signature": "s"}
        return {"type": "text", "text": f"t{i}"}

    counter = iter(range(10_000))
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": [block(kind, next(counter)) for kind in kinds]} for kinds in blocks_per_message
        ],
    }


def test_a_run_of_tool_use_or_tool_result_blocks_is_one_position():
    payload = run_payload(
        [
            ["text", "tool_use", "tool_use", "tool_use", "text", "tool_use"],
            ["tool_result", "tool_result", "tool_use", "tool_result"],
        ]
    )
    positions = [ref.position for ref in certify(payload)]
    assert positions == [0, 1, 1, 1, 2, 3, 4, 4, 5, 6]


def test_runs_do_not_cross_a_message_boundary():
    payload = run_payload([["tool_result", "tool_result"], ["tool_result"]])
    assert [ref.position for ref in certify(payload)] == [0, 0, 1]


def test_run_collapse_can_be_turned_off():
    payload = run_payload([["tool_use", "tool_use", "tool_use"]])
    assert [ref.position for ref in certify(payload, collapse_runs=False)] == [0, 1, 2]
    assert [ref.position for ref in certify(payload)] == [0, 0, 0]


def test_tools_and_system_blocks_are_positions():
    assert [ref.position for ref in certify(base_payload())] == [0, 1, 2, 3, 4, 5, 6]


def test_thinking_and_blank_text_take_no_mark():
    payload = {
        "model": "m",
        "system": [{"type": "text", "text": "   "}],
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "x", "signature": "s"},
                    {"type": "redacted_thinking", "data": "zz"},
                    {"type": "text", "text": ""},
                    {"type": "text", "text": "\n "},
                    {"type": "text", "text": "real"},
                    {"type": "tool_use", "id": "1", "name": "f", "input": {}},
                ],
            }
        ],
    }
    assert [ref.markable for ref in certify(payload)] == [False, False, False, False, False, True, True]


def test_reuse_gives_exactly_the_certificates_of_a_fresh_run():
    first = certify_payload(base_payload())
    grown = base_payload()
    grown["messages"].append(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "grep", "input": {}}]}
    )
    grown["messages"].append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "content": "y"}]})
    reused = certify_payload(grown, previous=first)
    assert reused.refs == certify(grown)
    assert reused.reused_messages(first) == 3


def test_reuse_stops_at_the_first_changed_message():
    first = certify_payload(base_payload())
    rewritten = base_payload()
    rewritten["messages"][1]["content"][0]["text"] = "changed"
    reused = certify_payload(rewritten, previous=first)
    assert reused.refs == certify(rewritten)
    assert reused.reused_messages(first) == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p.__setitem__("tool_choice", {"type": "auto"}),
        lambda p: p["system"].append({"type": "text", "text": "more"}),
        lambda p: p.__setitem__("model", "other"),
    ],
)
def test_reuse_is_refused_when_the_stable_part_or_a_seed_changed(change):
    first = certify_payload(base_payload())
    changed = base_payload()
    change(changed)
    reused = certify_payload(changed, previous=first)
    assert reused.refs == certify(changed)
    assert reused.reused_messages(first) == 0


def test_reuse_is_refused_across_run_collapse_settings():
    payload = run_payload([["tool_use", "tool_use"]])
    collapsed = certify_payload(payload)
    flat = certify_payload(payload, collapse_runs=False, previous=collapsed)
    assert [ref.position for ref in flat.refs] == [0, 1]


def test_reuse_of_a_longer_previous_payload():
    longer = base_payload()
    longer["messages"].append({"role": "assistant", "content": "more"})
    first = certify_payload(longer)
    assert certify_payload(base_payload(), previous=first).refs == certify(base_payload())


def test_the_input_is_not_mutated():
    payload = base_payload()
    payload["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral"}
    snapshot = copy.deepcopy(payload)
    certify(payload)
    assert payload == snapshot


@pytest.mark.parametrize(
    ("payload", "fragment"),
    [
        ([], "payload is list"),
        ({"messages": {}}, "messages is dict"),
        ({"messages": ["hi"]}, "messages[0] is str"),
        ({"messages": [{"role": "user"}]}, "messages[0] has no 'content'"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content is int"),
        ({"messages": [{"role": "user", "content": [{"text": "x"}]}]}, "messages[0].content[0]"),
        ({"tools": {"name": "x"}}, "tools is dict"),
        ({"tools": ["x"]}, "tools[0] is str"),
        ({"system": 5}, "system is int"),
    ],
)
def test_bad_payloads_are_refused_with_the_path(payload, fragment):
    with pytest.raises(CacheInputError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        certify(payload)


def test_block_ref_is_a_frozen_value():
    ref = BlockRef(("messages", 0, 0), "a" * 64, 3, "text")
    with pytest.raises(AttributeError):
        ref.position = 4  # type: ignore[misc]
    assert ref.markable is True


@pytest.mark.parametrize("bad", [float("nan"), {1, 2}])
def test_values_with_no_json_form_are_refused(bad):
    payload = base_payload()
    payload["messages"][1]["content"][1]["input"] = {"x": bad}
    with pytest.raises(CacheInputError, match="no canonical JSON form"):
        certify(payload)
