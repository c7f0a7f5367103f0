"""``foldline attach RUN_ID --temporal HOST:PORT --bodies DIR [--report FILE] [--store PATH]``.

A flow on Temporal runs on whether or not the command that submitted it
lives: ``foldline run --engine temporal --temporal ...`` prints the run id
(and the workflow id, ``foldline-RUN_ID``) when the flow starts, and
``attach`` waits for that flow (running or finished), then prints and
writes its report as the original command would have, and puts every
node's final branch into the run's ``--store`` (the store ``run`` created;
its events are there already, written by the workers). The ``--signals``
file, too, is written by the workers, whichever client follows. A server
restarting meanwhile is waited for (``--reconnect-for``). Exit 0 every node
ok, 1 failed nodes (or a flow that failed), 2 bad input, an unknown run or
no server. Asyncio only, as the Temporal SDK.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

import anyio
import attrs

from runtime.errors import ConfigError
from runtime.temporal import DEFAULT_RECONNECT_S, MAX_RECONNECT_S, require_temporal
from runtime.temporal.command import (
    check_seconds,
    connect_to,
    engine_error,
    finish,
    follow_flow,
    write_outcome,
)
from runtime.temporal.histories import say_histories
from runtime.temporal.reconnect import Patience, ServerUnreachable

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
WORKFLOW_PREFIX = "foldline-"


@attrs.frozen
class AttachOptions:
    """What ``foldline attach`` was asked (runtime.cli.temporal parses them)."""

    run_id: str
    temporal: str
    bodies: str
    report: str | None = None
    store: str | None = None
    reconnect_s: float = DEFAULT_RECONNECT_S


def workflow_id_of(run_id: str) -> str:
    """The flow workflow's id for a run id (a workflow id, ``foldline-RUN_ID``, is taken as it is)."""
    if not RUN_ID.fullmatch(run_id):
        raise ConfigError(
            f"RUN_ID: {run_id[:80]!r} is not a run id (expected what `foldline run --engine temporal` printed, "
            "e.g. run-0123456789ab)"
        )
    return run_id if run_id.startswith(WORKFLOW_PREFIX) else WORKFLOW_PREFIX + run_id


def check_store(path: str, run_id: str) -> None:
    """The ``--store`` must be the run's own: a Temporal run's store with that run id."""
    from runtime.store.reader import StoreReader
    from runtime.store.run import ENGINE_META_KEY

    with StoreReader(path) as reader:
        meta = reader.meta()
    if meta.get(ENGINE_META_KEY) != "temporal":
        raise ConfigError(f"--store {path}: not a Temporal run's store (its run ran on the local engine)")
    if meta.get("run_id") != run_id:
        raise ConfigError(f"--store {path}: holds run {meta.get('run_id')!r}, not {run_id!r}")


async def _attach(args: AttachOptions, workflow_id: str, err: TextIO) -> dict[str, Any]:
    from temporalio.service import RPCError, RPCStatusCode

    client = await connect_to(args.temporal, args.bodies, err)
    patience = Patience(args.temporal, args.reconnect_s, err)
    try:
        await patience.call("finding the flow", client.get_workflow_handle(workflow_id).describe)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ConfigError(f"RUN_ID: no flow workflow {workflow_id!r} at {args.temporal}") from None
        raise
    print(f"temporal: attached to workflow {workflow_id} at {args.temporal}; waiting for its result", file=err)
    return await follow_flow(client, workflow_id, patience, args.store)


def run_attach(args: AttachOptions, out: TextIO, err: TextIO) -> int:
    """``foldline attach``: exit 0 every node ok, 1 failed nodes or a failed flow, 2 bad input or no server."""
    from runtime.store.errors import NotAStore
    from runtime.temporal.worker import parse_address

    try:
        require_temporal()
        workflow_id = workflow_id_of(args.run_id)
        parse_address(args.temporal)
        check_seconds(args.reconnect_s, "--reconnect-for", MAX_RECONNECT_S)
        if args.store:
            check_store(args.store, workflow_id.removeprefix(WORKFLOW_PREFIX))
    except (ConfigError, NotAStore) as exc:
        print(f"foldline: {exc}", file=err)
        return finish(2, out, err)
    try:
        result = anyio.run(_attach, args, workflow_id, err)
    except BaseException as raised:
        error = engine_error(raised)
        if error is None:
            raise
        print(f"foldline: {error}", file=err)
        return finish(2 if isinstance(error, (ServerUnreachable, ConfigError)) else 1, out, err)
    say_histories(result, err)
    return finish(write_outcome(result["report"], args.report, out), out, err)
