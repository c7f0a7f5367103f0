"""The cache rules a mutation run found unpinned (scripts/mutation): each test names the rule it pins.

Every test here was written against a mutant of ``runtime/cache`` that the
module's other tests let through; the mutant is named in the comment above it
so a later run that reports it again points here.
"""

from __future__ import annotations

import pytest

from runtime.cache.apply import apply_marks
from runtime.cache.blocks import api_order, block_at, check_location
from runtime.cache.certificates import certify_payload
from runtime.cache.errors import CacheInputError
from runtime.cache.marks import Mark, breaks_ttl_order, check_lifetime, check_marks
from runtime.cache.record import G1, G1_EXCLUSIONS
from runtime.cache.tail_skip import TailSkip
from runtime.request.prepared import PreparedBlock, PreparedMessage, PreparedPayload, prepare_block


# apply.x_apply_marks__mutmut_12..14: the refusal names the block's type.
@pytest.mark.parametrize(
    ("block", "named"),
    [
        ({"type": "thinking", "thinking": "t", "signature": "s"}, "'thinking'"),
        ({"type": "redacted_thinking", "data": "d"}, "'redacted_thinking'"),
        ({"type": "text", "text": "  "}, "'text'"),
    ],
)
def test_a_mark_on_an_unmarkable_block_is_refused_naming_its_type(block, named):
    payload = {"messages": [{"role": "assistant", "content": [block]}]}
    with pytest.raises(CacheInputError) as refused:
        apply_marks(payload, [Mark(("messages", 0, 0), "5m", "turn")])
    assert str(refused.value) == (
        f"mark at ('messages', 0, 0): a {named} block that is thinking or blank takes no mark"
    )


def decide(**changes: object) -> TailSkip:
    arguments: dict[str, object] = {"estimate": 88_000, "ceiling": 100_000, "context_fold_at": 0.9, "margin": 0.045}
    arguments.update(changes)
    return TailSkip.decide(**arguments)  # type: ignore[arg-type]


# tail_skip decide__mutmut_17: a fold line at the ceiling itself (context_fold_at = 1) is allowed.
def test_a_fold_line_at_the_ceiling_is_allowed():
    skip = decide(context_fold_at=1, estimate=97_000)
    assert skip.selected
    assert skip.fold_line == 100_000.0


# tail_skip decide__mutmut_16: context_fold_at 0 is refused by its own check, naming context_fold_at
# (not by the margin's check that follows it).
def test_a_fold_line_share_of_zero_is_refused_as_such():
    with pytest.raises(CacheInputError) as refused:
        decide(context_fold_at=0, margin=0)
    assert str(refused.value) == "tail_skip context_fold_at: 0 is not in (0, 1]"


# tail_skip decide__mutmut_12, 25, 37: a value that is not a number is refused naming its argument.
@pytest.mark.parametrize("name", ["context_fold_at", "margin", "estimate"])
def test_a_non_number_is_refused_naming_its_argument(name):
    with pytest.raises(CacheInputError) as refused:
        decide(**{name: "0.5"})
    assert str(refused.value) == f"tail_skip {name}: '0.5' is not a number"


# tail_skip decide__mutmut_55: the decision keeps the ceiling it was made against.
def test_the_decision_keeps_its_ceiling():
    assert decide(ceiling=123_457).ceiling == 123_457


# blocks.x_block_at__mutmut_35: the index one past the last block is refused like any other missing block.
@pytest.mark.parametrize(
    ("location", "count"), [(("tools", 2), 2), (("system", 1), 1), (("messages", 0, 2), 2), (("messages", 1, 1), 1)]
)
def test_the_location_one_past_the_last_block_is_refused(location, count):
    payload = {
        "tools": [{"name": "a", "input_schema": {}}, {"name": "b", "input_schema": {}}],
        "system": "rules",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]},
            {"role": "assistant", "content": "ok"},
        ],
    }
    with pytest.raises(CacheInputError) as refused:
        block_at(payload, location)
    assert str(refused.value) == f"location {location!r}: there are only {count} blocks there"


# blocks.x_check_location__mutmut_1, 2: a malformed location is refused as a "location" unless the caller names it.
def test_a_malformed_location_is_refused_naming_it():
    expected = (
        "is not a block location; expected ('tools', i), ('system', i) or ('messages', m, b) "
        "with non-negative integer indices"
    )
    with pytest.raises(CacheInputError) as refused:
        check_location(("messages", 0))
    assert str(refused.value) == f"location ('messages', 0) {expected}"
    with pytest.raises(CacheInputError) as refused:
        check_location(("tools", -1), what="mark")
    assert str(refused.value) == f"mark ('tools', -1) {expected}"


# marks.x__mark_location__mutmut_2, 4: a mark's bad location is refused as a "mark location".
def test_a_marks_bad_location_is_refused_as_a_mark_location():
    with pytest.raises(CacheInputError, match=r"^mark location \('system',\) is not a block location"):
        Mark(("system",), "5m", "turn")


# marks.x_breaks_ttl_order__mutmut_7, 17: a mark on the same block as an existing one is not before or after it,
# so it breaks no lifetime order (whatever the two lifetimes); one block before or after does.
@pytest.mark.parametrize(("existing", "wanted"), [("5m", "1h"), ("1h", "5m")])
def test_the_same_block_breaks_no_lifetime_order(existing, wanted):
    here, before, after = ("messages", 1, 0), ("messages", 0, 0), ("messages", 2, 0)
    assert not breaks_ttl_order([Mark(here, existing, "turn")], here, wanted)
    assert breaks_ttl_order([Mark(before, "5m", "turn")], here, "1h")
    assert breaks_ttl_order([Mark(after, "1h", "read")], here, "5m")


