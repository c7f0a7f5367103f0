"""The CLI's progress lines: one per event worth a person's attention, and one per gap."""

from __future__ import annotations

import io

from runtime.cli.progress import progress_printer
from signals.bus import Gap
from signals.envelope import SCHEMA_VERSION, Event


def _event(type_: str, data: dict[str, object], node_id: str | None = "lead") -> Event:
    return Event(
        schema_version=SCHEMA_VERSION,
        type=type_,
        id="run-1:1",
        time=0.0,
        seq=1,
        run_id="run-1",
        branch_id=None,
        node_id=node_id,
        request_id=None,
        data=data,
    )


def test_a_node_event_prints_one_line_naming_the_node() -> None:
    out = io.StringIO()
    show = progress_printer(out)
    show(_event("NodeStarted", {"operation": "iterative"}))
    show(_event("NodeFinished", {"rounds": 3, "answer_chars": 10}))
    assert out.getvalue() == "[lead] started (iterative)\n[lead] finished after 3 round(s)\n"


def test_an_event_nobody_watches_prints_nothing() -> None:
    out = io.StringIO()
    progress_printer(out)(_event("ContextDecision", {"action": "pass", "reason": "under the line"}))
    assert out.getvalue() == ""


def test_a_gap_prints_how_many_events_were_missed() -> None:
    # The CLI subscribes with "block" and never sees a gap; a drop_oldest subscriber would.
    out = io.StringIO()
    progress_printer(out)(Gap(3))
    assert out.getvalue() == "[-] missed 3 event(s)\n"
