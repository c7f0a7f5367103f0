"""A stored run under server-side compaction replays exactly: every request, its ``context_management`` and
the compaction block it sends back included, is rebuilt from the store to the digest that was sent."""

from __future__ import annotations

from pathlib import Path

import anyio
from test_server_compaction_branch import SCENARIO

from actors.tools import BUILTIN_TOOLS
from runtime.config.loader import load_scenario
from runtime.store.reader import StoreReader
from runtime.store.replay import Replayed, replay_all
from runtime.store.run import run_scenario_stored


def test_a_compacting_run_replays_every_request_exactly(tmp_path: Path) -> None:
    path = tmp_path / "compaction.toml"
    path.write_text(SCENARIO.format(kind="scripted", pause="true"), encoding="utf-8")
    scenario = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    store = tmp_path / "run.db"
    anyio.run(lambda: run_scenario_stored(scenario, store_path=store))
    with StoreReader(store) as reader:
        results = replay_all(reader)
    assert len(results) == 6 and all(isinstance(r, Replayed) for r in results), results
    payloads = [r.request.payload() for r in results if isinstance(r, Replayed)]
    assert all(p["context_management"]["edits"][0]["type"] == "compact_20260112" for p in payloads)
    assert sum(1 for p in payloads for m in p["messages"] for b in m["content"] if b["type"] == "compaction") == 2
