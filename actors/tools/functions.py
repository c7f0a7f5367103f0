"""Tools from typed Python functions.

::

    from actors.tools import tool

    @tool
    async def weather(city: str, days: int = 1) -> str:
        \"\"\"The forecast for a city.

        Args:
            city: the city's name
            days: how many days ahead (1 to 7)
        \"\"\"
        ...

The tool's name is the function's, its description the docstring's summary
(and body), and the JSON schema of its input comes from the signature through
pydantic (``pydantic.validate_call`` wrapped in a ``TypeAdapter``, the same
route the anthropic SDK's ``beta_tool`` helpers take, which wrap the function
in ``pydantic.validate_call``; pydantic is installed with the SDK): a pydantic
model of the parameters (``create_model``, extra arguments forbidden) gives
both the schema and the check. We use pydantic directly rather than the SDK's
helpers because those live in a private beta module, call sync functions on
the event loop and swallow the validation details, and because checking the
arguments apart from the call keeps a ``ValidationError`` raised inside the
function from passing for a bad argument; here a failure names the argument.
Parameter descriptions come from the docstring's ``Args:`` section
(``docstring_parser``, also an SDK dependency).

The arguments a model sends are validated against the signature before the
function body runs; a failure raises :class:`ToolArgumentError` naming each
bad argument, its value and what was expected (the executor turns it into an
error result the model sees). A sync function runs in a daemon thread of its
own with a stop flag set when the call ends (its timeout, a cancellation), which
its loops may check (:mod:`actors.tools.stopping`); an async one is awaited. A tool returns text (``str``),
a JSON value (dicts, lists, numbers, pydantic models) or a list of text content
blocks (``[{"type": "text", "text": ...}]``); image blocks in tool results are
not built yet and are refused with a clear error.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from actors.tools.registry import DEFAULT_TIMEOUT_S, Tool, ToolArgumentError, ToolContext, ToolFailed
from actors.tools.stopping import run_stoppable
from runtime.errors import ConfigError
from runtime.request.compiler import ToolSpec

if TYPE_CHECKING:
    # Imported where a tool is built or its output converted: importing the tools (and so the runtime) does not
    # import pydantic and docstring_parser.
    import docstring_parser
    import pydantic

MAX_SHOWN_VALUE = 80
"""Characters of a bad argument's value an error message quotes."""


def _describe_errors(tool_name: str, error: pydantic.ValidationError) -> str:
    parts = []
    for item in error.errors(include_url=False):
        where = ".".join(str(p) for p in item["loc"]) or "(arguments)"
        shown = repr(item.get("input"))
        if len(shown) > MAX_SHOWN_VALUE:
            shown = shown[:MAX_SHOWN_VALUE] + "..."
        if item["type"] == "missing_argument" or item["type"] == "missing":
            parts.append(f"argument {where!r} is required")
        else:
            msg = item["msg"]
            parts.append(f"argument {where!r}: {msg[:1].lower()}{msg[1:]}, got {shown}")
    return f"{tool_name}: " + "; ".join(parts)


def _text_blocks(value: Sequence[Any]) -> str | None:
    """The text of a list of content blocks, or None when ``value`` is not one."""
    if not value or not all(isinstance(b, Mapping) and isinstance(b.get("type"), str) for b in value):
        return None
    texts = []
    for block in value:
        kind = block["type"]
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind in ("image", "document"):
            raise ToolFailed(f"a tool result with {kind} blocks is not built yet; return text or JSON")
        else:
            return None
    return "\n".join(texts)


def tool_output(value: Any) -> Any:
    """A tool function's return value as a result body: text, or a JSON value."""
    if isinstance(value, str):
        return value
    import pydantic

    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, (list, tuple)):
        text = _text_blocks(value)
        if text is not None:
            return text
    return pydantic.TypeAdapter(Any).dump_python(value, mode="json")


def _description(func: Callable[..., Any], parsed: docstring_parser.Docstring) -> str:
    if not parsed.short_description:
        raise ConfigError(f"tool {func.__name__!r}: give the function a docstring (it is the tool's description)")
    if parsed.long_description:
        return f"{parsed.short_description}\n\n{parsed.long_description}"
    return parsed.short_description


def _arguments_model(func: Callable[..., Any], tool_name: str) -> type[pydantic.BaseModel]:
    """A pydantic model of the function's parameters (extra arguments forbidden)."""
    import pydantic

    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise ConfigError(f"tool {tool_name!r}: cannot resolve the parameter types ({exc})") from exc
    fields: dict[str, Any] = {}
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigError(f"tool {tool_name!r}: parameter {param.name!r} must be a plain keyword parameter")
        annotation = hints.get(param.name, Any)
        fields[param.name] = (annotation, ... if param.default is param.empty else param.default)
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    return pydantic.create_model(f"{tool_name}_arguments", __config__=config, **fields)


def _schema(model: type[pydantic.BaseModel], parsed: docstring_parser.Docstring) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    properties = schema.get("properties", {})
    for param in parsed.params:
        prop = properties.get(param.arg_name)
        if isinstance(prop, dict) and param.description and "description" not in prop:
            prop["description"] = param.description
    for prop in properties.values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    return schema


def function_tool(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> Tool:
    """A :class:`Tool` from a typed function (sync or async); see the module doc."""
    if not callable(func):
        raise ConfigError(f"function_tool: {func!r} is not a function")
    import docstring_parser
    import pydantic

    is_async = inspect.iscoroutinefunction(func)
    parsed = docstring_parser.parse(func.__doc__ or "")
    tool_name = name or func.__name__
    model = _arguments_model(func, tool_name)
    spec = ToolSpec.create(
        tool_name, description if description is not None else _description(func, parsed), _schema(model, parsed)
    )

    async def run(arguments: Mapping[str, Any], context: ToolContext) -> Any:
        try:
            checked = model.model_validate(dict(arguments))
        except pydantic.ValidationError as exc:
            raise ToolArgumentError(_describe_errors(tool_name, exc)) from None
        kwargs = {field: getattr(checked, field) for field in type(checked).model_fields}
        if is_async:
            value = await func(**kwargs)
        else:
            value = await run_stoppable(functools.partial(func, **kwargs), tool_name)
        return tool_output(value)

    return Tool(spec, run, timeout_s=timeout_s)


@overload
def tool(func: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout_s: float | None = DEFAULT_TIMEOUT_S
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=..., timeout_s=...)`` turns a typed function into a :class:`Tool`."""
    if func is not None:
        return function_tool(func, name=name, description=description, timeout_s=timeout_s)
    return functools.partial(function_tool, name=name, description=description, timeout_s=timeout_s)
