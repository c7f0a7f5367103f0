"""A spawned child's start, as digests: its emitter's view without a single body.

A child with ``inherit = "view"`` starts from a clone of its emitter's view
(:meth:`actors.branch.Branch.clone`). On Temporal the emitter and the child
are different workflows, so the clone crosses over as a *seed*: the clone's
record as ``[id, kind, sha256]`` rows, its view ids, its system message's
id, its tool pieces and its context state. The bodies travel separately:
the emitter puts each message's canonical content in the body store under
its own SHA-256 (:func:`seed_of` returns them), the child gets them back by
digest and :func:`branch_from_seed` proves every one byte for byte
(:func:`runtime.store.codec.decode_message`). A body shared by many
children, or sent again by a later spawn, is stored once.

A node workflow that continues as new (at a fold commit, to keep its history
bounded) carries its own branch over the same way, its cache ledger with it.

Pure: no I/O, no workflow calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.branch import Branch
from actors.record import Record
from runtime.store.codec import decode_message, decode_value, encode_value, message_content_json, tool_from_piece
from runtime.store.errors import StoreCorrupt
from runtime.values.messages import SystemMessage


def seed_of(clone: Branch) -> tuple[dict[str, Any], dict[str, str]]:
    """The seed of a branch (a clone, or a running one), and the bodies it names (canonical content by SHA-256)."""
    rows: list[list[str]] = []
    bodies: dict[str, str] = {}
    for message in clone.record_messages():
        rows.append([message.id, message.kind, message.sha256])
        bodies[message.sha256] = message_content_json(message)
    seed = {
        "record": rows,
        "view": list(clone.view_ids()),
        "system": clone.system.id if clone.system is not None else None,
        "tools": [tool.piece() for tool in clone.tools],
        "state": encode_value(clone.state, "seed.state"),
        "ledger": encode_value(clone.ledger, "seed.ledger"),
        "parent_branch": clone.parent_id,
        "fork_length": clone.fork_length,
    }
    return seed, bodies


def seed_digests(seed: Mapping[str, Any]) -> list[str]:
    """The body digests a seed names, each once, in record order."""
    return list(dict.fromkeys(str(row[2]) for row in seed["record"]))


def branch_from_seed(seed: Mapping[str, Any], bodies: Mapping[str, str], branch_id: str) -> Branch:
    """The clone a seed describes, as branch ``branch_id``; raise StoreCorrupt if a body is missing or altered."""
    record = Record()
    for message_id, kind, digest in seed["record"]:
        body = bodies.get(digest)
        if body is None:
            raise StoreCorrupt(f"seed of branch {branch_id}: no body for message {message_id} (sha256 {digest})")
        record.append(decode_message(message_id, kind, body, digest))
    system = record.get(seed["system"]) if seed["system"] is not None else None
    if system is not None and not isinstance(system, SystemMessage):
        raise StoreCorrupt(
            f"seed of branch {branch_id}: its system message {seed['system']} is a {system.kind} message"
        )
    missing = [mid for mid in seed["view"] if record.index_of(mid) is None]
    if missing:
        raise StoreCorrupt(f"seed of branch {branch_id}: its view names messages its record lacks: {missing[:5]}")
    return Branch(
        branch_id=branch_id,
        system=system,
        tools=tuple(tool_from_piece(piece) for piece in seed["tools"]),
        record=record,
        view=list(seed["view"]),
        state=decode_value(seed["state"], "seed.state"),
        ledger=decode_value(seed["ledger"], "seed.ledger"),
        parent_id=seed["parent_branch"],
        fork_length=seed["fork_length"],
    )
