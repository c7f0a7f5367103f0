"""Tools: a registry of named async callables, and the built-in ones.

A tool is a :class:`~runtime.request.compiler.ToolSpec` (what the model sees) and an
async function ``(arguments, context) -> str | JSON value``. Scenario files can
only name tools from a registry; nothing in a scenario is executed as code.
Tools made from typed Python functions are in :mod:`actors.tools.functions`,
the real workspace tools (``read_file``, ``list_files``, ``grep``) in
:mod:`actors.tools.workspace`, and how a round's calls run in
:mod:`actors.tools.executor`.

Built-ins:

- ``synthetic_read(path, size?)``: deterministic synthetic text (no file is
  read), the same for the same arguments, exactly ``size`` characters
  (default 2,000..6,000 chosen by the path), so a scenario can produce, say,
  a 100,045-character result.
- ``synthetic_search(query, size?)``: deterministic synthetic search hits.
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

from runtime.errors import ConfigError, FoldlineError
from runtime.request.compiler import ToolSpec
from runtime.values.image_rules import MESSAGES_IMAGES, ImageRule


class ToolFailed(FoldlineError):
    """A tool refused its call. Under ``tool_errors = "model"`` (the default) the
    message goes back to the model as an error result; under ``"fail"`` the
    node running it fails with this error."""


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
    """What a running tool may use: who calls it, the flow's spawn hook, the wire's image rule, the scrubber.

    ``image_rule`` is the rule the provider in use counts an image by
    (:func:`runtime.contract.provider.image_rule_of`), so a tool that states an
    image's tokens (``read_image``) states what this run's wire charges.
    """

    node_id: str | None
    branch_id: str
    spawn: Callable[[str], Awaitable[str]] | None = None
    image_rule: ImageRule = MESSAGES_IMAGES
    scrub: Callable[[str], str] | None = attrs.field(default=None, repr=False)
    """Removes the provider's API key (and its pieces) from a text; the executor passes every text a
    tool returns or raises through it (:func:`runtime.contract.provider.scrubber_of`)."""


ToolFunc = Callable[[Mapping[str, Any], ToolContext], Awaitable[Any]]


DEFAULT_TIMEOUT_S = 60.0
"""How long one tool call may run before it becomes an error result."""

DEFAULT_MAX_CONCURRENT = 8
"""How many calls of one response run at once."""


@attrs.frozen
class Tool:
    """A tool: what the model sees (``spec``) and the function that runs a call.

    ``timeout_s`` bounds one call (None: no bound, for tools such as ``spawn``
    whose duration is the flow's business). An ``ordered`` tool acts on the
    branch or the flow (``spawn``): it runs at its place in the response, after
    the results of the calls before it were appended, never concurrently.
    """

    spec: ToolSpec
    func: ToolFunc
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    ordered: bool = False

    @property
    def name(self) -> str:
        return self.spec.name


def _tool_map(tools: Mapping[str, Tool]) -> dict[str, Tool]:
    return dict(tools)


@attrs.frozen
class ToolRegistry:
    """An immutable name -> tool mapping; ``with_tool`` returns a new registry."""

    tools: Mapping[str, Tool] = attrs.field(factory=dict, converter=_tool_map)
    max_concurrent: int = DEFAULT_MAX_CONCURRENT
    """How many calls of one response run at once."""

    def __attrs_post_init__(self) -> None:
        if isinstance(self.max_concurrent, bool) or not isinstance(self.max_concurrent, int) or self.max_concurrent < 1:
            raise ConfigError(f"ToolRegistry.max_concurrent: {self.max_concurrent!r} is not a positive integer")

    def with_tool(self, tool: Tool) -> ToolRegistry:
        return attrs.evolve(self, tools={**self.tools, tool.name: tool})

    def with_tools(self, tools: Iterable[Tool] | ToolRegistry) -> ToolRegistry:
        """A new registry with ``tools`` added (a tool of the same name is replaced)."""
        added = tools.tools.values() if isinstance(tools, ToolRegistry) else tools
        return attrs.evolve(self, tools={**self.tools, **{t.name: t for t in added}})

    def names(self) -> frozenset[str]:
        return frozenset(self.tools)

    def get(self, name: str) -> Tool:
        try:
            return self.tools[name]
        except KeyError:
            raise ConfigError(
                f"unknown tool {name!r}; the registry has: {', '.join(sorted(self.tools)) or 'none'}"
            ) from None

    def specs(self, names: Iterable[str | Tool]) -> tuple[ToolSpec, ...]:
        """The specs of ``names`` in order; a :class:`Tool` given instead of a name is its own spec."""
        return tuple(n.spec if isinstance(n, Tool) else self.get(n).spec for n in names)

    def resolve(self, names: Iterable[str | Tool]) -> ToolRegistry:
        """This registry with the :class:`Tool` objects among ``names`` added (a profile's own tools)."""
        own = [n for n in names if isinstance(n, Tool)]
        return self.with_tools(own) if own else self


# -- deterministic synthetic text ----------------------------------------------------

_WORDS = [
    "actor",
    "branch",
    "cache",
    "ceiling",
    "clone",
    "commit",
    "context",
    "delivered",
    "digest",
    "epoch",
    "fold",
    "ledger",
    "mark",
    "measure",
    "note",
    "prefix",
    "record",
    "refusal",
    "restore",
    "round",
    "scale",
    "segment",
    "signal",
    "stable",
    "summary",
    "tail",
    "tier",
    "token",
    "view",
    "alpha",
    "bravo",
    "charlie",
    "delta",
    "echo",
    "foxtrot",
    "golf",
    "hotel",
    "india",
    "juliet",
    "kilo",
    "lima",
    "mike",
    "november",
    "oscar",
    "papa",
]


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
    text = (
        repr(value)
        if not isinstance(value, int) or value.bit_length() < 200
        else f"an integer of {value.bit_length()} bits"
    )
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
        raise ToolArgumentError(f"{tool}: argument {key!r} must be an integer from 0 to {maximum}, got {_shown(value)}")
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


async def _synthetic_read(arguments: Mapping[str, Any], context: ToolContext) -> str:
    _check_keys("synthetic_read", arguments, ("path", "size"))
    path = _text_arg("synthetic_read", arguments, "path", required=True)
    default = 2000 + int(hashlib.sha256(path.encode()).hexdigest(), 16) % 4001
    return synthetic_text(path, _int_arg("synthetic_read", arguments, "size", default, MAX_SYNTHETIC_CHARS))


async def _synthetic_search(arguments: Mapping[str, Any], context: ToolContext) -> str:
    _check_keys("synthetic_search", arguments, ("query", "size"))
    query = _text_arg("synthetic_search", arguments, "query", required=False)
    return synthetic_text("search:" + query, _int_arg("synthetic_search", arguments, "size", 1500, MAX_SYNTHETIC_CHARS))


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
                    "synthetic_read",
                    "Read a file and return its text. `size` (optional) is the number of characters returned.",
                    _schema(path="string", size="integer?"),
                ),
                _synthetic_read,
            ),
            Tool(
                # The descriptions are the ones the synthetic tools had as read_file and
                # search, so a migrated scenario's requests differ only by the tool name.
                ToolSpec.create(
                    "synthetic_search",
                    "Search the corpus; returns matching lines.",
                    _schema(query="string", size="integer?"),
                ),
                _synthetic_search,
            ),
            Tool(
                ToolSpec.create("fail", "Always fails (for testing failure paths).", _schema(message="string?")), _fail
            ),
            Tool(
                ToolSpec.create(
                    "spawn",
                    "Start a child node of this flow by its id; the child starts from a copy of this conversation.",
                    _schema(node="string"),
                ),
                _spawn,
                timeout_s=None,
                ordered=True,
            ),
        )
    }
)
