"""Start-up objects leave the cyclic collector's scans, and young collections are spaced, before the first run.

Checked in a fresh interpreter (freezing is process-wide), on asyncio and trio.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.runtime import GC_YOUNG_THRESHOLD

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import gc, json, sys
import anyio
from runtime import Flow, Node, Operation, PolicyRegistry, Runtime, ScriptedProvider, ScriptPolicy, ScriptStep

tuning = {"default": {}, "on": {"tune_gc": True}, "off": {"tune_gc": False}}[sys.argv[2]]
seen = {"before": gc.get_freeze_count(), "threshold before": gc.get_threshold()[0]}

async def run_once(name):
    provider = ScriptedProvider(
        PolicyRegistry({name: ScriptPolicy(name, [ScriptStep.from_obj({"text": "done"}, name)])}), clock=lambda: 0.0
    )
    async with Runtime(provider=provider, model="claude-haiku-5-5", **tuning) as rt:
        result = await rt.run(Flow([Node(name, Operation("bounded", ("Say done.",)))]))
    return result[name].status

async def main():
    seen["first"] = await run_once("a")
    seen["after first"] = gc.get_freeze_count()
    seen["threshold"] = gc.get_threshold()[0]
    garbage = [[]]
    garbage[0].append(garbage)  # a cycle made after start-up: the collector still finds it
    del garbage
    seen["second"] = await run_once("b")
    seen["after second"] = gc.get_freeze_count()
    seen["collected"] = gc.collect()

anyio.run(main, backend=sys.argv[1])
print(json.dumps(seen))
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("freeze", ["on", "off", "default"])
def test_the_first_run_freezes_start_up_once_and_later_garbage_is_still_collected(backend: str, freeze: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, backend, freeze], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] == 0 and seen["first"] == seen["second"] == "ok"
    assert seen["threshold before"] == 700  # Python's default
    if freeze == "on":
        assert seen["threshold"] == GC_YOUNG_THRESHOLD
        assert seen["after first"] > 10_000  # modules, classes, tables: what start-up built
        assert seen["after second"] == seen["after first"]  # once a process: the first run's objects stay collectable
    else:  # off, and by default: a library leaves its host's collector alone
        assert seen["after first"] == seen["after second"] == 0 and seen["threshold"] == 700
    assert seen["collected"] >= 2  # the cycle made after start-up (the list and itself) was collected
