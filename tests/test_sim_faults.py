"""Fault rules: validation from scenario files, and which request each rule hits."""

from __future__ import annotations

import pytest

from runtime.errors import ConfigError
from runtime.scripted.faults import FaultRule, FaultSchedule
from runtime.sim.config import SimConfig


def test_from_obj_reads_every_kind() -> None:
    assert FaultRule.from_obj(
        {"kind": "529", "on_request": 1, "retry_after_ms": 10, "should_retry": True}, "f"
    ) == FaultRule(kind="529", on_request=1, retry_after_ms=10, should_retry=True)
    assert FaultRule.from_obj({"kind": 429, "every": 3, "node": "a"}, "f") == FaultRule(kind="429", every=3, node="a")
    assert FaultRule.from_obj({"kind": "slow", "on_request": 2, "delay_s": 2}, "f").delay_s == 2.0
    for kind in ("500", "drop", "malformed"):
        assert FaultRule.from_obj({"kind": kind, "on_request": 1}, "f").kind == kind


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            {"kind": "509", "on_request": 1},
            "provider.faults[0].kind: '509' is not one of 429, 529, 500, drop, slow, malformed",
        ),
        ({"kind": 509, "on_request": 1}, "provider.faults[0].kind: '509' is not one of"),
        ({"on_request": 1}, "provider.faults[0].kind: None is not one of"),
        ({"kind": "500"}, "provider.faults[0].on_request: give exactly one of 'on_request'"),
        ({"kind": "500", "on_request": 1, "every": 2}, "provider.faults[0].on_request: give exactly one of"),
        ({"kind": "500", "on_request": 0}, "provider.faults[0].on_request: 0 is not a positive integer"),
        ({"kind": "500", "on_request": True}, "provider.faults[0].on_request: True is not a positive integer"),
        ({"kind": "500", "every": 1.5}, "provider.faults[0].every: 1.5 is not a positive integer"),
        ({"kind": "slow", "on_request": 1}, "provider.faults[0].delay_s: a 'slow' fault needs delay_s"),
        (
            {"kind": "slow", "on_request": 1, "delay_s": -1},
            "provider.faults[0].delay_s: -1 is not a number of seconds > 0",
        ),
        ({"kind": "drop", "on_request": 1, "delay_s": 1}, "provider.faults[0].delay_s: applies only to kind 'slow'"),
        (
            {"kind": "drop", "on_request": 1, "retry_after_ms": 5},
            "provider.faults[0].retry_after_ms: applies only to kinds",
        ),
        (
            {"kind": "429", "on_request": 1, "retry_after_ms": -5},
            "provider.faults[0].retry_after_ms: -5 is not an integer >= 0",
        ),
        (
            {"kind": "429", "on_request": 1, "should_retry": "no"},
            "provider.faults[0].should_retry: 'no' is not true or false",
        ),
        ({"kind": "429", "on_request": 1, "node": ""}, "provider.faults[0].node: '' is not a non-empty node id"),
        ({"kind": "429", "on_request": 1, "when": 3}, "provider.faults[0]: unknown key 'when'"),
        ("429", "provider.faults[0]: '429' is not a table"),
    ],
)
def test_from_obj_refuses_bad_rules_naming_the_key_path(obj: object, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        FaultRule.from_obj(obj, "provider.faults[0]")
    assert str(info.value).startswith(message)


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match="FaultRule: kind: 'oops' is not one of"):
        FaultRule(kind="oops", on_request=1)


def test_on_request_counts_per_node() -> None:
    schedule = FaultSchedule((FaultRule(kind="529", on_request=2),))
    assert [schedule.next_request("a")[1] is not None for _ in range(3)] == [False, True, False]
    assert schedule.next_request("b") == (1, None)
    assert schedule.next_request("b")[1] is not None


def test_every_and_node_filters_and_first_match_wins() -> None:
    drop_b = FaultRule(kind="drop", every=2, node="b")
    any_third = FaultRule(kind="500", on_request=2)
    schedule = FaultSchedule((drop_b, any_third))
    assert [schedule.next_request("b")[1] for _ in range(4)] == [None, drop_b, None, drop_b]
    assert [schedule.next_request("a")[1] for _ in range(3)] == [None, any_third, None]
    assert [schedule.next_request(None)[1] for _ in range(2)] == [None, any_third]


def test_headers_carry_retry_after_ms_and_should_retry() -> None:
    assert FaultRule(kind="429", on_request=1, retry_after_ms=250, should_retry=False).headers() == {
        "retry-after-ms": "250",
        "x-should-retry": "false",
    }
    assert FaultRule(kind="500", on_request=1).headers() == {}


def test_sim_config_defaults_and_validation() -> None:
    config = SimConfig()
    assert (
        config.token_factor,
        config.latency_s,
        config.lookback_collapse,
        config.faults,
        config.api_keys,
        config.host,
        config.port,
    ) == (1.15, 0.0, True, (), None, "127.0.0.1", 0)
    assert SimConfig(api_keys=["a", "b"]).api_keys == frozenset({"a", "b"})
    with pytest.raises(ConfigError, match="SimConfig.token_factor: 0 is not a finite number > 0"):
        SimConfig(token_factor=0)
    with pytest.raises(ConfigError, match="SimConfig.latency_s: -1 is not a finite number >= 0"):
        SimConfig(latency_s=-1)
    with pytest.raises(ConfigError, match="SimConfig.port: 70000 is not a port number"):
        SimConfig(port=70000)
    with pytest.raises(ConfigError, match="SimConfig.api_keys: 'abc' is a single string"):
        SimConfig(api_keys="abc")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"SimConfig.faults\[0\]: .* is not a FaultRule"):
        SimConfig(faults=({"kind": "500", "on_request": 1},))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="SimConfig.lookback_collapse: 'yes' is not true or false"):
        SimConfig(lookback_collapse="yes")  # type: ignore[arg-type]
