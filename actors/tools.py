"""Tools: a registry of named async callables, and the built-in ones.

A tool is a :class:`~runtime.compiler.ToolSpec` (what the model sees) and an
async function ``(arguments, context) -> str | JSON value``. Scenario files can
only name tools from a registry; nothing in a scenario is executed as code.

Built-ins:

- ``read_file(path, size?)``: deterministic synthetic text, the same for the
  same arguments, exactly ``size`` characters (default 2,000..6,000 chosen by
  the path), so a scenario can produce, say, a 100,045-character result.
- ``search(query, size?)``: deterministic synthetic search hits.
- ``fail(message)``: raises :class:`ToolFailed` (for failure paths).
- ``spawn(node)``: starts a child node declared in the flow (handled by the
  flow scheduler through :attr:`ToolContext.spawn`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import attrs

from runtime.compiler import ToolSpec
from runtime.errors import ConfigError, FoldlineError


class ToolFailed(FoldlineError):
    """A tool raised; the node running it fails with this error."""


class ToolArgumentError(ToolFailed):
    """The model's arguments to a tool are out of bounds or malformed.

    Tool arguments are untrusted (the model chooses them): the call is answered
    with an error result naming the argument, the value and the bound, which
    the model sees and can correct; the node goes on.
    """


MAX_SYNTHETIC_CHARS = 2_000_000
"""The most characters ``read_file`` or ``search`` returns (``size`` above it is refused)."""

MAX_TEXT_ARGUMENT_CHARS = 4_096
"""The longest ``path``, ``query``, ``message`` or ``node`` argument a built-in tool takes."""


@attrs.frozen
class ToolContext:
    """What a running tool may use: who calls it, and the flow's spawn hook."""

    node_id: str | None
    branch_id: str
    spawn: Callable[[str], Awaitable[str]] | None = None


ToolFunc = Callable[[Mapping[str, Any], ToolContext], Awaitable[Any]]


@attrs.frozen
class Tool:
    spec: ToolSpec
    func: ToolFunc

    @property
    def name(self) -> str:
        return self.spec.name


def _tool_map(tools: Mapping[str, Tool]) -> dict[str, Tool]:
    return dict(tools)


@attrs.frozen
class ToolRegistry:
    """An immutable name -> tool mapping; ``with_tool`` returns a new registry."""

    tools: Mapping[str, Tool] = attrs.field(factory=dict, converter=_tool_map)

    def with_tool(self, tool: Tool) -> ToolRegistry:
        return ToolRegistry({**self.tools, tool.name: tool})

    def names(self) -> frozenset[str]:
        return frozenset(self.tools)

    def get(self, name: str) -> Tool:
        try:
            return self.tools[name]
        except KeyError:
            raise ConfigError(
                f"unknown tool {name!r}; the registry has: {', '.join(sorted(self.tools)) or 'none'}"
            ) from None

    def specs(self, names: Iterable[str]) -> tuple[ToolSpec, ...]:
        return tuple(self.get(n).spec for n in names)


# -- deterministic synthetic text ----------------------------------------------------

_WORDS = ["actor", "branch", "cache", "ceiling", "clone", "commit", "context", "delivered", "digest", "epoch", "fold", "ledger", "mark", "measure", "note", "prefix", "record", "refusal", "restore", "round", "scale", "segment", "signal", "stable", "summary", "tail", "tier", "token", "view", "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa"]


def synthetic_text(seed: str, size: int) -> str:
    """Exactly ``size`` characters of line-structured text, a pure function of ``seed``."""
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    rng = random.Random(hashlib.sha256(seed.encode("utf-8")).digest())
    lines: list[str] = []
    total = 0
    n = 0
    while total < size:
        n += 1
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14)))
        line = f"{seed} {n:05d}: {words} {rng.randint(0, 99999)}\n"
        lines.append(line)
        total += len(line)
    return "".join(lines)[:size]


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else f"an integer of {value.bit_length()} bits"
    return text if len(text) <= 80 else text[:77] + "..."


