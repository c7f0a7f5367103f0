"""The run store as a branch journal: what goes in comes back, one transaction per batch."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from actors.branch import Branch, RequestRecord
from runtime.cache.ledger import CacheLedger
from runtime.fold.marks import FoldMark
from runtime.request.compiler import ToolSpec
from runtime.store.errors import (
    NotAStore,
    StoreInUse,
    StorePathRefused,
    StoreWriteFailed,
)
from runtime.store.events_sink import SqliteSink, read_events
from runtime.store.journal import RunStore
from runtime.store.reader import StoreReader
from runtime.values.messages import (
    AssistantResponse,
    Instruction,
    Note,
    TextPart,
    ToolCall,
    ToolResult,
)
from runtime.values.usage import Usage
from signals.bus import SignalBus
from signals.events import NodeStarted, ResponseReceived, RunStarted

pytestmark = pytest.mark.anyio

TOOL = ToolSpec.create("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})


async def new_store(path: Path) -> RunStore:
    return await RunStore.create(
        path, run_id="run-t", scenario_text="x", scenario_path="x.toml", provider_kind="scripted"
    )


async def a_round(branch: Branch, n: int, size: int = 200) -> None:
    async with branch.turn() as turn:
        turn.append(Instruction(f"task {n}"))
        call = ToolCall.create(f"c{n}", "read_file", {"path": f"f{n}.md"})
        with turn.batch():
            turn.append(AssistantResponse((TextPart("reading"), call), "tool_use"))
            turn.open_turn(1, 1)
            turn.deliver(branch.view_ids())
        turn.append(ToolResult.for_call(call, f"content {n} " + "x" * size))


async def test_a_branch_comes_back_exactly(tmp_path: Path) -> None:
    branch = Branch.create(system="be careful", tools=[TOOL])
    async with await new_store(tmp_path / "s.db") as store:
        branch.attach_journal(store)
        await a_round(branch, 1)
        await a_round(branch, 2)
        async with branch.turn() as turn:
            with turn.batch():
                replaced = branch.view_ids()[:3]
                note = Note("folded the first round", tuple(replaced), 1, "tool_io")
                turn.add_to_record(note)
                turn.set_view((note.id, *branch.view_ids()[3:]))
                turn.calibrate(4000, Usage(input_tokens=5000))
                turn.close_turn()
                turn.hold_marks((FoldMark(1, 2),))
            turn.set_ledger(CacheLedger.empty())
            turn.record_request(
                RequestRecord(
                    request_id=f"{branch.id}:1",
                    node_id="n1",
                    digest="d" * 64,
                    recipe_version=1,
                    system_id=branch.system.id,
                    tools_json=(TOOL.piece(),),
                    view_ids=branch.view_ids(),
                    model="m",
                    max_tokens=5,
                    intent="continuing",
                    tool_choice_json=None,
                    marks=(),
                    status="sent",
                    usage={"input_tokens": 7},
                )
            )
        await store.flush()
    with StoreReader(tmp_path / "s.db") as reader:
        back = reader.restore_branches()[branch.id]
        (row,) = reader.requests()
        (branch_row,) = reader.branch_rows()
    assert back.view_ids() == branch.view_ids()
    assert [(m.id, m.sha256) for m in back.record_messages()] == [(m.id, m.sha256) for m in branch.record_messages()]
    assert back.record_messages() == branch.record_messages()
    assert back.system == branch.system and back.tools == branch.tools
    assert back.state.scale == 1.25 and back.state.pending_marks == (FoldMark(1, 2),) and back.state.open_turn is None
    assert back.state.delivered == branch.state.delivered
    assert isinstance(back.ledger, CacheLedger) and len(back.ledger) == 0
    assert row.node_id == "n1" and row.view_ids == branch.view_ids() and row.usage == {"input_tokens": 7}
    assert branch_row.turns_completed == 1


async def test_clones_share_their_prefix_and_each_content_is_stored_once(tmp_path: Path) -> None:
    """Nine branches cloned from one long emitter: the store holds each shared message once."""
    emitter = Branch.create(system="emit", tools=[TOOL])
    async with await new_store(tmp_path / "s.db") as store:
        emitter.attach_journal(store)
        for n in range(10):
            await a_round(emitter, n, size=20_000)
        clones = []
        for k in range(9):
            clone = emitter.clone()
            clone.configure(system=f"child {k}")
            clone.attach_journal(store)
            async with clone.turn() as turn:
                turn.append(Instruction(f"child task {k}"))
            clones.append(clone)
        await store.flush()
    view_bytes = sum(len(m.output.encode()) for b in (emitter, *clones) for m in b.view() if isinstance(m, ToolResult))
    with StoreReader(tmp_path / "s.db") as reader:
        back = reader.restore_branches()
        stored_outputs = reader._rows("SELECT COUNT(*), SUM(LENGTH(content)) FROM contents WHERE kind = 'tool_result'")[
            0
        ]
        own_rows = {b.id: len(reader.own_record_ids(b.id)) for b in clones}
    disk = sum(p.stat().st_size for p in tmp_path.glob("s.db*"))
    assert stored_outputs[0] == 10  # ten results, stored once however many views hold them
    assert all(count == 2 for count in own_rows.values())  # each clone: its system text and its task
    # 2.0 MB of results across the views; ~0.4 MB on disk, of which ~0.1 MB is the empty schema.
    assert view_bytes > 9 * 200_000 and disk < view_bytes / 4
    for clone in clones:
        assert back[clone.id].view_ids() == clone.view_ids()
        assert back[clone.id].record_messages() == clone.record_messages()
        assert back[clone.id].message_at(5) is back[emitter.id].message_at(5)  # shared, as live clones share


async def test_a_batch_whose_write_fails_is_rolled_back_whole_and_the_store_stops(tmp_path: Path) -> None:
    branch = Branch.create(system="s")
    store = await new_store(tmp_path / "s.db")
    branch.attach_journal(store)
    await a_round(branch, 1)
    await store.flush()
    view_before = branch.view_ids()
    executed: list[str] = []

    def failing(connection: sqlite3.Connection, unit) -> None:
        for sql, params in unit:
            if sql.startswith("INSERT INTO view_entries") and executed:
                raise sqlite3.OperationalError("disk I/O error (simulated)")
            connection.execute(sql, params)
            executed.append(sql)

    store._writer.execute_unit = failing
    async with branch.turn() as turn:
        with turn.batch():
            note = Note("all of it", tuple(view_before), 1, "all")
            turn.add_to_record(note)
            turn.set_view((note.id,))
    with pytest.raises(StoreWriteFailed, match="simulated"):
        await store.flush()
    with pytest.raises(StoreWriteFailed):
        branch.clear_refusal()
    with pytest.raises(StoreWriteFailed):
        await store.aclose()
    assert any(sql.startswith("DELETE FROM view_entries") for sql in executed)  # the batch had begun
    with StoreReader(tmp_path / "s.db") as reader:
        back = reader.restore_branches()[branch.id]
    assert back.view_ids() == view_before  # the old view, not half a fold
    assert back.record_length() == branch.record_length() - 1  # and not its note


async def test_one_writer_at_a_time_and_no_run_is_overwritten(tmp_path: Path) -> None:
    store = await new_store(tmp_path / "s.db")
    with pytest.raises(StoreInUse, match="another process is writing this store"):
        await RunStore.open_existing(tmp_path / "s.db")
    await store.aclose()
    with pytest.raises(StorePathRefused, match="already holds a run; continue it with `foldline resume"):
        await new_store(tmp_path / "s.db")
    with pytest.raises(StorePathRefused, match="does not exist"):
        await new_store(tmp_path / "missing" / "s.db")
    reopened = await RunStore.open_existing(tmp_path / "s.db")
    assert reopened.run_id == "run-t"
    await reopened.aclose()


async def test_a_directory_gets_a_store_file_inside(tmp_path: Path) -> None:
    async with await new_store(tmp_path) as store:
        assert store.path.parent == tmp_path
    with StoreReader(tmp_path) as reader:
        assert reader.meta_value("run_id") == "run-t"


def test_what_is_not_a_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotAStore, match="no such store file"):
        StoreReader(tmp_path / "nothing.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(NotAStore, match="not a foldline store"):
        StoreReader(junk)


async def test_the_sqlite_sink_writes_every_event_into_its_own_file(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    sink = SqliteSink(path)
    async with SignalBus("run-s", lambda: 1.0) as bus:
        sink.attach(bus)
        await bus.publish(RunStarted(scenario="s", provider="scripted", nodes=["a"]))
        for _ in range(50):
            await bus.publish(NodeStarted(operation="iterative"), node_id="a", branch_id="br-1")
    await sink.aclose()
    events = [event for _, event in read_events(path)]
    assert [e.seq for e in events] == list(range(1, 52))
    assert events[0].type == "RunStarted" and events[1].node_id == "a"
    assert [e.type for _, e in read_events(path, types={"RunStarted"})] == ["RunStarted"]
    with pytest.raises(Exception, match="already holds 51 events"):
        async with SignalBus("run-s2", lambda: 1.0) as bus:
            SqliteSink(path).attach(bus)


def _sent_record(branch: Branch, serial: int) -> RequestRecord:
    return RequestRecord(
        request_id=f"{branch.id}:{serial}",
        node_id="n1",
        digest=f"{serial:064d}",
        recipe_version=1,
        system_id=branch.system.id,
        tools_json=(),
        view_ids=branch.view_ids(),
        model="m",
        max_tokens=5,
        intent="continuing",
        tool_choice_json=None,
        marks=(),
        status="sent",
        usage={"input_tokens": 7},
    )


class _RunStopped(Exception):
    """The run failed (or was cancelled) while the store was open."""


async def test_a_response_recorded_after_the_event_stream_ended_is_never_stored_without_its_event(
    tmp_path: Path,
) -> None:
    """A cancelled run's sink may stop before an engine task records a response: that response
    waits for a usage event no sink will bring, and the stopped run leaves it out."""
    branch = Branch.create(system="s")
    with pytest.raises(_RunStopped):
        async with await new_store(tmp_path / "s.db") as store:
            branch.attach_journal(store)
            async with SignalBus("run-t", lambda: 1.0) as bus:
                SqliteSink(store).attach(bus)
                await a_round(branch, 1)
                async with branch.turn() as turn:
                    turn.record_request(_sent_record(branch, 1))
                await bus.publish(
                    ResponseReceived(usage=Usage(input_tokens=7).to_dict(), stop_reason="end_turn", duration_s=0.0),
                    branch_id=branch.id,
                    node_id="n1",
                    request_id=f"{branch.id}:1",
                )
            # The stream has ended; the engine records one more response.
            async with branch.turn() as turn:
                with turn.batch():
                    turn.append(AssistantResponse((TextPart("answered after the stream ended"),), "end_turn"))
                    turn.record_request(_sent_record(branch, 2))
            async with branch.turn() as turn:
                turn.append(Instruction("behind it"))
            await store.flush()
            with StoreReader(tmp_path / "s.db") as reader:
                assert [r.request_id for r in reader.requests()] == [f"{branch.id}:1"]
            raise _RunStopped
    with StoreReader(tmp_path / "s.db") as reader:
        assert [r.request_id for r in reader.requests()] == [f"{branch.id}:1"]
        assert [e.request_id for e in reader.events(types=["ResponseReceived"])] == [f"{branch.id}:1"]
        back = reader.restore_branches()[branch.id]
    assert back.record_length() == branch.record_length() - 2  # the held batch and the one behind it


async def test_a_setup_changed_after_attaching_comes_back(tmp_path: Path) -> None:
    branch = Branch.create(system="first system", tools=[TOOL])
    other = ToolSpec.create("search", "Search the corpus.", {"type": "object"})
    async with await new_store(tmp_path / "s.db") as store:
        branch.attach_journal(store)
        await a_round(branch, 1)
        branch.configure(system="second system", tools=[TOOL, other])
        await store.flush()
    with StoreReader(tmp_path / "s.db") as reader:
        back = reader.restore_branches()[branch.id]
    assert back.system is not None and back.system.text == "second system" and back.system == branch.system
    assert back.tools == (TOOL, other)
    assert back.message_at(0).text == "first system"  # the old system text stays in the record
