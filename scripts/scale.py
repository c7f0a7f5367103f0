"""Thousands of nodes at once: CPU per request, wall, requests/s, peak RSS and GC share, per provider and size.

Each node is an iterative operation on its own branch whose scripted model
makes three tool rounds (a ``synthetic_read`` each) and then answers: four
Messages requests a node. Every node is independent, so the flow's
``concurrency`` (nodes at once) is the only bound on the scheduler's side; the
provider's ``max_in_flight`` bounds the requests it has out at once.

Each (provider, nodes) pair runs in a fresh interpreter (peak RSS is the
child's own ``ru_maxrss``; no run inherits another's heap), started with
``nice`` left to the caller. The ``simulated`` provider serves the simulator on
loopback in the same process and talks to it through the ``anthropic`` SDK over
real HTTP, so its CPU is the client's and the server's together, as the
issue's figures were; ``scripted`` is the same simulator called in process.

CPU per request is the child's CPU (``time.process_time``) from the flow's
start to its end, divided by the Messages requests the nodes made (count-tokens
calls are reported beside, not counted as requests). The comparison is like for
like: both providers run the same simulator code (scripts, cache engine, token
counts) in the same process as the runtime, so the in-process figure is the
runtime's work plus the simulator's, and the HTTP figure adds to it exactly the
wire: the SDK's request building and HTTP client (its aiohttp one when the ``aiohttp`` extra is installed: the
script runs on asyncio) and the provider's event parsing on one side,
the simulator's HTTP/1.1 server and event writing on the other. Start-up (the
imports, the provider's opening, the tokenizer's load) falls outside the window. GC share is the CPU the
cyclic collector took (timed by ``gc.callbacks``) over that CPU.

Usage::

    nice python scripts/scale.py --providers scripted,simulated --nodes 200,2000 [--runs 3]
    nice python scripts/scale.py --providers simulated --nodes 10000 --runs 1
    python scripts/scale.py --providers simulated --nodes 2000 --max-in-flight 1024 --concurrency 1024

``--first-request`` instead measures, in a fresh interpreter with the
tokenizer loaded, the CPU of the scripted provider's first request and
whether it imported the ``anthropic`` SDK (it must not).

Options: ``--concurrency`` (nodes at once, default 1,024), ``--max-in-flight``
(requests out at once over HTTP; default the provider's),
``--no-gc-tuning`` (leave the collector as Python sets it: no freeze, default thresholds), ``--json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
MAX_NODES = 50_000


def _script(node_id: str) -> list[Any]:
    from runtime import ScriptStep

    steps = [
        ScriptStep.from_obj(
            {"tool_calls": [{"name": "synthetic_read", "arguments": {"path": f"notes/{node_id}-{i}.md", "size": 800}}]},
            node_id,
        )
        for i in range(ROUNDS)
    ]
    return [*steps, ScriptStep.from_obj({"text": f"{node_id}: read {ROUNDS} files."}, node_id)]


def flow_of(nodes: int, concurrency: int) -> tuple[Any, Any]:
    """The flow of ``nodes`` independent nodes ``n0``, ``n1``, ... and the policies holding their scripts."""
    from runtime import Flow, Node, Operation, PolicyRegistry, Profile, ScriptPolicy

    profile = Profile(system="You read files and answer briefly.", tools=("synthetic_read",), max_input_tokens=50_000)
    ids = [f"n{i}" for i in range(nodes)]
    policies = PolicyRegistry({nid: ScriptPolicy(nid, _script(nid)) for nid in ids})
    flow = Flow(
        [Node(nid, Operation("iterative", (f"Read your {ROUNDS} files.",)), profile=profile) for nid in ids],
        concurrency=concurrency,
    )
    return flow, policies


class _GcTimer:
    """CPU the cyclic collector takes, through ``gc.callbacks``."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.collections = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.cpu += time.process_time() - self._started
            self.collections += 1


