"""Tools from typed Python functions: name, description, schema, checked arguments, outputs."""

from __future__ import annotations

import json
import threading
from typing import Annotated, Literal

import anyio
import anyio.lowlevel
import pydantic
import pytest

from actors.tools import ToolArgumentError, ToolContext, ToolFailed, ToolRegistry, tool
from runtime.config import Profile
from runtime.errors import ConfigError

CONTEXT = ToolContext(node_id=None, branch_id="b")


@tool
async def forecast(
    city: str, days: Annotated[int, pydantic.Field(ge=1, le=7)] = 1, unit: Literal["C", "F"] = "C"
) -> str:
    """The weather forecast for a city.

    Longer text about the forecast.

    Args:
        city: the city's name
        days: how many days ahead
    """
    return f"{city}: sunny for {days} days ({unit})"


def test_name_description_and_schema_come_from_the_function() -> None:
    assert forecast.name == "forecast"
    assert forecast.spec.description == "The weather forecast for a city.\n\nLonger text about the forecast."
    schema = json.loads(forecast.spec.input_schema_json)
    assert schema == {
        "additionalProperties": False,
        "properties": {
            "city": {"description": "the city's name", "type": "string"},
            "days": {"default": 1, "description": "how many days ahead", "maximum": 7, "minimum": 1, "type": "integer"},
            "unit": {"default": "C", "enum": ["C", "F"], "type": "string"},
        },
        "required": ["city"],
        "type": "object",
    }


@pytest.mark.anyio
async def test_an_async_tool_is_awaited_with_checked_arguments() -> None:
    assert await forecast.func({"city": "Oslo", "days": 3}, CONTEXT) == "Oslo: sunny for 3 days (C)"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"days": 2}, "forecast: argument 'city' is required"),
        ({"city": "Oslo", "days": 9}, "forecast: argument 'days': input should be less than or equal to 7, got 9"),
        ({"city": "Oslo", "unit": "K"}, "forecast: argument 'unit': input should be 'C' or 'F', got 'K'"),
        ({"city": "Oslo", "when": "now"}, "forecast: argument 'when': extra inputs are not permitted, got 'now'"),
        ({"city": ["x" * 200]}, "forecast: argument 'city': input should be a valid string, got ['xxxxx"),
    ],
)
async def test_bad_arguments_are_refused_before_the_body_runs_naming_the_argument(
    arguments: dict, message: str
) -> None:
    ran: list[str] = []

    @tool
    def probe(city: str, days: Annotated[int, pydantic.Field(ge=1, le=7)] = 1, unit: Literal["C", "F"] = "C") -> str:
        """Records that it ran."""
        ran.append(city)
        return "ran"

    with pytest.raises(ToolArgumentError) as caught:
        await forecast.func(arguments, CONTEXT)
    assert str(caught.value).startswith(message)
    assert len(str(caught.value)) < 400  # a long value is cut
    with pytest.raises(ToolArgumentError):
        await probe.func(arguments, CONTEXT)
    assert ran == []


@pytest.mark.anyio
async def test_a_sync_tool_runs_in_a_worker_thread() -> None:
    threads: list[int] = []

    @tool
    def where() -> str:
        """Say which thread runs it."""
        threads.append(threading.get_ident())
        return "here"

    assert await where.func({}, CONTEXT) == "here"
    assert threads and threads[0] != threading.get_ident()


class Point(pydantic.BaseModel):
    x: int
    y: int


@pytest.mark.anyio
async def test_outputs_text_json_models_and_text_blocks() -> None:
    @tool
    def as_json() -> dict:
        """JSON."""
        return {"b": [1, 2], "a": None}

    @tool
    def as_model() -> Point:
        """A model."""
        return Point(x=1, y=2)

    @tool
    def as_blocks() -> list:
        """Text blocks."""
        return [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]

    @tool
    def as_image() -> list:
        """An image block."""
        return [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]

    assert await as_json.func({}, CONTEXT) == {"b": [1, 2], "a": None}
    assert await as_model.func({}, CONTEXT) == {"x": 1, "y": 2}
    assert await as_blocks.func({}, CONTEXT) == "one\ntwo"
    with pytest.raises(ToolFailed, match="a tool result with image blocks is not built yet"):
        await as_image.func({}, CONTEXT)


@pytest.mark.anyio
async def test_a_validation_error_raised_inside_the_function_is_the_functions_own_error() -> None:
    @tool
    def inner(n: int) -> str:
        """Builds a bad model inside."""
        Point(x="not a number", y=n)  # type: ignore[arg-type]
        return "unreachable"

    with pytest.raises(pydantic.ValidationError):
        await inner.func({"n": 1}, CONTEXT)


def test_a_function_without_a_docstring_or_with_positional_only_parameters_is_refused() -> None:
    def bare(x: int) -> int:
        return x

    with pytest.raises(ConfigError, match="tool 'bare': give the function a docstring"):
        tool(bare)
    assert tool(name="named", description="Given.")(bare).spec.description == "Given."

    def positional(x: int, /) -> int:
        """Doc."""
        return x

    with pytest.raises(ConfigError, match="parameter 'x' must be a plain keyword parameter"):
        tool(positional)


def test_decorator_options_and_registry_mixing() -> None:
    @tool(name="slow_one", timeout_s=2.5)
    async def slow() -> str:
        """Sleeps a little."""
        await anyio.lowlevel.checkpoint()
        return "ok"

    assert slow.name == "slow_one" and slow.timeout_s == 2.5
    registry = ToolRegistry().with_tools([slow, forecast])
    assert registry.names() == {"slow_one", "forecast"}
    profile = Profile(tools=[forecast, "synthetic_read"])
    assert [s.name for s in registry.with_tools(ToolRegistry()).specs([forecast])] == ["forecast"]
    assert registry.resolve(profile.tools).tools["forecast"] is forecast
    with pytest.raises(ConfigError, match='Profile.tools\\[1\\]: "forecast" is listed twice'):
        Profile(tools=[forecast, "forecast"])
