"""Planning a resume: what each node of a stopped run still has to do (pure).

From a store's rows (restored branches, branch rows, request rows, events)
and the run's scenario, :func:`plan_resume` decides for every node:

- **finished** (a stored ``NodeFinished`` or ``NodeFailed``, or a branch whose
  turn completed although the event did not make it to disk): it keeps its
  outcome and is not run again;
- **started** (its branch is stored): it resumes on that branch; an
  interrupted turn continues from the branch's stored ``open_turn``;
- **not started**: it runs as in a fresh run (a top-level node), or is
  spawned when its emitter calls ``spawn`` (a child).

Which branch is a node's: the branch its requests name, else the branch its
node events name; a child spawned before the crash whose branch neither
names is found among its emitter's clones by its configuration. A child
counts as spawned only when its emitter's ``spawn`` result is in the store
(that result is written after the child's branch, so the branch is there).

It also gives each node's script cursor (its completed requests, so a
resumed node's scripted model answers with the next step) and the events a
resumed run publishes for outcomes the crash kept off the disk.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from actors.branch import Branch
from actors.inherit import setup_ids
from runtime.config import Scenario
from runtime.config.operation import OperationResult
from runtime.config.output_schema import OutputInvalid, OutputSchema
from runtime.flows.flow import NodeOutcome, Restored
from runtime.store.codec import loads_json
from runtime.store.errors import StoreCorrupt
from runtime.store.reader import BranchRow, RequestRow
from runtime.values.messages import AssistantResponse, Instruction, ToolResult
from runtime.values.usage import Usage
from signals.envelope import Event
from signals.events import NodeFinished, NodeSkipped

_NODE_EVENTS = ("NodeStarted", "NodeFinished", "NodeFailed")
CANCELLED_RESULT = "not run: cancelled"
"""The output the engine gives a call a cancellation (Ctrl-C) left unrun."""


def view_without_cancelled_results(branch: Branch) -> tuple[str, ...] | None:
    """The view to resume an interrupted turn with: the trailing results a cancellation wrote left out.

    A turn stopped by Ctrl-C answers its unrun calls with error results so the
    live view never holds an orphaned call; resuming, those calls should run
    instead. The results stay in the record. None when there is nothing to leave out.
    """
    if branch.state.open_turn is None:
        return None
    view = branch.view()
    keep = len(view)
    while keep:
        result = view[keep - 1]
        if not (isinstance(result, ToolResult) and result.is_error and result.output == CANCELLED_RESULT):
            break
        keep -= 1
    if keep == len(view):
        return None
    return tuple(m.id for m in view[:keep])


@attrs.frozen
class RecoveredEvent:
    """An event a resumed run publishes for an outcome the crash kept off the disk."""

    node_id: str
    branch_id: str | None
    event: Any


@attrs.frozen
class ResumePlan:
    restored: Mapping[str, Restored]
    cursors: Mapping[str, int]
    """Per node: requests its stored run completed (where its script resumes)."""
    node_branches: Mapping[str, str]
    recovered: tuple[RecoveredEvent, ...]
    first_seq: int


def _last_answer(branch: Branch) -> AssistantResponse | None:
    for message in reversed(branch.view()):
        if isinstance(message, AssistantResponse):
            return message
    return None


def _usage_of(rows: Sequence[RequestRow]) -> Usage:
    total = Usage()
    for row in rows:
        if row.usage:
            total = total + Usage(**{k: int(v) for k, v in row.usage.items() if k in Usage.__annotations__})
    return total


def _spawned_children(branch: Branch) -> list[str]:
    """Children the branch's record shows spawned (a successful ``spawn`` result), in order."""
    children = []
    for message in branch.record_messages():
        if isinstance(message, ToolResult) and message.name == "spawn" and not message.is_error:
            try:
                node = loads_json(message.arguments_json).get("node")
            except (ValueError, AttributeError):
                continue
            if isinstance(node, str):
                children.append(node)
    return children


