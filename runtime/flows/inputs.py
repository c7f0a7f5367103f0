"""What a dependent is given of its dependencies' results (DESIGN.md section 13), pure.

A dependent's first request carries, after its own instruction, each result
it reads, labelled by node id, in dependency order, in one stable rendering::

    <instruction>

    Results of the nodes this task depends on, in dependency order:

    <result node="lead" status="ok">
    ...the lead's final answer (or its typed value as JSON)...
    </result>

    <result node="survey" status="failed">
    ...why it failed (only for a node that accepts failures)...
    </result>

The same results render the same bytes on every run, so the prefix stays
cacheable. A result is content like any other: when the blocks do not fit
the dependent's input budget (half its ceiling, in tokens, shared fairly
among the blocks), the largest are clipped: each keeps a head and a tail of
its text around a clip marker naming the omitted characters and the exact
``read_result`` call that returns them, and its whole block goes into the
dependent's record (not its view) just before the instruction, where
:func:`runtime.fold.recovery.read_result` reads it back exactly. A profile's
``tool_result_max_chars`` bounds each block's characters the same way.

Pure: ``count`` (the token counter) is passed in; no I/O, clock or event loop.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import Literal

import attrs

from runtime.fold.formats import clip_marker
from runtime.fold.projection import CLIP_FLOOR, READ_LIMIT

INPUTS_HEADER = "Results of the nodes this task depends on, in dependency order:"
"""The line between a dependent's instruction and its dependencies' results."""

INPUT_SHARE = 0.5
"""The share of a dependent's ceiling its dependencies' results may fill (the rest is for its own work)."""

MARKER_ROOM = 420
"""Characters a clipped block sets aside for its clip marker and closing tag (a marker is under 400)."""

ResultStatus = Literal["ok", "failed", "skipped"]


@attrs.frozen
class DependencyResult:
    """One dependency's result as a dependent reads it: its text, or why there is none."""

    node_id: str
    status: ResultStatus
    text: str


def result_block(result: DependencyResult) -> str:
    """The labelled block one result renders as (stable: same result, same bytes)."""
    return f"{_opening(result)}{result.text}\n</result>"


def _opening(result: DependencyResult) -> str:
    return f'<result node="{result.node_id}" status="{result.status}">\n'


@attrs.frozen
class InputPlan:
    """The instruction a dependent starts with, and the originals its record keeps for clipped blocks.

    ``originals[i]`` is appended to the record (not the view) at full-record
    index ``first_index + i``, before the instruction; the clip markers in
    ``instruction`` name those indices.
    """

    instruction: str
    originals: tuple[str, ...]
    clipped: tuple[str, ...]
    """The node ids whose result was clipped, in dependency order."""


def _allowances(tokens: Sequence[int], budget: int) -> list[int | None]:
    """Per block: None (kept whole) or its token allowance; a fair share of ``budget``, smallest first."""
    allowance: list[int | None] = [None] * len(tokens)
    if sum(tokens) <= budget:
        return allowance
    remaining = budget
    order = sorted(range(len(tokens)), key=lambda i: (tokens[i], i))
    for position, i in enumerate(order):
        share = remaining // (len(order) - position)
        if tokens[i] <= share:
            remaining -= tokens[i]
            continue
        allowance[i] = share
        remaining -= share
    return allowance


def _clip(result: DependencyResult, keep: int, index: int) -> str:
    """The block with only ``keep`` characters of its text: a head, the marker, a tail (offsets into the block)."""
    opening = _opening(result)
    text = result.text
    head = (3 * keep) // 4
    tail = keep - head
    start = len(opening) + head
    end = len(opening) + len(text) - tail
    total = len(result_block(result))
    marker = clip_marker(index=index, start=start, end=end, total=total, limit=min(end - start, READ_LIMIT))
    return f"{opening}{text[:head]}{marker}{text[len(text) - tail :]}\n</result>"


def _kept_chars(result: DependencyResult, tokens: int, allowance: int | None, char_bound: int | None) -> int | None:
    """How many characters of the result's text a clipped block keeps (None: the block is kept whole)."""
    length = len(result.text)
    keep = length
    if allowance is not None:
        # At the block's own measured tokens per character, less room for the marker.
        keep = math.floor(allowance * len(result_block(result)) / max(tokens, 1)) - MARKER_ROOM
    if char_bound is not None:
        keep = min(keep, char_bound - len(_opening(result)) - MARKER_ROOM)
    keep = max(keep, min(CLIP_FLOOR, length - 1))
    return None if keep >= length else max(keep, 2)


def plan_inputs(
    instruction: str,
    results: Sequence[DependencyResult],
    *,
    count: Callable[[str], int],
    budget_tokens: int | None,
    char_bound: int | None = None,
    first_index: int,
) -> InputPlan:
    """The dependent's instruction with ``results`` rendered after it (see the module docstring).

    ``budget_tokens``: what the blocks may fill together (None: no bound);
    ``char_bound``: the most characters one block may keep (a profile's
    ``tool_result_max_chars``); ``first_index``: the full-record index the
    first original would take.
    """
    if not results:
        return InputPlan(instruction, (), ())
    blocks = [result_block(r) for r in results]
    tokens = [count(b) for b in blocks]
    allowance = _allowances(tokens, budget_tokens) if budget_tokens is not None else [None] * len(blocks)
    rendered: list[str] = []
    originals: list[str] = []
    clipped: list[str] = []
    for result, block, counted, allowed in zip(results, blocks, tokens, allowance, strict=True):
        keep = _kept_chars(result, counted, allowed, char_bound)
        if keep is None:
            rendered.append(block)
            continue
        rendered.append(_clip(result, keep, first_index + len(originals)))
        originals.append(block)
        clipped.append(result.node_id)
    text = f"{instruction}\n\n{INPUTS_HEADER}\n\n" + "\n\n".join(rendered)
    return InputPlan(text, tuple(originals), tuple(clipped))


def input_budget(ceiling: int | None, instruction_tokens: int) -> int | None:
    """The tokens a dependent's inputs may fill: a share of its ceiling less its own instruction (None: no ceiling)."""
    if ceiling is None:
        return None
    return max(0, math.floor(ceiling * INPUT_SHARE) - instruction_tokens)


_BLOCK = re.compile(r'<result node="(?P<node>[A-Za-z0-9_.-]+)" status="(?P<status>ok|failed|skipped)">\n')


@attrs.frozen
class CarriedResult:
    """A result block found in an instruction's text (for display): its node, status and text as carried."""

    node_id: str
    status: str
    text: str


def carried_results(instruction: str) -> tuple[CarriedResult, ...]:
    """The result blocks an instruction carries after :data:`INPUTS_HEADER` (none when it has no header)."""
    start = instruction.find(f"\n\n{INPUTS_HEADER}\n\n")
    if start < 0:
        return ()
    found = list(_BLOCK.finditer(instruction, start))
    out: list[CarriedResult] = []
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(instruction)
        body = instruction[match.end() : end].rstrip("\n")
        out.append(CarriedResult(match["node"], match["status"], body.removesuffix("</result>").rstrip("\n")))
    return tuple(out)
