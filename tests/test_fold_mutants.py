"""The fold rules a mutation run found unpinned (scripts/mutation): each test names the rule it pins.

Every test here was written against a mutant of ``runtime/fold`` that the
module's other tests let through; the mutant is named in the comment above it
so a later run that reports it again points here.
"""

from __future__ import annotations

import attrs
import pytest

from runtime.canonical import canonical_json
from runtime.fold.audit import unrecoverable_bytes
from runtime.fold.bodies import recovery_text
from runtime.messages import AssistantResponse, Message, TextPart, ToolCall, ToolResult


@attrs.frozen
class RecordAndView:
    """The two things the audit reads of a branch: its record and the ids in its view."""

    messages: tuple[Message, ...]
    view: tuple[str, ...]

    def record_messages(self) -> tuple[Message, ...]:
        return self.messages

    def view_ids(self) -> tuple[str, ...]:
        return self.view


# audit.x_unrecoverable_bytes__mutmut_23: a clipped copy whose original the record lacks counts its own bytes.
def test_a_clipped_copy_whose_original_is_missing_counts_its_own_bytes():
    copy = ToolResult("call-1", "read_file", "{}", "the kept part", clipped_from="missing-id")
    whole = ToolResult("call-2", "read_file", "{}", "an unclipped result")
    branch = RecordAndView((whole, copy), (whole.id, copy.id))
    assert unrecoverable_bytes(branch) == len(canonical_json(copy.content()).encode("utf-8"))


# bodies.x_recovery_text__mutmut_2..6: a response reads back as its text parts and its calls, one a line.
def test_a_response_reads_back_as_its_text_and_calls_one_a_line():
    response = AssistantResponse(
        (TextPart("Reading both."), ToolCall.create("c1", "read_file", {"path": "a.md"}), TextPart("Done."))
    )
    assert recovery_text(response) == 'Reading both.\n[call read_file {"path":"a.md"}]\nDone.'


# bodies.x_recovery_text__mutmut_7, 8: anything else is refused naming its type.
def test_recovery_text_refuses_what_is_not_a_message_naming_its_type():
    with pytest.raises(TypeError) as refused:
        recovery_text(TextPart("not a message"))  # type: ignore[arg-type]
    assert str(refused.value) == "recovery_text: TextPart is not a message kind"
