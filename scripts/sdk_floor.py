"""The floor of a request over HTTP: the CPU the client side alone takes, against a server that costs it nothing.

``scripts/scale.py`` measures a request over HTTP as the runtime, the
``anthropic`` SDK, its HTTP client, the provider's stream reading *and* the
simulator (its HTTP server and its answer) in one process. This script takes
the runtime and the simulator out, leaving what any request through the real
SDK costs its sender:

1. It runs one ``scale.py`` node in process (the scripted provider) and keeps
   the four create payloads the runtime compiled for it (three tool rounds and
   an answer), byte for byte what ``scale.py``'s nodes send.
2. It asks the real simulator, over real HTTP, for its streamed answer to the
   first of them (a tool call) and keeps the response bytes.
3. A server in a child process answers every request with those bytes
   (HTTP/1.1 keep-alive, ``content-length`` framed): it parses a request's
   head, reads its body and writes, so its CPU is its own, reported beside.
4. This process sends the four payloads in turn, ``--requests`` of them with
   ``--concurrency`` senders, through :class:`~runtime.providers.anthropic.AnthropicProvider`
   (the same code a run uses: the SDK's ``with_streaming_response.create``,
   the provider's in-flight bound and its event reading), over the SDK's
   httpx client and its aiohttp one.

CPU per request is this process's CPU (``time.process_time``) over the timed
requests, after a warm-up. The result bounds ``scale.py``'s ratio from below:
over HTTP a request costs at least the in-process figure plus this one.

Usage::

    nice python scripts/sdk_floor.py [--requests 8000] [--concurrency 1024] [--runs 3] [--clients aiohttp,httpx]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import flow_of  # the same node scale.py runs

ROOT = Path(__file__).resolve().parent.parent
WARM_UP = 200
MAX_REQUESTS = 200_000
MAX_HEAD = 64 * 1024
MAX_BODY = 32 * 1024 * 1024


async def _payloads() -> list[dict[str, Any]]:
    """The create payloads of one ``scale.py`` node, as the runtime compiled them (scripted, in process)."""
    import time as clock

    from runtime import Runtime, ScriptedProvider

    kept: list[dict[str, Any]] = []
    flow, policies = flow_of(1, 1)
    scripted = ScriptedProvider(policies, clock=clock.time)

    class Keeping:  # the scripted provider, keeping what it was sent
        name, caches_by_prefix, max_retries, counts_tokens = "scripted", True, 0, True

        async def send(self, request: Any, *, node_id: str | None) -> Any:
            kept.append(json.loads(request.payload_bytes()))
            return await scripted.send(request, node_id=node_id)

        async def count_tokens(self, request: Any) -> int:
            return await scripted.count_tokens(request)

        async def aclose(self) -> None:
            await scripted.aclose()

    async with Runtime(provider=Keeping(), model="claude-haiku-5-5") as rt:  # type: ignore[arg-type]
        await rt.run(flow)
    return kept


async def _reply(payload: dict[str, Any]) -> bytes:
    """The simulator's streamed answer to ``payload`` over real HTTP: the response body's bytes."""
    import httpx2  # the SDK's own HTTP package (plain httpx may not be installed)

    from runtime.config import ProviderSpec
    from runtime.providers.factory import sim_config_for
    from runtime.sim.server import serve_simulator

    key = "sdk-floor"
    config = sim_config_for(ProviderSpec(kind="simulated", model=payload["model"]), api_key=key)
    _, policies = flow_of(1, 1)
    async with serve_simulator(config, policies, time.time) as sim, httpx2.AsyncClient() as client:
        headers = {"x-api-key": key, "anthropic-version": "2023-06-01", "x-foldline-node": "n0"}
        response = await client.post(f"{sim.base_url}/v1/messages", json={**payload, "stream": True}, headers=headers)
        if response.status_code != 200 or b"message_stop" not in response.content:
            raise SystemExit(f"the simulator did not stream an answer: {response.status_code} {response.text[:500]}")
        return response.content


# The canned server (its own process): one fixed streamed reply to every request.


async def _serve(reply: bytes) -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n" % len(reply)

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in request_head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                if not 0 <= length <= MAX_BODY:
                    raise ValueError(f"content-length {length} is out of bounds")
                await reader.readexactly(length)
                writer.write(head + reply)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0, limit=MAX_HEAD, backlog=4096)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.buffer.read)  # until the parent closes it


def _start_server(reply: bytes) -> tuple[subprocess.Popen[bytes], int]:
    """The canned server in a child process, given ``reply`` on its stdin (a length line, then the bytes)."""
    command = [sys.executable, __file__, "--serve"]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(b"%d\n" % len(reply) + reply)
    server.stdin.flush()
    port = server.stdout.readline()
    if not port.strip().isdigit():
        raise SystemExit(f"the canned server did not start (it printed {port!r})")
    return server, int(port)


def _stop_server(server: subprocess.Popen[bytes]) -> float:
    """Stop the server; its CPU (user and system), seconds."""
    assert server.stdin is not None
    server.stdin.close()
    _, status, usage = os.wait4(server.pid, 0)
    server.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


# The client side: the provider as a run uses it.


async def _send_all(port: int, client: str, payloads: list[dict[str, Any]], requests: int, concurrency: int) -> float:
    from runtime.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider.create(api_key="sdk-floor", base_url=f"http://127.0.0.1:{port}", http=client)
    senders = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with senders:
            await provider.send_payload(dict(payloads[i % len(payloads)]), node_id=None)

    try:
        await asyncio.gather(*(one(i) for i in range(WARM_UP)))
        started = time.process_time()
        await asyncio.gather(*(one(i) for i in range(requests)))
        return time.process_time() - started
    finally:
        await provider.aclose()


def _one(client: str, requests: int, concurrency: int) -> dict[str, Any]:
    from runtime.logs import configure_logging

    configure_logging(level="warning", stream=sys.stderr)
    payloads = asyncio.run(_payloads())
    reply = asyncio.run(_reply(payloads[0]))
    server, port = _start_server(reply)
    try:
        cpu = asyncio.run(_send_all(port, client, payloads, requests, concurrency))
    finally:
        server_cpu = _stop_server(server)
    return {
        "client": client,
        "requests": requests,
        "concurrency": concurrency,
        "payload_bytes": statistics.mean(len(json.dumps(p)) for p in payloads),
        "reply_bytes": len(reply),
        "cpu_per_request_ms": cpu * 1000 / requests,
        "server_cpu_per_request_ms": server_cpu * 1000 / (requests + WARM_UP),
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=8_000, help="timed requests per run")
    parser.add_argument("--concurrency", type=int, default=1_024, help="senders at once (scale.py's nodes at once)")
    parser.add_argument("--runs", type=int, default=3, help="runs per client (the medians are reported)")
    parser.add_argument(
        "--clients",
        default=None,
        help="comma-separated: aiohttp, httpx (default both, or httpx alone without the aiohttp extra)",
    )
    parser.add_argument("--json", action="store_true", help="print every run as a JSON line")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    return parser


def _check(args: argparse.Namespace) -> list[str]:
    if not 1 <= args.requests <= MAX_REQUESTS:
        raise SystemExit(f"--requests: {args.requests} must be from 1 to {MAX_REQUESTS:,}")
    if not 1 <= args.concurrency <= 10_000:
        raise SystemExit(f"--concurrency: {args.concurrency} must be from 1 to 10,000")
    if not 1 <= args.runs <= 20:
        raise SystemExit(f"--runs: {args.runs} must be from 1 to 20")
    if args.clients is None:
        import importlib.util

        args.clients = "aiohttp,httpx" if importlib.util.find_spec("aiohttp") is not None else "httpx"
    clients = [c for c in args.clients.split(",") if c]
    if not clients or any(c not in ("aiohttp", "httpx") for c in clients):
        raise SystemExit(f"--clients: {args.clients!r}: expected aiohttp and/or httpx")
    return clients


def main() -> None:
    args = _parser().parse_args()
    if args.serve:
        length = int(sys.stdin.buffer.readline())
        asyncio.run(_serve(sys.stdin.buffer.read(length)))
        return
    clients = _check(args)
    if args.one is not None:
        print(json.dumps(_one(args.one, args.requests, args.concurrency)))
        return
    print(f"{'client':<8} {'requests':>8} {'CPU/req':>9} {'server':>8}   (medians of {args.runs}; ms per request)")
    for client in clients:
        command = [sys.executable, __file__, "--one", client, "--requests", str(args.requests)]
        command += ["--concurrency", str(args.concurrency)]
        runs = []
        for _ in range(args.runs):
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{client} failed (exit {done.returncode}): {done.stderr.strip()[-1500:]}")
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            if args.json:
                print(json.dumps(runs[-1]))
        cpu = statistics.median(r["cpu_per_request_ms"] for r in runs)
        server = statistics.median(r["server_cpu_per_request_ms"] for r in runs)
        print(f"{client:<8} {args.requests:>8,} {cpu:>9.2f} {server:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
