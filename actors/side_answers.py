"""A fold summary already answered in a branch's record.

A side request (a fold's summary) keeps its prompt and its reply in the
branch's record, outside the view, in the batch that stores the request: the
reply carries the digest of the conversation it answered
(:meth:`runtime.request.compiler.Request.context_digest`). A fold that asks for the
summary of the very same prompt again (a resumed run whose fold was answered
but not committed before the process died, or a pass planned again after a
rollback) takes the recorded reply instead of paying for the request twice.
"""

from __future__ import annotations

from actors.branch import Branch
from runtime.fold.planner import SummaryResult
from runtime.request.compiler import Request
from runtime.values.messages import AssistantResponse
from runtime.values.usage import Usage


def recorded_answer(branch: Branch, request: Request) -> AssistantResponse | None:
    """The newest reply in ``branch``'s record to exactly ``request``'s conversation, or None."""
    context = request.context_digest()
    for message in reversed(branch.record_messages()):
        if isinstance(message, AssistantResponse) and message.context == context:
            return message
    return None


def summary_of(text: str, usage: Usage | None) -> SummaryResult:
    """A summary reply's text as the fold planner takes it (a reply with no text is a failure)."""
    if not text.strip():
        return SummaryResult(failure="the summary request answered with no text", usage=usage)
    return SummaryResult(text=text, usage=usage)
