"""The reader policy: a scripted model that follows a plan and recalls facts.

A :class:`ReaderPolicy` answers each request by looking at the payload it is
sent, the way a model would. Its plan is a node's script (a tuple of
:class:`~runtime.scripted.policies.ScriptStep`): each step is one model turn of text
and tool calls. A tool-call argument written as ``{recall = "F12"}`` is a
*recall*: before the step can be taken the model needs fact ``F12``'s value
(see :mod:`runtime.bench.facts`), and the policy gets it in one of three ways:

- **view**: the fact's line is visible in the request; no extra round.
- **read_result**: the fact is not visible, but the request shows where its
  original is kept: a fold note listing the call that printed it, or a clip
  marker on that call's result. The policy calls the ``context`` tool's
  ``read_result`` (one round per page of at most 16,000 characters) and
  takes the value from the exact characters it returns.
- **rerun**: nothing in the request leads back to the original (after a
  lossy compaction, or without a context tool). The policy calls the
  original tool again with the same arguments, as agents do, paying a round
  and the whole output again.

A fact whose result Anthropic's server-side context management cleared (the
``api-*`` strategies: the request shows a placeholder where the result was,
and there is no ``read_result``: the API keeps nothing to read back) or
compacted away is not visible and nothing in the request leads back to it, so
the policy re-runs the call that first showed it (it remembers which), as an
agent would; a probe answered that way is not "answered without re-running a
tool". When the re-run's own result is cleared before the step is taken (the
server keeps fewer results than the step needs re-run), the recall fails.

A recall none of these answers is **failed**; its placeholder is filled with
``"unknown"``. Every recall is logged as a :class:`RecallOutcome` in
:attr:`ReaderPolicy.log`; the harness judges the values.

Which call printed a fact: the call whose result first showed it to the
policy, else a call the policy made, or one the request shows or a fold note
lists, that prints the fact by the task's rules (``prints``: the model's
knowledge of its tools; by default, a call prints the facts its arguments
name, as ``read_doc``'s ``facts`` do).

A retried request (the same messages again) gets the same answer and moves
nothing. This module is pure: no I/O, no clock; the only state is the
policy's own cursor, memory and log.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from runtime.bench.facts import check_fact_id, facts_in, find_fact
from runtime.errors import FoldlineError
from runtime.fold.formats import (
    NoteCall,
    listed_arguments,
    parse_clip_marker,
    parse_note_calls,
    parse_read_result,
)
from runtime.scripted.policies import PolicyExhausted, Reply, ScriptStep, tool_use_id
from runtime.values.canonical import canonical_json, sha256_hex

CONTEXT_TOOL = "context"
ANSWER_TOOL = "answer"
PAGE_CHARS = 16_000
"""The most characters one ``read_result`` call asks for (the tool's own limit)."""
PAGE_OVERLAP = 64
"""Characters a next page re-reads, so a fact line cut by a page boundary is whole in one page."""
UNKNOWN = "unknown"
"""What a failed recall's placeholder is filled with."""

Outcome = Literal["view", "read_result", "rerun", "failed"]
OUTCOMES: tuple[Outcome, ...] = ("view", "read_result", "rerun", "failed")

Prints = Callable[[str, Mapping[str, Any]], Sequence[str]]
"""``prints(tool_name, arguments)``: the fact ids a call's result shows, by the task's rules."""


class ReaderPlanError(FoldlineError, ValueError):
    """A reader plan that cannot be followed (e.g. a malformed ``{recall = ...}``)."""


@attrs.frozen
class Source:
    """A tool call: its name and canonical arguments."""

    name: str
    arguments_json: str

    @property
    def arguments(self) -> dict[str, Any]:
        return json.loads(self.arguments_json)


@attrs.frozen
class ReadResultCall:
    """A ``read_result`` call to make: record index, first character, characters wanted, where to stop."""

    index: int
    offset: int
    limit: int
    end: int | None = None


@attrs.frozen
class RecallOutcome:
    """How one recall went.

    ``kind`` is ``"probe"`` for an ``answer`` call's value and ``"key"`` for any
    other argument (a stage's key). ``rounds`` counts the extra requests the
    recovery took (0 from view). ``value`` is what the policy found (None
    when failed); the harness compares it with the fact's real value.
    """

    node_id: str
    step: int
    fact: str
    kind: Literal["probe", "key"]
    outcome: Outcome
    value: str | None
    rounds: int
    detail: str = ""


@attrs.define(eq=False)
class _Recovery:
    """An unfinished recovery of one fact (an identity object; lives for one step)."""

    method: Literal["read_result", "rerun"]
    source: Source | None
    rounds: int = 1
    call_id: str = ""
    index: int | None = None
    end: int | None = None


# -- reading a payload --------------------------------------------------------------------


def _blocks(payload: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for message in payload.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            yield {"type": "text", "text": content}
            continue
        yield from content or ()


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if isinstance(part, Mapping))


def visible_text(payload: Mapping[str, Any]) -> str:
    """Everything a model reads in the request's messages: text, tool results and compaction summaries, in order."""
    parts: list[str] = []
    for block in _blocks(payload):
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_result":
            parts.append(_result_text(block))
        elif kind == "compaction":
            parts.append(block.get("content") or "")
    return "\n".join(parts)


def _tool_names(payload: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(tool.get("name", "") for tool in payload.get("tools") or ())


def _note_calls(payload: Mapping[str, Any]) -> list[NoteCall]:
    """Every call the request's fold notes list."""
    calls: list[NoteCall] = []
    for block in _blocks(payload):
        if block.get("type") == "text":
            calls.extend(parse_note_calls(block.get("text", "")))
    return calls


def _message_key(payload: Mapping[str, Any]) -> tuple[int, str]:
    messages = payload.get("messages") or ()
    last = messages[-1] if messages else {}
    return len(messages), sha256_hex(canonical_json(_without_marks(last)))


def _without_marks(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_marks(v) for v in value]
    return value


# -- the plan -------------------------------------------------------------------------------


def named_facts(name: str, arguments: Mapping[str, Any]) -> tuple[str, ...]:
    """The default ``prints``: the fact ids a call's arguments name in a ``facts`` list."""
    facts = arguments.get("facts")
    if not isinstance(facts, list):
        return ()
    return tuple(f for f in facts if isinstance(f, str))


def _recall_of(value: Any, where: str) -> str | None:
    if isinstance(value, Mapping) and "recall" in value:
        if set(value) != {"recall"}:
            raise ReaderPlanError(f"{where}: {dict(value)!r} has keys besides 'recall'")
        try:
            return check_fact_id(value["recall"])
        except ValueError as exc:
            raise ReaderPlanError(f"{where}: {exc}") from None
    return None


def _walk_recalls(value: Any, where: str) -> Iterator[str]:
    fact = _recall_of(value, where)
    if fact is not None:
        yield fact
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk_recalls(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk_recalls(item, f"{where}[{i}]")


def recalls_of(step: ScriptStep, where: str = "step") -> tuple[tuple[str, Literal["probe", "key"]], ...]:
    """The facts a step recalls, in order, each once: ``(fact, "probe" | "key")``."""
    seen: dict[str, Literal["probe", "key"]] = {}
    for i, call in enumerate(step.tool_calls):
        kind: Literal["probe", "key"] = "probe" if call.name == ANSWER_TOOL else "key"
        for fact in _walk_recalls(call.arguments, f"{where}.tool_calls[{i}].arguments"):
            seen.setdefault(fact, kind)
    return tuple(seen.items())


def _fill(value: Any, values: Mapping[str, str | None]) -> Any:
    fact = _recall_of(value, "arguments")
    if fact is not None:
        found = values.get(fact)
        return found if found is not None else UNKNOWN
    if isinstance(value, Mapping):
        return {key: _fill(item, values) for key, item in value.items()}
    if isinstance(value, list):
        return [_fill(item, values) for item in value]
    return value


def _read_call(call: ReadResultCall) -> dict[str, Any]:
    return {
        "action": "read_result",
        "index": call.index,
        "offset": call.offset,
        "limit": max(1, min(call.limit, PAGE_CHARS)),
    }


# -- the policy -----------------------------------------------------------------------------


def _steps(steps: Iterable[ScriptStep]) -> tuple[ScriptStep, ...]:
    # Typed converter: mypy's attrs plugin cannot type a generic ``converter=tuple``.
    return tuple(steps)


@attrs.define(eq=False)
class ReaderPolicy:
    """Follows a plan step by step, recalling facts as described in the module docstring."""

    node_id: str
    steps: tuple[ScriptStep, ...] = attrs.field(converter=_steps)
    prints: Prints = named_facts
    log: list[RecallOutcome] = attrs.field(factory=list, init=False)
    _cursor: int = attrs.field(default=0, init=False)
    _replies: int = attrs.field(default=0, init=False)
    _seen_in: dict[str, Source] = attrs.field(factory=dict, init=False)
    _calls_made: list[Source] = attrs.field(factory=list, init=False)
    _scanned: set[str] = attrs.field(factory=set, init=False)
    _active: dict[str, _Recovery] = attrs.field(factory=dict, init=False)
    _last: tuple[tuple[int, str], Reply] | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        for i, step in enumerate(self.steps):
            if not isinstance(step, ScriptStep):
                raise ReaderPlanError(f"node {self.node_id!r}: step {i} is {step!r}, not a ScriptStep")
            recalls_of(step, f"node {self.node_id!r} step {i}")

    @property
    def steps_taken(self) -> int:
        """Plan steps completed so far."""
        return self._cursor

    def respond(self, payload: Mapping[str, Any]) -> Reply:
        key = _message_key(payload)
        if self._last is not None and self._last[0] == key:
            return self._last[1]  # the same request again (a retry): the same answer
        self._learn(payload)
        reply = self._next(payload)
        self._last = (key, reply)
        return reply

    # -- memory ---------------------------------------------------------------------------

    def _learn(self, payload: Mapping[str, Any]) -> None:
        """Remember, for each tool result not seen before, the facts it shows and its call."""
        calls: dict[str, Source] = {}
        for block in _blocks(payload):
            kind = block.get("type")
            if kind == "tool_use":
                calls[block["id"]] = Source(block["name"], canonical_json(block.get("input") or {}))
            elif kind == "tool_result":
                call_id = block.get("tool_use_id", "")
                source = calls.get(call_id)
                if call_id in self._scanned or source is None or source.name == CONTEXT_TOOL:
                    continue  # a read_result page is a copy, not where a fact comes from
                self._scanned.add(call_id)
                for fact in facts_in(_result_text(block)):
                    self._seen_in.setdefault(fact, source)

    def _prints(self, source: Source, fact: str) -> bool:
        return fact in self.prints(source.name, source.arguments)

    def source_of(self, fact: str, payload: Mapping[str, Any]) -> Source | None:
        """The call that printed ``fact``, as far as this model can tell (see the module docstring)."""
        if fact in self._seen_in:
            return self._seen_in[fact]
        for call in self._calls_made:
            if self._prints(call, fact):
                return call
        for block in _blocks(payload):
            if block.get("type") == "tool_use" and block.get("name") != CONTEXT_TOOL:
                source = Source(block["name"], canonical_json(block.get("input") or {}))
                if self._prints(source, fact):
                    return source
        for note in _note_calls(payload):
            source = Source(note.name, canonical_json(dict(note.arguments)))
            if self._prints(source, fact):
                return source
        return None

    # -- the plan -------------------------------------------------------------------------

    def _next(self, payload: Mapping[str, Any]) -> Reply:
        if self._cursor >= len(self.steps):
            raise PolicyExhausted(
                f"node {self.node_id!r}: its plan had {len(self.steps)} step(s) and all were taken; "
                f"request {self._replies + 1} has no planned answer"
            )
        step = self.steps[self._cursor]
        text = visible_text(payload)
        values: dict[str, str | None] = {}
        recovering: list[tuple[str, _Recovery, tuple[str, Mapping[str, Any]]]] = []
        for fact, kind in recalls_of(step):
            active = self._active.get(fact)
            value = find_fact(text, fact)
            if value is not None:
                self._record(fact, kind, active.method if active else "view", value, active.rounds if active else 0)
                values[fact] = value
                continue
            planned = self._recover(fact, active, payload)
            if planned is None:
                rounds = active.rounds if active else 0
                self._record(fact, kind, "failed", None, rounds, "not in the request and not recoverable from it")
                values[fact] = None
                continue
            recovering.append((fact, *planned))
        if recovering:
            return self._reply(None, [call for _, _, call in recovering], [(f, r) for f, r, _ in recovering])
        self._active.clear()
        self._cursor += 1
        return self._reply(step.text, [(call.name, _fill(call.arguments, values)) for call in step.tool_calls], [])

    def _record(
        self,
        fact: str,
        kind: Literal["probe", "key"],
        outcome: Outcome,
        value: str | None,
        rounds: int,
        detail: str = "",
    ) -> None:
        self._active.pop(fact, None)
        self.log.append(RecallOutcome(self.node_id, self._cursor, fact, kind, outcome, value, rounds, detail))

    def _reply(
        self,
        text: str | None,
        calls: Sequence[tuple[str, Mapping[str, Any]]],
        recovering: Sequence[tuple[str, _Recovery]],
    ) -> Reply:
        reply_no = self._replies
        self._replies += 1
        content: list[dict[str, Any]] = []
        if text is not None:
            content.append({"type": "text", "text": text})
        for i, (name, arguments) in enumerate(calls):
            call_id = tool_use_id(self.node_id, reply_no, i)
            content.append({"type": "tool_use", "id": call_id, "name": name, "input": dict(arguments)})
            if name != CONTEXT_TOOL:
                self._calls_made.append(Source(name, canonical_json(dict(arguments))))
        for i, (fact, recovery) in enumerate(recovering):
            recovery.call_id = tool_use_id(self.node_id, reply_no, i)
            self._active[fact] = recovery
        return Reply(content=tuple(content), stop_reason="tool_use" if calls else "end_turn")

    # -- recovery -------------------------------------------------------------------------

    def _recover(
        self, fact: str, active: _Recovery | None, payload: Mapping[str, Any]
    ) -> tuple[_Recovery, tuple[str, Mapping[str, Any]]] | None:
        """The next recovery call for a fact that is not visible, or None when it is lost."""
        if active is not None and active.method == "read_result":
            page = self._next_page(active, payload)
            if page is not None:
                active.rounds += 1
                return active, (CONTEXT_TOOL, page)
            return self._rerun(active.source, active.rounds)
        if active is not None:
            return None  # a re-run did not show it either
        source = self.source_of(fact, payload)
        if CONTEXT_TOOL in _tool_names(payload):
            found = self._locate(fact, source, payload)
            if found is not None:
                recovery = _Recovery("read_result", source, index=found.index, end=found.end)
                return recovery, (CONTEXT_TOOL, _read_call(found))
        return self._rerun(source, 0)

    @staticmethod
    def _rerun(source: Source | None, rounds: int) -> tuple[_Recovery, tuple[str, Mapping[str, Any]]] | None:
        if source is None:
            return None
        return _Recovery("rerun", source, rounds=rounds + 1), (source.name, source.arguments)

    @staticmethod
    def _next_page(active: _Recovery, payload: Mapping[str, Any]) -> dict[str, Any] | None:
        """The ``read_result`` page after the one ``active`` asked for, or None when there is none."""
        for block in _blocks(payload):
            if block.get("type") != "tool_result" or block.get("tool_use_id") != active.call_id:
                continue
            if block.get("is_error") or active.index is None:
                return None
            try:
                page = parse_read_result(_result_text(block))
            except ValueError:
                return None
            end = page.total if active.end is None else min(active.end, page.total)
            if page.next_offset is None or page.next_offset >= end:
                return None
            offset = max(page.offset + 1, page.next_offset - PAGE_OVERLAP)
            return _read_call(ReadResultCall(active.index, offset, end - offset))
        return None

    def _locate(self, fact: str, source: Source | None, payload: Mapping[str, Any]) -> ReadResultCall | None:
        """Where the request says the original that printed ``fact`` is kept, if it says.

        A clipped copy of the source call's result names its omitted interval;
        a fold note listing the source call names the original's record index.
        """
        if source is not None:
            calls: dict[str, Source] = {}
            for block in _blocks(payload):
                if block.get("type") == "tool_use":
                    calls[block["id"]] = Source(block["name"], canonical_json(block.get("input") or {}))
                elif block.get("type") == "tool_result" and calls.get(block.get("tool_use_id", "")) == source:
                    for marker in parse_clip_marker(_result_text(block)):
                        return ReadResultCall(marker.index, marker.offset, marker.end - marker.offset, marker.end)
        shown = listed_arguments(source.arguments) if source is not None else None
        for note in _note_calls(payload):
            if note.is_error:
                continue
            listed = Source(note.name, canonical_json(dict(note.arguments)))
            if source is not None:
                matches = note.name == source.name and listed.arguments_json == shown
            else:
                matches = self._prints(listed, fact)
            if matches:
                return ReadResultCall(note.index, 0, note.output_chars, note.output_chars)
        return None
