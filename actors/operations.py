"""Running operations: the bounded and iterative loops over the send step.

:func:`run_operation` holds a branch's lock for the whole turn and drives a
:class:`~actors.send.TurnDriver`: it appends the instructions, sends, runs
the round's tools and stops at the answer (or the round limit). A resumed
operation continues from the branch's stored ``open_turn``.

Stop reasons (each is in the ``ResponseReceived`` event of its reply):
``end_turn`` and ``stop_sequence`` end the turn with the reply's text;
``tool_use`` runs the round's calls; ``pause_turn`` (and ``compaction``: a
server-side compaction paused after writing its block) sends the conversation
again as it is so the model continues (at most :data:`MAX_PAUSES` times in a
row); ``refusal`` fails the operation with the reason; ``max_tokens`` in an
iterative operation answers any (possibly truncated) calls of the reply as
not run and asks the model to continue, at most :data:`MAX_CONTINUATIONS`
times, the answer being the continued replies' text joined.
"""

from __future__ import annotations

from collections.abc import Sequence

from actors.branch import Branch
from actors.env import RunEnv
from actors.final_tool import final_call
from actors.pipeline import TurnProgress
from actors.send import Spawn, TurnDriver
from actors.typed import typed_result
from runtime.config.operation import (
    Operation,
    OperationError,
    OperationResult,
    RoundLimitExceeded,
)
from runtime.config.profile import Profile
from runtime.decision.ceiling import ResolvedCeiling, resolve_ceiling
from runtime.decision.send_bounds import bound_by_window
from runtime.models.limits import default_model_table
from runtime.request.compiler import Intent
from runtime.values.messages import AssistantResponse, ToolCall, ToolResult
from runtime.values.server_edits import COMPACTION_STOP

__all__ = [
    "Operation",
    "OperationError",
    "OperationResult",
    "RoundLimitExceeded",
    "operation_ceiling",
    "run_operation",
]

MAX_PAUSES = 8
"""How many ``pause_turn`` replies in a row an operation continues before it fails."""

PAUSED = ("pause_turn", COMPACTION_STOP)
"""Stop reasons that pause a turn: the conversation is sent again as it is and the model continues."""

MAX_CONTINUATIONS = 3
"""How many times an iterative operation continues a reply cut at ``max_tokens``."""

CONTINUE_TEXT = "Your previous reply was cut off at the output limit (max_tokens). Continue exactly where it stopped."
CUT_CALL_TEXT = "not run: the reply was cut off at max_tokens, so this call may be incomplete; call it again if needed"


async def _send(driver: TurnDriver, intent: Intent) -> AssistantResponse:
    """Send, continuing paused replies (``pause_turn``, or ``compaction`` after a server-side compaction);
    a ``refusal`` fails the operation with its reason."""
    paused: str | None = None
    for _ in range(MAX_PAUSES + 1):
        message = await driver.send(intent)
        if paused is not None:
            # The continuation is a second reply after the paused one: both render as one
            # assistant turn, so the next request extends that turn's message (a known rewrite).
            driver.turn.explain_rewrite(f"{paused}: the continued reply joins the paused assistant turn")
        if message.stop_reason == "refusal":
            why = message.text.strip() or "no text given"
            raise OperationError(f"the model refused (stop_reason refusal): {why}")
        if message.stop_reason not in PAUSED:
            return message
        paused = message.stop_reason
    raise OperationError(f"the model paused its turn (stop_reason {paused}) {MAX_PAUSES + 1} times in a row")


def operation_ceiling(env: RunEnv, profile: Profile, operation: Operation) -> ResolvedCeiling:
    """The ceiling an operation's requests are measured under: the resolved value, bounded by the model's window."""
    ceiling = resolve_ceiling(
        model=env.model_name(profile),
        profile_value=profile.max_input_tokens,
        model_value=env.model.max_input_tokens,
        call_value=operation.max_input_tokens,
        pricing=env.pricing,
    )
    model = env.model_name(profile)  # the model's window bounds every request
    return bound_by_window(ceiling, model, default_model_table().context_window(model))


