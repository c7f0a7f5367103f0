"""The bench tools: documents and stages that carry facts, and the answer sink.

- ``read_doc(path, size, facts?)``: exactly ``size`` characters of
  deterministic text for ``path`` with one line per fact id in ``facts``
  (see :mod:`runtime.bench.facts`), placed at line starts spread evenly
  through the document, so a clip that keeps the head and the tail tends
  to cut them out.
- ``stage(n, key?, size)``: stage ``n`` of a staged job. Stage 1 needs no
  key; stage ``n > 1`` needs the key stage ``n - 1`` printed (the value of
  fact ``S<n-1>``) and fails the node when given anything else (the staged
  workload sets ``tool_errors = "fail"``; elsewhere the model is told). Its first
  line ends with the key of stage ``n`` (fact ``S<n>``); then ``size``
  characters of bulk.
- ``answer(fact, value)``: where the model states a recalled fact. It only
  acknowledges; the harness judges the answer.

:data:`BENCH_TOOLS` is the built-in registry with these three added; the
bench runs every workload with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.tools import (
    BUILTIN_TOOLS,
    Tool,
    ToolContext,
    ToolFailed,
    ToolRegistry,
    synthetic_text,
)
from runtime.bench.facts import VALUE_CHARS, check_fact_id, fact_line, fact_value
from runtime.request.compiler import ToolSpec

MAX_SIZE = 1_000_000
"""The largest ``size`` a bench tool produces, in characters."""

STAGE_FACT_PREFIX = "S"


def stage_fact(n: int) -> str:
    """The id of the fact stage ``n`` prints: its key, which stage ``n + 1`` needs."""
    return f"{STAGE_FACT_PREFIX}{n}"


def _size(arguments: Mapping[str, Any], tool: str) -> int:
    size = arguments.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_SIZE:
        raise ToolFailed(f"{tool}: size {size!r} is not an integer from 0 to {MAX_SIZE}")
    return size


def _facts(arguments: Mapping[str, Any], tool: str) -> tuple[str, ...]:
    facts = arguments.get("facts", [])
    if not isinstance(facts, list):
        raise ToolFailed(f"{tool}: facts {facts!r} is not a list of fact ids")
    seen: set[str] = set()
    for fact in facts:
        try:
            check_fact_id(fact)
        except ValueError as exc:
            raise ToolFailed(f"{tool}: {exc}") from None
        if fact in seen:
            raise ToolFailed(f"{tool}: fact {fact!r} is listed twice")
        seen.add(fact)
    return tuple(facts)


def document_text(path: str, size: int, facts: tuple[str, ...] = ()) -> str:
    """What ``read_doc`` returns: ``size`` characters with the facts' lines spread through."""
    lines = [fact_line(fact) for fact in facts]
    body_size = size - sum(len(line) for line in lines)
    if body_size < 0:
        raise ValueError(f"size {size} is too small for {len(facts)} fact line(s) of {size - body_size} characters")
    body = synthetic_text(path, body_size)
    pieces: list[str] = []
    cut = 0
    for i, line in enumerate(lines):
        target = (i + 1) * body_size // (len(lines) + 1)
        newline = body.find("\n", max(target, cut))
        at = body_size if newline < 0 else newline + 1
        pieces.append(body[cut:at])
        pieces.append(line)
        cut = at
    pieces.append(body[cut:])
    return "".join(pieces)


async def _read_doc(arguments: Mapping[str, Any], context: ToolContext) -> str:
    path = arguments.get("path")
    if not isinstance(path, str) or not path:
        raise ToolFailed(f"read_doc: path {path!r} is not a non-empty string")
    size = _size(arguments, "read_doc")
    facts = _facts(arguments, "read_doc")
    try:
        return document_text(path, size, facts)
    except ValueError as exc:
        raise ToolFailed(f"read_doc {path}: {exc}") from None


def stage_text(n: int, size: int) -> str:
    """What stage ``n`` returns once given the right key: its key on the first line, then the bulk."""
    return f"stage {n} complete; key for stage {n + 1}: {fact_line(stage_fact(n))}output:\n" + synthetic_text(
        f"stage-{n}", size
    )


def facts_printed(name: str, arguments: Mapping[str, Any]) -> tuple[str, ...]:
    """The facts a bench tool call prints: ``read_doc``'s ``facts``; stage ``n``'s key ``S<n>``.

    This is the task knowledge the reader policy has of its tools (which call
    to read back or run again for a fact it no longer sees).
    """
    if name == "read_doc":
        facts = arguments.get("facts")
        return tuple(f for f in facts if isinstance(f, str)) if isinstance(facts, list) else ()
    if name == "stage":
        n = arguments.get("n")
        return (stage_fact(n),) if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else ()
    return ()


async def _stage(arguments: Mapping[str, Any], context: ToolContext) -> str:
    n = arguments.get("n")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ToolFailed(f"stage: n {n!r} is not a positive integer")
    size = _size(arguments, "stage")
    if n > 1:
        key = arguments.get("key")
        if isinstance(key, Mapping) and set(key) == {"recall"}:
            raise ToolFailed(
                f"stage {n}: key {dict(key)!r} is a recall only the bench's reader resolves (run the file with "
                f"`foldline bench --workload FILE`); the model must send the key stage {n - 1} printed"
            )
        if key != fact_value(stage_fact(n - 1)):
            raise ToolFailed(f"stage {n}: key {key!r} is not the key stage {n - 1} printed (fact {stage_fact(n - 1)})")
    return stage_text(n, size)


async def _answer(arguments: Mapping[str, Any], context: ToolContext) -> str:
    fact = arguments.get("fact")
    try:
        check_fact_id(fact)
    except ValueError as exc:
        raise ToolFailed(f"answer: {exc}") from None
    value = arguments.get("value")
    if not isinstance(value, str) or not value or len(value) > 4 * VALUE_CHARS:
        raise ToolFailed(f"answer: value {value!r} for fact {fact} is not a short non-empty string")
    return f"noted: fact {fact} answered"


def _schema(properties: Mapping[str, Any], required: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required)}


READ_DOC = Tool(
    ToolSpec.create(
        "read_doc",
        "Read a document. Returns exactly `size` characters; `facts` names the fact lines it contains.",
        _schema(
            {
                "path": {"type": "string"},
                "size": {"type": "integer"},
                "facts": {"type": "array", "items": {"type": "string"}},
            },
            ("path", "size"),
        ),
    ),
    _read_doc,
)

STAGE = Tool(
    ToolSpec.create(
        "stage",
        "Run stage `n` of the job. Stage n > 1 needs `key`: the key stage n - 1 printed.",
        _schema(
            {"n": {"type": "integer"}, "key": {"type": "string"}, "size": {"type": "integer"}},
            ("n", "size"),
        ),
    ),
    _stage,
)

ANSWER = Tool(
    ToolSpec.create(
        "answer",
        "State the value of a fact you were asked to recall.",
        _schema({"fact": {"type": "string"}, "value": {"type": "string"}}, ("fact", "value")),
    ),
    _answer,
)


def bench_registry(base: ToolRegistry = BUILTIN_TOOLS) -> ToolRegistry:
    """``base`` with the bench tools added."""
    return base.with_tool(READ_DOC).with_tool(STAGE).with_tool(ANSWER)


BENCH_TOOLS = bench_registry()
"""The registry every bench run uses: the built-in tools plus the bench tools."""
