"""Starting a dependent: its dependencies' results into its first request, or a dependency's view.

Both engines start a top-level node the same way:

- :func:`dependency_results`: what it reads of each finished dependency
  (:mod:`runtime.flows.inputs`): the final answer, or the typed value as JSON;
  for a failed or skipped dependency (only a node that accepts failures gets
  this far) the reason.
- :func:`with_inputs`: the node's operation with the results rendered after
  its first instruction; a result clipped to fit keeps its whole block in the
  branch's record (before the instruction), where ``read_result`` reads it.
- :func:`inherited_branch`: a clone of a dependency's folded view (its
  completed rounds), set up with the node's own system text and tools, as a
  spawned child's is (:mod:`actors.inherit`: by default the emitter's stable
  segment stays, the node's setup arrives as an instruction): its first
  request is measured under its own ceiling.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from actors.branch import Branch
from actors.env import RunEnv
from actors.inherit import inherit_view
from actors.operations import operation_ceiling
from actors.shape import offered_tools
from runtime.config.operation import Operation, OperationResult
from runtime.config.profile import Profile
from runtime.flows.inputs import DependencyResult, InputPlan, input_budget, plan_inputs
from runtime.values.messages import AssistantResponse, Instruction, ToolResult


def result_text(result: OperationResult) -> str:
    """What a dependent reads of a finished node: its typed value as JSON, else its final answer."""
    return result.value_json if result.value_json is not None else result.answer


def dependency_results(
    reads: Sequence[str], outcomes: Mapping[str, Sequence[str | None]]
) -> tuple[DependencyResult, ...]:
    """The results of ``reads`` in order; ``outcomes`` gives each node's ``(status, reason, result text)``."""
    out: list[DependencyResult] = []
    for node_id in reads:
        status, reason, text = outcomes[node_id]
        if status == "ok" and text is not None:
            out.append(DependencyResult(node_id, "ok", text))
        else:
            why = reason or "no reason given"
            out.append(DependencyResult(node_id, "failed" if status == "failed" else "skipped", f"not run: {why}"))
    return tuple(out)


def instruction_pending(branch: Branch, resume: bool) -> bool:
    """Whether the node's first instruction is still to be appended (so its inputs go with it).

    A fresh start, or a resumed one whose branch shows no instruction appended yet.
    """
    if not resume:
        return True
    progress = branch.state.open_turn
    return progress is None or progress[0] == 0


def plan_for(
    branch: Branch, operation: Operation, profile: Profile, results: Sequence[DependencyResult], env: RunEnv
) -> InputPlan:
    """How ``results`` go into the node's first request, under its ceiling and result bound."""
    instruction = operation.instructions[0]
    ceiling = operation_ceiling(env, profile, operation).ceiling
    budget = input_budget(ceiling, env.counter.count(instruction))
    return plan_inputs(
        instruction,
        results,
        count=env.counter.count,
        budget_tokens=budget,
        char_bound=profile.tool_result_max_chars,
        first_index=branch.record_length(),
    )


async def with_inputs(
    branch: Branch, operation: Operation, profile: Profile, results: Sequence[DependencyResult], env: RunEnv
) -> Operation:
    """``operation`` with ``results`` after its first instruction; clipped originals go into ``branch``'s record."""
    if not results:
        return operation
    plan = plan_for(branch, operation, profile, results, env)
    if plan.originals:
        async with branch.turn() as turn:
            with turn.batch():
                for original in plan.originals:
                    turn.add_to_record(Instruction(original))
    return attrs.evolve(operation, instructions=(plan.instruction, *operation.instructions[1:]))


def completed_view_length(branch: Branch) -> int:
    """Length of a branch's view without a trailing incomplete round (calls with no results yet)."""
    view = branch.view()
    answered = {m.call_id for m in view if isinstance(m, ToolResult)}
    for i in range(len(view) - 1, -1, -1):
        message = view[i]
        if isinstance(message, AssistantResponse):
            if any(c.call_id not in answered for c in message.tool_calls):
                return i
            break
    return len(view)


def inherited_branch(source: Branch, source_profile: Profile, setup: Branch, profile: Profile) -> Branch:
    """A clone of ``source``'s completed view set up for ``profile`` with ``setup``'s system text and tools.

    By default the clone keeps the stable segment ``source``'s requests sent
    (its tools as ``source_profile`` offered them, its system text) and gets
    its own setup as an instruction (:mod:`actors.inherit`).
    """
    return inherit_view(
        source,
        profile,
        listed=offered_tools(source, source_profile),
        system=setup.system.text if setup.system else None,
        tools=setup.tools,
        upto=completed_view_length(source),
    )