async def _one(
    provider_kind: str, nodes: int, concurrency: int, in_flight: int | None, tune_gc: bool
) -> dict[str, Any]:
    import attrs

    from runtime import Runtime
    from runtime.config import ProviderSpec
    from runtime.providers.factory import open_provider

    flow, policies = flow_of(nodes, concurrency)
    # The bound is an HTTP provider's: the scripted one has no connections (and refuses the key).
    limits = {} if in_flight is None or provider_kind == "scripted" else {"max_in_flight": in_flight}
    spec = ProviderSpec(kind=provider_kind, model="claude-haiku-5-5", **limits)
    timer = _GcTimer()
    # Keys passed only when set: the script also runs against an older checkout (PYTHONPATH) for a before figure.
    async with open_provider(spec, policies, clock=time.time) as provider:
        tuning = {"tune_gc": tune_gc} if "tune_gc" in attrs.fields_dict(Runtime) else {}
        async with Runtime(provider=provider, model=spec.model, **tuning) as rt:
            gc.callbacks.append(timer)
            cpu0, wall0 = time.process_time(), time.perf_counter()
            result = await rt.run(flow)
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            gc.callbacks.remove(timer)
    failed = [o.id for o in result.outcomes.values() if o.status != "ok"]
    if failed:
        raise SystemExit(f"{len(failed)} node(s) did not finish ok, first {failed[0]}: {result[failed[0]].reason}")
    requests = sum(o.result.requests for o in result.outcomes.values() if o.result is not None)
    return {
        "provider": provider_kind,
        "nodes": nodes,
        "requests": requests,
        "cpu_s": cpu,
        "wall_s": wall,
        "cpu_per_request_ms": cpu * 1000 / requests,
        "requests_per_s": requests / wall,
        "gc_share": timer.cpu / cpu if cpu else 0.0,
        "gc_collections": timer.collections,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


_FIRST_REQUEST = """
import sys, time, anyio
from runtime import PolicyRegistry, ScriptedProvider, ScriptPolicy, ScriptStep
from runtime.logs import configure_logging
from runtime.measuring.tokenizer import encoding
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.messages import Instruction

configure_logging(level="warning")
encoding()
policies = PolicyRegistry({"n": ScriptPolicy("n", [ScriptStep.from_obj({"text": "hi"}, "n")])})
provider = ScriptedProvider(policies, clock=lambda: 0.0)
request = compile_request(
    system="s", tools=(), view=[Instruction("hi")], settings=RequestSettings(model="claude-haiku-5-5")
)

async def first():
    started = time.process_time()
    await provider.send(request, node_id="n")
    return (time.process_time() - started) * 1000

cpu = anyio.run(first)
print(f"scripted provider's first request: {cpu:.0f} ms CPU; anthropic imported: {'anthropic' in sys.modules}")
"""


def _first_request(runs: int) -> None:
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-c", _FIRST_REQUEST], capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            raise SystemExit(f"the first-request probe failed: {done.stderr.strip()[-1500:]}")
        print(done.stdout.strip().splitlines()[-1])


def _child(args: argparse.Namespace, provider: str, nodes: int) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--one", provider, str(nodes)]
    command += ["--concurrency", str(args.concurrency)]
    if args.max_in_flight is not None:
        command += ["--max-in-flight", str(args.max_in_flight)]
    if args.no_gc_tuning:
        command.append("--no-gc-tuning")
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{provider} x {nodes} failed (exit {done.returncode}): {done.stderr.strip()[-1500:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _sizes(text: str, name: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise SystemExit(f"--{name}: {text!r} is not a comma-separated list of integers") from None
    if not sizes or any(not 1 <= size <= MAX_NODES for size in sizes):
        raise SystemExit(f"--{name}: {text!r}: every size must be from 1 to {MAX_NODES:,}")
    return sizes


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--providers", default="scripted,simulated", help="comma-separated: scripted, simulated")
    parser.add_argument("--nodes", default="200,2000", help="comma-separated node counts")
    parser.add_argument("--runs", type=int, default=3, help="runs per pair (the medians are reported)")
    parser.add_argument("--concurrency", type=int, default=1_024, help="the flow's nodes at once")
    parser.add_argument("--max-in-flight", type=int, default=None, help="the provider's requests out at once")
    parser.add_argument("--no-gc-tuning", action="store_true", help="no gc.freeze, Python's default thresholds")
    parser.add_argument("--json", action="store_true", help="print every run as JSON lines")
    parser.add_argument("--first-request", action="store_true", help="the scripted provider's first request alone")
    parser.add_argument("--one", nargs=2, metavar=("PROVIDER", "NODES"), help=argparse.SUPPRESS)
    return parser


def _row(runs: list[dict[str, Any]]) -> str:
    def med(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    first = runs[0]
    return (
        f"{first['provider']:<10} {first['nodes']:>7,} {first['requests']:>8,} {med('wall_s'):>8.1f} "
        f"{med('requests_per_s'):>8.0f} {med('cpu_per_request_ms'):>9.2f} {med('gc_share') * 100:>6.1f}% "
        f"{med('peak_rss_mb'):>8.0f}"
    )


def main() -> None:
    args = _parser().parse_args()
    if not 1 <= args.runs <= 20:
        raise SystemExit(f"--runs: {args.runs} must be from 1 to 20")
    if args.one is not None:
        import anyio

        from runtime.logs import configure_logging

        configure_logging(level="warning", stream=sys.stderr)  # as `foldline run` and `foldline bench` log

        provider, nodes = args.one[0], _sizes(args.one[1], "nodes")[0]
        run = anyio.run(_one, provider, nodes, args.concurrency, args.max_in_flight, not args.no_gc_tuning)
        print(json.dumps(run))
        return
    if args.first_request:
        _first_request(args.runs)
        return
    providers = [p for p in args.providers.split(",") if p]
    unknown = [p for p in providers if p not in ("scripted", "simulated")]
    if unknown or not providers:
        raise SystemExit(f"--providers: {args.providers!r}: expected scripted and/or simulated")
    print(
        f"{'provider':<10} {'nodes':>7} {'requests':>8} {'wall s':>8} {'req/s':>8} {'CPU/req':>9} {'GC':>7} "
        f"{'peak MB':>8}   (medians of {args.runs}; CPU per request in ms)"
    )
    for nodes in _sizes(args.nodes, "nodes"):
        for provider in providers:
            runs = [_child(args, provider, nodes) for _ in range(args.runs)]
            if args.json:
                for run in runs:
                    print(json.dumps(run))
            print(_row(runs), flush=True)


if __name__ == "__main__":
    main()
