"""The JSON Lines sink: every event, one canonical line each, flushed, closed with the bus."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import anyio
import pytest

from runtime.values.canonical import canonical_json, sha256_hex
from runtime.values.usage import Usage
from signals.bus import BusClosedError, SignalBus
from signals.envelope import Event, InvalidEventError
from signals.events import ContextDecision, NodeStarted, RequestSent, ResponseReceived, RunStarted, payload_of
from signals.sinks import JsonlSink, read_jsonl

DEADLOCK_GUARD_S = 20


_ticks = itertools.count()


def clock() -> float:
    return next(_ticks) * 0.25


async def publish_a_run(bus: SignalBus, requests: int) -> list[Event]:
    published = [await bus.publish(RunStarted(scenario="s", provider="scripted", nodes=["a"]))]
    published.append(await bus.publish(NodeStarted(operation="iterative"), node_id="a", branch_id="b-a"))
    for index in range(requests):
        published.append(
            await bus.publish(
                ContextDecision(
                    ceiling=100_000,
                    ceiling_source="model",
                    tier=None,
                    method="tokenizer",
                    estimate_before=1000 + index,
                    estimate_after=1000 + index,
                    action="pass",
                    stages=[],
                    folded_ids=[],
                    sent=True,
                    reason="under the ceiling: é ✓",
                ),
                node_id="a",
                request_id=f"q{index}",
            )
        )
        published.append(
            await bus.publish(
                RequestSent(digest=sha256_hex(str(index)), bytes=900, attempt=1, intent="turn", marks=[{"ttl": "1h"}]),
                node_id="a",
                request_id=f"q{index}",
            )
        )
        published.append(
            await bus.publish(
                ResponseReceived(usage=Usage(10, 20, 30, 0, 5), stop_reason="end_turn", duration_s=0.5),
                node_id="a",
                request_id=f"q{index}",
            )
        )
    return published


@pytest.mark.anyio
async def test_the_sink_writes_every_event_as_one_canonical_line_and_closes_with_the_bus(tmp_path: Path) -> None:
    path = tmp_path / "signals.jsonl"
    sink = JsonlSink(path)
    with anyio.fail_after(DEADLOCK_GUARD_S):
        async with SignalBus("run-1", clock) as bus:
            subscription = sink.attach(bus)
            # A sink smaller than the run: block policy means it still gets everything.
            published = await publish_a_run(bus, 400)
            await anyio.wait_all_tasks_blocked()
            # Flushed as it goes: readable before the bus closes.
            assert read_jsonl(path) == published
            assert not sink.closed
    assert sink.closed
    assert sink.lines_written == len(published) == 1202
    assert subscription.statistics().dropped == 0
    lines = path.read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    assert lines[:-1] == [canonical_json(event.to_json()) for event in published]
    assert "é ✓" in lines[2]  # UTF-8 kept as is
    back = read_jsonl(path)
    assert back == published
    assert [event.seq for event in back] == list(range(1, 1203))
    assert payload_of(back[4]) == ResponseReceived(
        usage=Usage(10, 20, 30, 0, 5), stop_reason="end_turn", duration_s=0.5
    )


@pytest.mark.anyio
async def test_append_mode_keeps_what_the_file_had(tmp_path: Path) -> None:
    path = tmp_path / "signals.jsonl"
    async with SignalBus("run-1", clock) as bus:
        JsonlSink(path).attach(bus)
        first = await publish_a_run(bus, 1)
    async with SignalBus("run-1", clock, first_seq=first[-1].seq + 1) as bus:
        JsonlSink(path, append=True).attach(bus)
        second = await publish_a_run(bus, 1)
    async with SignalBus("run-2", clock) as bus:
        JsonlSink(tmp_path / "other.jsonl").attach(bus)
        await publish_a_run(bus, 1)
    assert read_jsonl(path) == first + second


@pytest.mark.anyio
async def test_a_sink_attaches_once(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "s.jsonl")
    async with SignalBus("run-1", clock) as bus:
        sink.attach(bus)
        with pytest.raises(RuntimeError, match="already attached"):
            sink.attach(bus)


@pytest.mark.anyio
async def test_a_sink_that_cannot_attach_leaves_no_file_open(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("kept\n", encoding="utf-8")
    bus = SignalBus("run-1", clock)  # never entered
    sink = JsonlSink(path)
    with pytest.raises(BusClosedError, match="the bus for run 'run-1' is not open"):
        sink.attach(bus)
    assert not sink.closed  # never attached
    assert path.read_text(encoding="utf-8") == "kept\n"  # not truncated
    with pytest.raises(OSError):
        async with SignalBus("run-1", clock) as bus:
            JsonlSink(tmp_path / "missing-dir" / "s.jsonl").attach(bus)


def write_lines(path: Path, events: list[Event], tail: str = "") -> None:
    path.write_text("".join(canonical_json(event.to_json()) + "\n" for event in events) + tail, encoding="utf-8")


def sample_events(count: int) -> list[Event]:
    return [
        Event(
            1,
            "NodeStarted",
            f"r:{seq}",
            float(seq),
            seq,
            "r",
            None,
            "n",
            None,
            {"operation": "bounded", "parent": None},
        )
        for seq in range(1, count + 1)
    ]


def test_read_jsonl_leaves_out_a_line_torn_by_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    events = sample_events(3)
    write_lines(path, events, tail='{"schema_version":1,"type":"NodeSt')
    assert read_jsonl(path) == events


def test_read_jsonl_keeps_a_complete_last_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "no-newline.jsonl"
    events = sample_events(2)
    write_lines(path, events[:1], tail=canonical_json(events[1].to_json()))
    assert read_jsonl(path) == events


def test_read_jsonl_skips_blank_lines_and_ignores_unknown_fields(tmp_path: Path) -> None:
    path = tmp_path / "extra.jsonl"
    event = sample_events(1)[0]
    obj = {**event.to_json(), "added_later": [1]}
    path.write_text("\n" + json.dumps(obj) + "\n\n", encoding="utf-8")
    assert read_jsonl(path) == [event]


def test_read_jsonl_names_the_line_of_a_malformed_record(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    events = sample_events(3)
    write_lines(path, events[:1], tail="{not json\n" + canonical_json(events[2].to_json()) + "\n")
    with pytest.raises(InvalidEventError, match=r"bad\.jsonl:2: not JSON"):
        read_jsonl(path)
    obj = events[1].to_json()
    obj["seq"] = -4
    path.write_text(canonical_json(events[0].to_json()) + "\n" + canonical_json(obj) + "\n", encoding="utf-8")
    with pytest.raises(InvalidEventError, match=r"bad\.jsonl:2: Event\.seq: -4 is not a non-negative integer"):
        read_jsonl(path)
