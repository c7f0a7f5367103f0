"""``foldline run SCENARIO --engine temporal --store PATH``: a Temporal run in a foldline store file.

Before the flow is submitted, :func:`create_store` makes the store (its meta:
the run id, the scenario's text and path, the provider), so the run can be
read without the scenario file. While it runs, every event goes into the
store's ``events`` table through the ``foldline.write_events`` activity,
exactly once per ``seq``, and every request record of a node's branch into
its ``requests`` table, exactly once per request id (the node workflow
journals its records to the flow, :class:`~runtime.temporal.node_host.RequestTap`).
When it has finished, :func:`store_branches`
writes each node's final branch (record, view, state, cache ledger): every
node workflow returned its branch as digests, and its bodies are read back
from the body store and proven against them.

``foldline events``, ``foldline report``, ``foldline inspect`` and ``foldline
replay`` read the file as they read a local run's store (replay rebuilds
every request from the stored branches and checks its digest). A Temporal
run is continued by Temporal (a new worker), never by ``foldline resume``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from runtime.measuring.model_calibration import shared_evidence
from runtime.store.journal import RunStore
from runtime.store.run import ENGINE_META_KEY
from runtime.temporal.bodies import BodyStore
from runtime.temporal.seed import branch_from_seed, seed_digests


async def create_store(path: str, *, run_id: str, scenario_text: str, scenario_path: str, provider_kind: str) -> str:
    """Create the run's store at ``path`` (refusing one that holds a run); return the store file's path."""
    async with await RunStore.create(
        path,
        run_id=run_id,
        scenario_text=scenario_text,
        scenario_path=scenario_path,
        provider_kind=provider_kind,
        extra_meta={ENGINE_META_KEY: "temporal"},
    ) as store:
        return os.fspath(store.path)


def parents_first(branches: Mapping[str, Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The final branches ordered so that a clone comes after the branch it was cloned from."""
    by_id = {b["branch_id"]: b for b in branches.values()}
    ordered: list[Mapping[str, Any]] = []
    placed: set[str] = set()

    def place(branch: Mapping[str, Any]) -> None:
        if branch["branch_id"] in placed:
            return
        parent = by_id.get(branch["parent_branch"])
        if parent is not None:
            place(parent)
        placed.add(branch["branch_id"])
        ordered.append(branch)

    for branch in branches.values():
        place(branch)
    return ordered


async def store_branches(path: str, branches: Mapping[str, Mapping[str, Any]], bodies: BodyStore) -> int:
    """Write every node's final branch into the store at ``path``; return how many.

    The run's calibration book goes in too (for a later run to start from,
    :func:`runtime.store.run.stored_calibration`): every branch's final
    evidence joined (:func:`runtime.measuring.model_calibration.shared_evidence`) with
    what the store held.
    """
    async with await RunStore.open_existing(path) as store:
        evidence = [store.calibration]
        for seed in parents_first(branches):
            texts = {digest: bodies.get(digest).decode("utf-8") for digest in seed_digests(seed)}
            branch = branch_from_seed(seed, texts, seed["branch_id"])
            store.branch_created(branch)
            evidence.append(branch.calibrations)
        book = shared_evidence(evidence)
        if book.entries:
            store.calibration_changed(book)
        await store.flush()
    return len(branches)