def _node_branch_map(
    scenario: Scenario, branches: Mapping[str, Branch], requests: Sequence[RequestRow], events: Sequence[Event]
) -> dict[str, str]:
    known = {node.id for node in scenario.nodes}
    mapping: dict[str, str] = {}
    for row in requests:
        if row.node_id in known and row.node_id not in mapping and row.branch_id in branches:
            mapping[row.node_id] = row.branch_id
    for event in events:
        if (
            event.type in _NODE_EVENTS
            and event.node_id in known
            and event.node_id not in mapping
            and event.branch_id is not None
            and event.branch_id in branches
        ):
            mapping[event.node_id] = event.branch_id
    return mapping


def _matches_profile(branch: Branch, scenario: Scenario, node_id: str) -> bool:
    profile = scenario.profile_of(node_id)
    if scenario.node(node_id).inherit == "view" and profile.inherited_setup == "instruction":
        # The emitter's stable segment, the child's setup as an instruction (actors.inherit).
        if not set(profile.tools) <= {tool.name for tool in branch.tools}:
            return False
        system = profile.system
        if system is None or (branch.system is not None and branch.system.text == system):
            return True
        said = [branch.message_at(branch.index_of(mid) or 0) for mid in setup_ids(branch)]
        return any(isinstance(m, Instruction) and system in m.text for m in said)
    if tuple(tool.name for tool in branch.tools) != tuple(profile.tools):
        return False
    return profile.system is None or (branch.system is not None and branch.system.text == profile.system)


def _match_children(
    scenario: Scenario,
    branches: Mapping[str, Branch],
    rows: Sequence[BranchRow],
    mapping: dict[str, str],
    spawned: Mapping[str, list[str]],
) -> None:
    """Find the branches of spawned children that neither their requests nor their events name."""
    created = {row.id: row.created for row in rows}
    for emitter, children in spawned.items():
        emitter_branch = mapping.get(emitter)
        if emitter_branch is None:
            continue
        taken = set(mapping.values())
        for child in children:
            if child in mapping:
                continue
            spec = scenario.node(child)
            candidates = sorted(
                (
                    b
                    for b in branches.values()
                    if b.id not in taken
                    and created.get(b.id, -1) > created.get(emitter_branch, -1)
                    and (b.parent_id == emitter_branch if spec.inherit == "view" else b.parent_id is None)
                    and _matches_profile(b, scenario, child)
                ),
                key=lambda b: created[b.id],
            )
            if not candidates:
                raise StoreCorrupt(
                    f"node {child!r} was spawned by {emitter!r} before the run stopped, "
                    "but no stored branch can be its own"
                )
            mapping[child] = candidates[0].id
            taken.add(candidates[0].id)


def typed_again(result: OperationResult, output: OutputSchema | None) -> OperationResult:
    """A finished typed node's result with its value validated again from its stored answer (what dependents read)."""
    if output is None:
        return result
    try:
        value, value_json = output.validate(result.answer)
    except OutputInvalid:
        return result
    return attrs.evolve(result, value=value, value_json=value_json)


