"""Requests over their ceiling by the server's count (issue 11, case 12).

Usage: ``python scripts/over_ceiling_by_server.py`` (from the repository root).
Runs every shipped scenario on the simulated server at token factors 1.15 and
1.37 and prints, per run, the responses received and how many of them the
server counted (fresh + cache read + cache write input) above the ceiling the
send decided under.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.tools import BUILTIN_TOOLS
from runtime.config.loader import load_scenario
from runtime.scenario_run import run_scenario


async def one(path, factor):
    s = load_scenario(path, tool_names=BUILTIN_TOOLS.names())
    s = s.evolve(provider=s.provider.with_kind("simulated").evolve(token_factor=factor))
    events = []
    await run_scenario(s, progress=events.append)
    ceilings, over, sent = {}, 0, 0
    for e in events:
        if e.type == "ContextDecision" and e.data["sent"]:
            ceilings[e.request_id] = e.data["ceiling"]
        if e.type == "ResponseReceived":
            sent += 1
            u = e.data["usage"]
            total = u["input_tokens"] + u.get("cache_read_input_tokens", 0) + u.get("cache_creation_input_tokens", 0)
            c = ceilings.get(e.request_id)
            if c is not None and total > c:
                over += 1
    return sent, over


async def main():
    for factor in (1.15, 1.37):
        for path in sorted(Path("scenarios").glob("*.toml")):
            sent, over = await one(path, factor)
            print(f"factor {factor} {path.name}: {sent} responses, {over} over the ceiling by the server's count")


anyio.run(main)