# blocks.x_check_location__mutmut_27, 28, 32: every index (the message's too) is a non-negative int, not a bool.
@pytest.mark.parametrize(
    "location", [("tools", -1), ("system", True), ("messages", -1, 0), ("messages", True, 0), ("messages", 0, -2)]
)
def test_a_location_with_a_negative_or_boolean_index_is_refused(location):
    with pytest.raises(CacheInputError, match="is not a block location"):
        check_location(location)


# blocks.x_api_order__mutmut_3: a location api_order cannot rank is refused with its message.
def test_api_order_refuses_what_is_not_a_location():
    with pytest.raises(CacheInputError) as refused:
        api_order(("nowhere", 0))
    assert str(refused.value) == (
        "location ('nowhere', 0) is not a block location; expected ('tools', i), ('system', i) or ('messages', m, b)"
    )


# marks.x_check_lifetime__mutmut_1, 2 and check_marks__mutmut_1, 2, 20: the refusals' exact words.
def test_the_mark_refusals_name_what_they_refuse():
    with pytest.raises(CacheInputError) as refused:
        check_lifetime("2h")
    assert str(refused.value) == "lifetime '2h' is not a cache lifetime; expected '5m' or '1h'"
    with pytest.raises(CacheInputError) as refused:
        check_marks(["not a mark"])  # type: ignore[list-item]
    assert str(refused.value) == "marks: 'not a mark' is not a Mark"
    with pytest.raises(CacheInputError) as refused:
        check_marks([Mark(("messages", 0, 0), "5m", "turn"), Mark(("messages", 2, 0), "1h", "read")])
    assert str(refused.value) == (
        "marks: a 5m mark at ('messages', 0, 0) precedes a 1h mark at ('messages', 2, 0); "
        "one-hour marks must come first"
    )


# prepared.x_prepare_block__mutmut_3, 7: a block not canonical by construction (a tool_use's arguments as given)
# is re-encoded canonically; a text block's JSON is kept as the compiler wrote it.
def test_a_prepared_block_is_canonical():
    given = '{"type": "tool_use", "id": "t1", "name": "f", "input": {"b": 1, "a": 2}}'
    block = prepare_block(given, "tool_use")
    assert block.data == b'{"id":"t1","input":{"a":2,"b":1},"name":"f","type":"tool_use"}'
    assert prepare_block('{"text":"hi","type":"text"}', "text").data == b'{"text":"hi","type":"text"}'


# prepared.x_prepare_block__mutmut_16, 17, 24, 26: a blank text block takes no mark; a text block with text does.
def test_a_blank_prepared_text_block_takes_no_mark():
    assert not prepare_block('{"text":" \\n ","type":"text"}', "text").markable
    assert prepare_block('{"text":"x","type":"text"}', "text").markable
    assert not prepare_block('{"thinking":"t","type":"thinking"}', "thinking").markable


# prepared.xǁPreparedPayloadǁmessages__mutmut_1, 2: every message, rendered by its key, in order.
def test_a_prepared_payload_renders_every_message_by_its_key():
    rendered = {key: PreparedMessage(f'{{"role":"{key}"}}'.encode(), ()) for key in ("user", "assistant")}
    payload = PreparedPayload("m", (), (), ("user", "assistant"), rendered.__getitem__)
    assert payload.messages() == (rendered["user"], rendered["assistant"])
    assert payload.message_count == 2


def _prepared(*, model: str = "m1", effort: object = None, system_markable: bool = True) -> PreparedPayload:
    text = prepare_block('{"text":"rules","type":"text"}', "text")
    system = PreparedBlock(text.data, text.kind, system_markable)
    messages = {"u1": PreparedMessage(b'{"role":"user"}', (prepare_block('{"text":"hi","type":"text"}', "text"),))}
    return PreparedPayload(model, (), (system,), ("u1",), messages.__getitem__, effort=effort)


# certificates.x__prepared_source__mutmut_4, 17, 21: a prepared payload's certificates depend on its seeds (model,
# effort) and its stable blocks' kinds and marks, so reuse across a change of any of them equals a fresh certification.
@pytest.mark.parametrize(
    "changed", [{"model": "m2"}, {"effort": "high"}, {"system_markable": False}], ids=["model", "effort", "markable"]
)
def test_reusing_a_prepared_certification_across_a_stable_change_equals_a_fresh_one(changed):
    before, after = _prepared(), _prepared(**changed)
    fresh = certify_payload(after)
    assert certify_payload(after, previous=certify_payload(before)).refs == fresh.refs
    if "system_markable" not in changed:
        assert fresh.refs != certify_payload(before).refs


# record.xǁG1ǁ__attrs_post_init____mutmut_7: an unknown exclusion reason is refused listing the known ones.
def test_an_unknown_g1_exclusion_reason_is_refused_listing_the_known_ones():
    with pytest.raises(CacheInputError) as refused:
        G1("excluded", "because")
    assert str(refused.value) == f"g1 exclusion reason 'because' is not one of {', '.join(G1_EXCLUSIONS)}"
    assert ", " in str(refused.value).split("not one of ", 1)[1]