def plan_resume(
    scenario: Scenario,
    *,
    branches: Mapping[str, Branch],
    branch_rows: Sequence[BranchRow],
    requests: Sequence[RequestRow],
    events: Sequence[Event],
) -> ResumePlan:
    """Decide what each node of a stopped run does when it resumes (see the module docstring)."""
    mapping = _node_branch_map(scenario, branches, requests, events)
    spawned: dict[str, list[str]] = {}
    for node in scenario.nodes:
        if node.spawned_by is not None and node.spawned_by in mapping:
            shown = _spawned_children(branches[mapping[node.spawned_by]])
            if node.id in shown:
                spawned.setdefault(node.spawned_by, []).append(node.id)
    for emitter, children in spawned.items():
        order = _spawned_children(branches[mapping[emitter]])
        children.sort(key=order.index)
    _match_children(scenario, branches, branch_rows, mapping, spawned)
    spawned_ids = {child for children in spawned.values() for child in children}

    terminal: dict[str, Event] = {}
    for event in events:
        if event.type in ("NodeFinished", "NodeFailed", "NodeSkipped") and event.node_id is not None:
            terminal[event.node_id] = event
    turns = {row.id: row.turns_completed for row in branch_rows}
    by_node: dict[str, list[RequestRow]] = {}
    for row in requests:
        if row.node_id is not None and row.status == "sent":
            by_node.setdefault(row.node_id, []).append(row)
    cursors = Counter({node: len(rows) for node, rows in by_node.items()})

    restored: dict[str, Restored] = {}
    recovered: list[RecoveredEvent] = []

    def result_of(node_id: str, branch: Branch) -> OperationResult:
        rows = by_node.get(node_id, [])
        answer = _last_answer(branch)
        result = OperationResult(answer.text if answer else "", len(rows), len(rows), _usage_of(rows))
        return typed_again(result, scenario.node(node_id).output)

    for node in scenario.nodes:
        is_child = node.spawned_by is not None
        branch_id = mapping.get(node.id)
        branch = branches.get(branch_id) if branch_id is not None else None
        ended = terminal.get(node.id)
        if ended is not None and ended.type == "NodeSkipped":
            if is_child:
                restored[node.id] = Restored(None, NodeOutcome(node.id, "skipped", ended.data.get("reason")))
            continue  # a skipped top-level node is skipped again by the flow, from its dependencies
        if branch is None:
            continue
        if ended is not None and ended.type == "NodeFinished":
            outcome = NodeOutcome(node.id, "ok", None, result_of(node.id, branch), branch.id)
            restored[node.id] = Restored(branch, outcome, spawned=is_child)
        elif ended is not None and ended.type == "NodeFailed":
            reason = f"{ended.data.get('error_type')}: {ended.data.get('message')}"
            restored[node.id] = Restored(
                branch, NodeOutcome(node.id, "failed", reason, None, branch.id), spawned=is_child
            )
        elif turns.get(branch.id, 0) > 0 and branch.state.open_turn is None:
            # The turn completed (its end is in the store) but NodeFinished never reached the disk.
            result = result_of(node.id, branch)
            restored[node.id] = Restored(branch, NodeOutcome(node.id, "ok", None, result, branch.id), spawned=is_child)
            recovered.append(
                RecoveredEvent(node.id, branch.id, NodeFinished(rounds=result.rounds, answer_chars=len(result.answer)))
            )
        else:
            restored[node.id] = Restored(branch, None, spawned=is_child)

    _skip_unspawned(scenario, spawned_ids, restored, recovered)
    last_seq = max((event.seq for event in events), default=0)
    return ResumePlan(restored, dict(cursors), dict(mapping), tuple(recovered), last_seq + 1)


def _skip_unspawned(
    scenario: Scenario, spawned_ids: set[str], restored: dict[str, Restored], recovered: list[RecoveredEvent]
) -> None:
    """Children their finished emitter never spawned are skipped, as the flow would have."""
    for node in scenario.nodes:
        emitter = node.spawned_by
        if emitter is None or node.id in restored or node.id in spawned_ids:
            continue
        emitter_state = restored.get(emitter)
        if emitter_state is not None and emitter_state.outcome is not None:
            reason = f"never spawned: emitter {emitter!r} finished without spawning it"
            restored[node.id] = Restored(None, NodeOutcome(node.id, "skipped", reason))
            recovered.append(RecoveredEvent(node.id, None, NodeSkipped(reason=reason)))


# -- verifying what a resume reports on ------------------------------------------------------------


@attrs.frozen
class StoreVerification:
    """What a resume checked before reporting: every stored request rebuilt to its stored digest.

    ``failures`` are the replay errors' messages, each naming its request and
    (for a tampered original) the message; empty when everything verified.
    """

    requests: int
    failures: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        """One line, as ``replay --all`` words it."""
        verified = self.requests - len(self.failures)
        return f"{verified} of {self.requests} requests verified"


def verify_stored_requests(results: Sequence[Any]) -> StoreVerification:
    """Fold :func:`runtime.store.replay.replay_all`'s results into a :class:`StoreVerification`.

    Pure: the caller opens the store and runs the replay (the same check
    ``replay --all`` makes), so ``resume`` verifies exactly what ``replay`` does.
    """
    failures = tuple(str(r) for r in results if isinstance(r, Exception))
    return StoreVerification(requests=len(results), failures=failures)