async def run_operation(
    branch: Branch,
    operation: Operation,
    *,
    env: RunEnv,
    profile: Profile,
    node_id: str | None = None,
    spawn: Spawn | None = None,
    resume: bool = False,
) -> OperationResult:
    """Run one operation on a branch, holding its lock for the whole turn.

    With ``resume``, an operation the branch shows as interrupted mid-turn
    (its ``open_turn`` state, restored from a store) continues from the
    branch's last stored state: instructions already appended are not
    appended again, completed requests are not sent again, and a round whose
    calls have no results yet runs just the missing calls.
    """
    ceiling = operation_ceiling(env, profile, operation)
    async with branch.turn() as turn:
        progress = branch.state.open_turn if resume and branch.state.open_turn is not None else (0, 0)
        driver = TurnDriver(turn, env, profile, operation, node_id, spawn, ceiling, TurnProgress(*progress))
        turn.open_turn(*progress)
        if operation.kind == "bounded":
            result = await _run_bounded(driver, *progress)
        else:
            result = await _run_iterative(driver, *progress)
        result = await typed_result(driver, result, _send)
        turn.close_turn()
        return result


async def _run_bounded(driver: TurnDriver, appended: int, completed: int) -> OperationResult:
    reply_message: AssistantResponse | None = None
    steps = driver.operation.instructions
    for i, text in enumerate(steps):
        if i < completed:
            continue
        intent: Intent = "final" if i == len(steps) - 1 else "continuing"
        if i >= appended:
            await driver.append_instruction(text, intent)
        reply_message = await _send(driver, intent)
        if i == len(steps) - 1 and await _final_given(driver, reply_message):
            break
        if reply_message.tool_calls:
            calls = reply_message.tool_calls
            await _answer_unrun(driver, calls, "tools are not run in a bounded operation")
            raise OperationError(
                f"a bounded operation's request was answered with tool calls ({', '.join(c.name for c in calls)})"
            )
    if reply_message is None:
        reply_message = _last_answer(driver)
    return OperationResult(reply_message.text, len(steps), driver.progress.requests, driver.progress.usage)


def _last_answer(driver: TurnDriver) -> AssistantResponse:
    for message in reversed(driver.branch.view()):
        if isinstance(message, AssistantResponse):
            return message
    raise OperationError("the resumed operation has no answer in its view")


async def _answer_unrun(driver: TurnDriver, calls: Sequence[ToolCall], why: str, *, prefix: str = "not run: ") -> None:
    for call in calls:
        driver.turn.append(ToolResult.for_call(call, f"{prefix}{why}", is_error=True))


async def _final_given(driver: TurnDriver, reply: AssistantResponse) -> bool:
    """Whether ``reply`` calls the final-answer tool (:mod:`actors.final_tool`); its other calls are answered
    as not run (the call itself is answered when its input is validated, :mod:`actors.typed`)."""
    call = None if driver.final is None else final_call(reply)
    if call is None:
        return False
    answered = {m.call_id for m in driver.branch.view() if isinstance(m, ToolResult)}
    others = [c for c in reply.tool_calls if c is not call and c.call_id not in answered]
    await _answer_unrun(driver, others, "the final answer was given in the same reply")
    return True


async def _run_iterative(driver: TurnDriver, appended: int, completed: int) -> OperationResult:
    if appended == 0:
        await driver.append_instruction(driver.operation.instructions[0], "continuing")
    elif completed:
        # Resumed after at least one response: finish its round before sending again.
        last = _last_answer(driver)
        if not last.tool_calls or await _final_given(driver, last):
            return OperationResult(last.text, completed, driver.progress.requests, driver.progress.usage)
        answered = {m.call_id for m in driver.branch.view() if isinstance(m, ToolResult)}
        await driver.run_tools([c for c in last.tool_calls if c.call_id not in answered])
    cut: list[str] = []
    for round_no in range(completed + 1, driver.operation.max_rounds + 1):
        message = await _send(driver, "continuing")
        if message.stop_reason == "max_tokens":
            if len(cut) >= MAX_CONTINUATIONS:
                raise OperationError(
                    f"the reply was cut off at max_tokens {len(cut) + 1} times in a row "
                    f"(continued at most {MAX_CONTINUATIONS} times)"
                )
            cut.append(message.text)
            await _answer_unrun(driver, message.tool_calls, CUT_CALL_TEXT, prefix="")
            await driver.append_instruction(CONTINUE_TEXT, "continuing")
            continue
        if not message.tool_calls or await _final_given(driver, message):
            text = "".join(cut) + message.text
            return OperationResult(text, round_no, driver.progress.requests, driver.progress.usage)
        cut.clear()
        await driver.run_tools(message.tool_calls)
    raise RoundLimitExceeded(
        f"no final answer after {driver.operation.max_rounds} rounds (max_rounds={driver.operation.max_rounds})"
    )