def _check_keys(tool: str, arguments: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(f"{tool}: the arguments must be an object, got {_shown(arguments)}")
    for key in arguments:
        if key not in allowed:
            raise ToolArgumentError(f"{tool}: unknown argument {_shown(key)}; it takes {', '.join(allowed)}")


def _int_arg(tool: str, arguments: Mapping[str, Any], key: str, default: int, maximum: int) -> int:
    value = arguments.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise ToolArgumentError(
            f"{tool}: argument {key!r} must be an integer from 0 to {maximum}, got {_shown(value)}"
        )
    return value


def _text_arg(tool: str, arguments: Mapping[str, Any], key: str, *, required: bool, default: str = "") -> str:
    if key not in arguments:
        if required:
            raise ToolArgumentError(f"{tool}: missing argument {key!r}")
        return default
    value = arguments[key]
    if not isinstance(value, str) or (required and not value):
        raise ToolArgumentError(f"{tool}: argument {key!r} must be a non-empty string, got {_shown(value)}")
    if len(value) > MAX_TEXT_ARGUMENT_CHARS:
        raise ToolArgumentError(
            f"{tool}: argument {key!r} is {len(value)} characters, above the bound of {MAX_TEXT_ARGUMENT_CHARS}"
        )
    return value


async def _read_file(arguments: Mapping[str, Any], context: ToolContext) -> str:
    _check_keys("read_file", arguments, ("path", "size"))
    path = _text_arg("read_file", arguments, "path", required=True)
    default = 2000 + int(hashlib.sha256(path.encode()).hexdigest(), 16) % 4001
    return synthetic_text(path, _int_arg("read_file", arguments, "size", default, MAX_SYNTHETIC_CHARS))


async def _search(arguments: Mapping[str, Any], context: ToolContext) -> str:
    _check_keys("search", arguments, ("query", "size"))
    query = _text_arg("search", arguments, "query", required=False)
    return synthetic_text("search:" + query, _int_arg("search", arguments, "size", 1500, MAX_SYNTHETIC_CHARS))


async def _fail(arguments: Mapping[str, Any], context: ToolContext) -> str:
    _check_keys("fail", arguments, ("message",))
    raise ToolFailed(_text_arg("fail", arguments, "message", required=False, default="the fail tool was called"))


async def _spawn(arguments: Mapping[str, Any], context: ToolContext) -> str:
    _check_keys("spawn", arguments, ("node",))
    node = arguments.get("node")
    if not isinstance(node, str) or not node or len(node) > MAX_TEXT_ARGUMENT_CHARS:
        raise ToolArgumentError(f"spawn: argument 'node' must name a child node, got {_shown(node)}")
    if context.spawn is None:
        raise ToolFailed("spawn is only available to a node running in a flow")
    return await context.spawn(node)


def _schema(**props: str) -> dict[str, Any]:
    required = [k for k, v in props.items() if not v.endswith("?")]
    return {
        "type": "object",
        "properties": {k: {"type": v.rstrip("?")} for k, v in props.items()},
        "required": required,
    }


BUILTIN_TOOLS = ToolRegistry(
    {
        t.name: t
        for t in (
            Tool(
                ToolSpec.create(
                    "read_file",
                    "Read a file and return its text. `size` (optional) is the number of characters returned.",
                    _schema(path="string", size="integer?"),
                ),
                _read_file,
            ),
            Tool(
                ToolSpec.create("search", "Search the corpus; returns matching lines.", _schema(query="string", size="integer?")),
                _search,
            ),
            Tool(ToolSpec.create("fail", "Always fails (for testing failure paths).", _schema(message="string?")), _fail),
            Tool(
                ToolSpec.create(
                    "spawn",
                    "Start a child node of this flow by its id; the child starts from a copy of this conversation.",
                    _schema(node="string"),
                ),
                _spawn,
            ),
        )
    }
)
