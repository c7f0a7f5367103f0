"""The event envelope: validation, deep immutability and the JSON round trip."""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.values.canonical import canonical_json
from signals.envelope import (
    ENVELOPE_FIELDS,
    SCHEMA_VERSION,
    Event,
    InvalidEventError,
    event_id,
    freeze_json,
    thaw_json,
)

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
JSON_OBJECTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=5)
IDS = st.none() | st.text(min_size=1, max_size=12)


def make_event(**changes: Any) -> Event:
    fields: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "type": "NodeStarted",
        "id": "run-1:1",
        "time": 12.5,
        "seq": 1,
        "run_id": "run-1",
        "branch_id": "b1",
        "node_id": "n1",
        "request_id": None,
        "data": {"operation": "iterative", "parent": None},
    }
    fields.update(changes)
    return Event(**fields)


def test_schema_version_is_one() -> None:
    assert SCHEMA_VERSION == 1


def test_event_id_joins_run_and_seq() -> None:
    assert event_id("run-7", 42) == "run-7:42"


def test_to_json_has_every_envelope_field_and_plain_data() -> None:
    event = make_event(data={"marks": [{"ttl": "1h"}], "nested": {"a": [1, 2]}})
    obj = event.to_json()
    assert tuple(obj) == ENVELOPE_FIELDS
    assert obj["data"] == {"marks": [{"ttl": "1h"}], "nested": {"a": [1, 2]}}
    assert type(obj["data"]) is dict
    assert type(obj["data"]["marks"]) is list
    assert type(obj["data"]["marks"][0]) is dict


def test_to_json_is_a_fresh_copy() -> None:
    event = make_event(data={"nodes": ["a"]})
    obj = event.to_json()
    obj["data"]["nodes"].append("b")
    obj["type"] = "Other"
    assert event.to_json()["data"] == {"nodes": ["a"]}
    assert event.type == "NodeStarted"


def test_data_is_deeply_frozen_and_detached_from_the_caller() -> None:
    source = {"nodes": ["a", "b"], "usage": {"input_tokens": 3}}
    event = make_event(data=source)
    source["nodes"].append("c")
    source["usage"]["input_tokens"] = 99
    source["extra"] = True
    assert thaw_json(event.data) == {"nodes": ["a", "b"], "usage": {"input_tokens": 3}}
    with pytest.raises(TypeError):
        event.data["nodes"] = []  # type: ignore[index]
    with pytest.raises(TypeError):
        event.data["usage"]["input_tokens"] = 0  # type: ignore[index]
    assert isinstance(event.data["nodes"], tuple)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.seq = 2  # type: ignore[misc]


def test_mapping_subclasses_are_accepted_and_frozen() -> None:
    event = make_event(data=OrderedDict([("b", 1), ("a", OrderedDict([("x", [1])]))]))
    assert event.to_json()["data"] == {"b": 1, "a": {"x": [1]}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"x": math.nan}, r"Event\.data\.x: nan is not a finite number"),
        ({"x": [1, math.inf]}, r"Event\.data\.x\[1\]: inf is not a finite number"),
        ({"x": {1: "a"}}, r"Event\.data\.x: key 1 is not a string"),
        ({"x": {"y": object()}}, r"Event\.data\.x\.y: <object object .*> of type object is not JSON-compatible"),
        ({"x": {1, 2}}, r"Event\.data\.x: \{1, 2\} of type set is not JSON-compatible"),
        ([("x", 1)], r"Event\.data: \[\('x', 1\)\] is not a mapping"),
    ],
)
def test_data_that_is_not_json_is_refused_naming_the_path(data: Any, message: str) -> None:
    with pytest.raises(InvalidEventError, match=message):
        make_event(data=data)


def test_data_nested_too_deeply_is_refused() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(InvalidEventError, match="nested too deeply"):
        freeze_json({"x": deep}, "Event.data")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("schema_version", 0, "Event.schema_version: 0 is not a positive integer"),
        ("schema_version", True, "Event.schema_version: True is not a positive integer"),
        ("schema_version", 2, "Event.schema_version: 2 is newer than this reader's version 1"),
        ("type", "", "Event.type: '' is not a non-empty string"),
        ("id", None, "Event.id: None is not a non-empty string"),
        ("time", math.inf, r"Event.time: inf is not a finite number"),
        ("time", "12", r"Event.time: '12' is not a finite number"),
        ("time", False, r"Event.time: False is not a finite number"),
        ("seq", -1, "Event.seq: -1 is not a non-negative integer"),
        ("seq", 1.0, "Event.seq: 1.0 is not a non-negative integer"),
        ("run_id", 7, "Event.run_id: 7 is not a non-empty string"),
        ("branch_id", "", "Event.branch_id: '' is not a non-empty string or None"),
        ("node_id", 3, "Event.node_id: 3 is not a non-empty string or None"),
        ("request_id", b"r", "Event.request_id: b'r' is not a non-empty string or None"),
    ],
)
def test_bad_envelope_fields_are_refused(field: str, value: Any, message: str) -> None:
    with pytest.raises(InvalidEventError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make_event(**{field: value})


def test_invalid_event_error_is_a_foldline_value_error() -> None:
    from runtime.errors import FoldlineError

    assert issubclass(InvalidEventError, FoldlineError)
    assert issubclass(InvalidEventError, ValueError)


def test_from_json_ignores_unknown_fields() -> None:
    event = make_event()
    obj = event.to_json()
    obj["added_later"] = {"anything": 1}
    assert Event.from_json(obj) == event


def test_from_json_treats_absent_ids_as_none() -> None:
    obj = make_event().to_json()
    for name in ("branch_id", "node_id", "request_id"):
        del obj[name]
    event = Event.from_json(obj)
    assert (event.branch_id, event.node_id, event.request_id) == (None, None, None)


@pytest.mark.parametrize("missing", ["schema_version", "type", "id", "time", "seq", "run_id", "data"])
def test_from_json_names_a_missing_field(missing: str) -> None:
    obj = make_event().to_json()
    del obj[missing]
    with pytest.raises(InvalidEventError, match=f"missing field\\(s\\) {missing}"):
        Event.from_json(obj)


def test_from_json_refuses_a_non_object() -> None:
    with pytest.raises(InvalidEventError, match=r"event: \[1, 2\] is not a JSON object"):
        Event.from_json([1, 2])


@given(
    data=JSON_OBJECTS,
    time=st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**40), 2**40),
    seq=st.integers(0, 2**62),
    branch_id=IDS,
    node_id=IDS,
    request_id=IDS,
)
def test_json_text_round_trip_gives_the_same_event(
    data: dict[str, Any], time: float, seq: int, branch_id: str | None, node_id: str | None, request_id: str | None
) -> None:
    event = Event(
        SCHEMA_VERSION, "ContextDecision", event_id("r", seq), time, seq, "r", branch_id, node_id, request_id, data
    )
    line = canonical_json(event.to_json())
    assert "\n" not in line
    back = Event.from_json(json.loads(line))
    assert back == event
    assert back.to_json() == event.to_json() == {**event.to_json(), "data": json.loads(json.dumps(data))}


@given(value=JSON_VALUES)
def test_freeze_then_thaw_is_the_identity_on_json_values(value: Any) -> None:
    frozen = freeze_json(value, "v")
    assert thaw_json(frozen) == value
    assert freeze_json(thaw_json(frozen), "v") == frozen
