"""What reading folded material back has cost a branch, from its own record (for the cost policy).

:func:`recall_profile` finds every ``read_result`` the branch's model sent through its context tool
and measures, for each, how far back the original stood when it was needed: the tokens of content
that entered the view after the original and before the recall (the same content
:func:`actors.folding.view_growth` counts as growth: fold notes, clipped copies and summary prompts
are not). With the number of main requests they were seen over and the mean page a recall brought
back, that is the :class:`runtime.fold.cost.RecallProfile` the cost model prices recalls from.
"""

from __future__ import annotations

import json

from actors.branch import Turn
from runtime.fold.context_tool import CONTEXT_TOOL_NAME
from runtime.fold.cost import RecallProfile
from runtime.fold.measurer import Measurer
from runtime.values.messages import AssistantResponse, Message, Note, ToolResult


def _recalled_index(message: Message, position: int) -> int | None:
    """The full-record index a ``read_result`` answer read from, or None when ``message`` is not one."""
    if not isinstance(message, ToolResult) or message.name != CONTEXT_TOOL_NAME or message.clipped_from is not None:
        return None
    try:
        arguments = json.loads(message.arguments_json)
    except ValueError:
        return None
    if not isinstance(arguments, dict) or arguments.get("action") != "read_result":
        return None
    index = arguments.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < position:
        return None
    return index


def recall_profile(turn: Turn, measurer: Measurer, memo: dict[str, int] | None = None) -> RecallProfile | None:
    """The branch's recalls so far (None before its first main response).

    ``memo`` keeps each measured message's counted tokens by id between calls (a message's
    blocks never change), so asking before every request does not count the record again.
    """
    branch = turn.branch
    memo = {} if memo is None else memo

    def tokens_of(message: Message) -> int:
        if message.id not in memo:
            memo[message.id] = measurer.block_tokens(message)[0]
        return memo[message.id]

    delivered, in_view = branch.state.delivered, set(branch.view_ids())
    counted: list[bool] = []
    requests = 0
    recalls: list[tuple[int, int]] = []
    for position in range(branch.record_length()):
        message = branch.message_at(position)
        content = not isinstance(message, Note) and not (
            isinstance(message, ToolResult) and message.clipped_from is not None
        )
        seen = message.id in delivered or message.id in in_view
        counted.append(content and seen)
        if not seen:
            continue
        if isinstance(message, AssistantResponse):
            requests += 1
        index = _recalled_index(message, position)
        if index is not None:
            recalls.append((position, index))
    if requests < 1:
        return None
    if not recalls:
        return RecallProfile(requests)
    start = min(index for _, index in recalls)
    running = [0]  # tokens of counted messages from ``start`` up to (not including) each position
    for position in range(start, len(counted)):
        tokens = tokens_of(branch.message_at(position)) if counted[position] else 0
        running.append(running[-1] + tokens)
    scale = measurer.scale
    distances = tuple(scale * (running[at - start] - running[index + 1 - start]) for at, index in recalls)
    pages = [tokens_of(branch.message_at(at)) * scale for at, _ in recalls]
    return RecallProfile(requests, distances, page_tokens=sum(pages) / len(pages))
