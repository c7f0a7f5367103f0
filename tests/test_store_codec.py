"""Stored forms: messages rebuilt byte for byte, tagged values, tool definitions, ledgers."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.branch import ContextState, RequestRecord
from runtime.cache.ledger import CacheLedger
from runtime.cache.rows import LedgerRow
from runtime.errors import InputCeilingExceeded
from runtime.request.compiler import ToolSpec
from runtime.store.codec import (
    RestoredError,
    decode_message,
    dumps_value,
    ledger_from_rows,
    ledger_rows_of,
    loads_value,
    message_content_json,
    message_from_content,
    tool_from_piece,
)
from runtime.store.errors import StoreCorrupt, StoreEncodeError
from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.messages import (
    AssistantResponse,
    ClipInfo,
    Instruction,
    Note,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolResult,
)

text = st.text(max_size=200)
ids = st.text(alphabet="0123456789abcdef", min_size=16, max_size=16)
arguments = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=20)), max_size=4)

calls = st.builds(
    lambda cid, name, args: ToolCall.create(cid, name, args),
    st.text(min_size=1, max_size=12),
    st.text(min_size=1, max_size=12),
    arguments,
)
parts = st.lists(st.one_of(st.builds(TextPart, text), calls), max_size=5).map(tuple)
clips = st.none() | st.builds(
    ClipInfo, st.integers(0, 500), st.integers(0, 10**6), st.integers(0, 5000), st.integers(0, 5000)
)

messages = st.one_of(
    st.builds(lambda t, i: SystemMessage(t, id=i), text, ids),
    st.builds(lambda t, n, i: Instruction(t, n, id=i), text, st.none() | text, ids),
    st.builds(
        lambda p, s, i: AssistantResponse(p, s, id=i), parts, st.none() | st.sampled_from(["end_turn", "tool_use"]), ids
    ),
    st.builds(
        lambda c, n, a, o, e, f, cf, clip, i: ToolResult(c, n, canonical_json(a), o, e, f, cf, clip, id=i),
        st.text(min_size=1, max_size=12),
        st.text(min_size=1, max_size=12),
        arguments,
        text,
        st.booleans(),
        st.sampled_from(["text", "json"]),
        st.none() | ids,
        clips,
        ids,
    ),
    st.builds(
        lambda t, r, fi, s, i: Note(t, tuple(r), fi, s, id=i),
        text,
        st.lists(ids, max_size=5),
        st.integers(0, 1000),
        st.sampled_from(["tool_io", "clip", "all", "reset"]),
        ids,
    ),
)


@given(messages)
def test_every_message_comes_back_equal_with_its_id_and_digest(message) -> None:
    content = message_content_json(message)
    rebuilt = message_from_content(message.kind, json.loads(content), message.id)
    assert rebuilt == message
    assert rebuilt.id == message.id and rebuilt.sha256 == message.sha256
    assert decode_message(message.id, message.kind, content, message.sha256) == message


def test_a_changed_byte_is_refused_naming_the_message() -> None:
    message = ToolResult("c1", "read_file", "{}", "the original output")
    content = message_content_json(message)
    tampered = content.replace("original", "0riginal")
    with pytest.raises(StoreCorrupt, match=f"stored message {message.id}: its content does not match its SHA-256"):
        decode_message(message.id, message.kind, tampered, message.sha256)


def test_content_that_hashes_right_but_is_not_canonical_is_refused() -> None:
    message = Instruction("do it")
    loose = json.dumps(message.content(), indent=1)
    with pytest.raises(StoreCorrupt, match="rebuilt content differs from the stored bytes"):
        decode_message(message.id, message.kind, loose, sha256_hex(loose))


def test_unknown_keys_kinds_and_mismatched_kinds_are_refused_by_name() -> None:
    with pytest.raises(StoreCorrupt, match=r"unknown \['extra'\]"):
        message_from_content("instruction", {"kind": "instruction", "text": "a", "notice": None, "extra": 1}, "m1")
    with pytest.raises(StoreCorrupt, match="does not match its row's kind 'note'"):
        message_from_content("note", {"kind": "instruction", "text": "a", "notice": None}, "m1")
    with pytest.raises(StoreCorrupt, match="kind 'image' is not one of"):
        message_from_content("image", {"kind": "image"}, "m1")
    with pytest.raises(StoreCorrupt, match="is not a text, tool call, thinking or redacted_thinking part"):
        message_from_content(
            "assistant", {"kind": "assistant", "parts": [{"type": "thinking"}], "stop_reason": None}, "m1"
        )


def test_context_state_round_trips_with_its_refusal_and_sets() -> None:
    refusal = InputCeilingExceeded(
        estimate=120, ceiling=100, counted=100, scale=1.2, largest_parts=[("m1", 80)], branch_id="br-1"
    )
    state = ContextState(
        scale=1.25,
        delivered=frozenset({"a", "b"}),
        refusal=refusal,
        pending_marks=(("m1", 3),),
        last_request_digests=("d1", "d2"),
        open_turn=(1, 2),
    )
    back = loads_value(dumps_value(state, "state"), "state")
    assert isinstance(back, ContextState)
    assert back.delivered == state.delivered and back.open_turn == (1, 2) and back.scale == 1.25
    assert back.pending_marks == (("m1", 3),)
    assert isinstance(back.refusal, InputCeilingExceeded)
    assert back.refusal.to_dict() == refusal.to_dict() and str(back.refusal) == str(refusal)


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=10),
        lambda children: (
            st.lists(children, max_size=3)
            | st.lists(children, max_size=3).map(tuple)
            | st.dictionaries(st.text(max_size=5), children, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_plain_values_keep_their_types(value) -> None:
    back = loads_value(dumps_value(value, "v"), "v")

    def plain(v):
        if isinstance(v, dict) or hasattr(v, "items"):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, tuple):
            return ("tuple", [plain(x) for x in v])
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v

    assert plain(back) == plain(value)


def test_a_request_record_round_trips() -> None:
    record = RequestRecord(
        request_id="br-1:1",
        node_id="n",
        digest="0" * 64,
        recipe_version=1,
        system_id="s",
        tools_json=("{}",),
        view_ids=("a", "b"),
        model="m",
        max_tokens=10,
        intent="continuing",
        tool_choice_json=None,
        marks=((("messages", 0, 0), "5m", "turn"),),
        status="sent",
        usage={"input_tokens": 3},
    )
    back = loads_value(dumps_value(record, "r"), "r")
    assert back.marks == record.marks and back.view_ids == record.view_ids and dict(back.usage) == {"input_tokens": 3}


class _Opaque:
    pass


def test_values_without_a_stored_form_are_refused_naming_the_field() -> None:
    state = ContextState(protected_round=_Opaque())
    with pytest.raises(StoreEncodeError, match=r"state\.protected_round: a value of type _Opaque"):
        dumps_value(state, "state")
    with pytest.raises(StoreEncodeError, match="not a finite number"):
        dumps_value(float("nan"), "x")


def test_only_foldline_classes_are_rebuilt() -> None:
    with pytest.raises(StoreCorrupt, match="is not one of foldline's own"):
        loads_value('{"$attrs":"os:PathLike","fields":{}}', "x")
    with pytest.raises(StoreCorrupt, match="does not exist in this build"):
        loads_value('{"$attrs":"runtime.values.messages:NoSuchThing","fields":{}}', "x")
    with pytest.raises(StoreCorrupt, match="fields \\['bogus'\\] this build does not know"):
        loads_value('{"$attrs":"actors.branch:ContextState","fields":{"bogus":1}}', "x")
    with pytest.raises(StoreCorrupt, match="has no known tag"):
        loads_value('{"$nope":1}', "x")


def test_an_error_whose_type_cannot_be_rebuilt_is_restored_as_such() -> None:
    value = loads_value('{"$error":"runtime.errors:InputCeilingExceeded","message":"over"}', "refusal")
    assert isinstance(value, RestoredError) and "over" in str(value)


def test_tools_come_back_from_their_rendered_piece() -> None:
    spec = ToolSpec.create("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})
    assert tool_from_piece(spec.piece()) == spec
    with pytest.raises(StoreCorrupt, match="is not a rendered tool"):
        tool_from_piece('{"name":"x"}')
    with pytest.raises(StoreCorrupt, match="does not render back"):
        tool_from_piece('{"description":"d", "input_schema":{},"name":"x"}')


def test_a_ledger_comes_back_with_its_rows_and_no_evidence() -> None:
    row = LedgerRow(
        certificate="a" * 64,
        lifetime="5m",
        tier="messages",
        stored_length=100,
        last_marked=10.0,
        last_read=None,
        expires_at=310.0,
        seen=(("direct", "proc-1"),),
    )
    ledger = attrs.evolve(CacheLedger.empty(), rows={row.certificate: row})
    watermark, max_rows, rows = ledger_rows_of(ledger)
    back = ledger_from_rows(watermark, max_rows, [r for _, r in rows])
    restored = back.get("a" * 64)
    assert restored is not None and restored.stored_length == 100 and restored.seen == ()
    assert ledger_rows_of(None) is None
    with pytest.raises(StoreEncodeError, match="expected a CacheLedger"):
        ledger_rows_of({"rows": []})
