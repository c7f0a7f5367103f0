"""Progress lines on stderr while a run goes (one line per event worth a person's attention)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO

from runtime.display.terminal import shown
from signals.bus import Gap
from signals.envelope import Event


def progress_printer(stream: TextIO) -> Callable[[Event | Gap], None]:
    """A bus handler printing one line per event worth a person's attention (and per gap, if any)."""

    def show(event: Event | Gap) -> None:
        if isinstance(event, Gap):  # only a drop_oldest subscription sees gaps; the CLI's blocks
            print(f"[-] missed {event.count} event(s)", file=stream, flush=True)
            return
        node = event.node_id or "-"
        data = event.data
        line = None
        if event.type == "NodeStarted":
            line = f"[{node}] started ({data['operation']})"
        elif event.type == "NodeFinished":
            line = f"[{node}] finished after {data['rounds']} round(s)"
        elif event.type == "NodeFailed":
            line = f"[{node}] FAILED: {data['error_type']}: {data['message']}"
        elif event.type == "NodeSkipped":
            line = f"[{node}] skipped: {data['reason']}"
        elif event.type == "ChildSpawned":
            line = f"[{node}] spawned {data['child']} (inherits {data['inherit']}, {data['view_length']} messages)"
        elif event.type == "ContextDecision" and data["action"] in ("notice", "refuse", "fold"):
            line = f"[{node}] {data['action']}: {data['reason']}"
        elif event.type == "ResponseReceived":
            u = data["usage"]
            line = (
                f"[{node}] response: in {u['input_tokens']} read {u['cache_read_input_tokens']} "
                f"write {u['cache_write_5m_tokens'] + u['cache_write_1h_tokens']} out {u['output_tokens']}"
            )
        if line is not None:
            print(shown(line), file=stream, flush=True)

    return show
