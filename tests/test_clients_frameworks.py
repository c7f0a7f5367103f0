"""Third-party frameworks against ``foldline sim`` with no scenario: langchain-anthropic and pydantic-ai.

Each gets a plain call, a tool round trip, a streamed call, and reads the
cache fields on a second call with a marked system prompt. The frameworks
come from the ``clients`` extra (``pip install -e '.[clients]'``); without
it these tests are skipped and say so. Both frameworks' async paths are
asyncio-only, so the async calls here run on asyncio.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Literal

import pytest

from tests.sim_process import SimProcess, foldline_sim

NOT_INSTALLED = "the 'clients' extra is not installed (pip install -e '.[clients]')"
langchain_anthropic = pytest.importorskip("langchain_anthropic", reason=NOT_INSTALLED)
pydantic_ai = pytest.importorskip("pydantic_ai", reason=NOT_INSTALLED)

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field
from pydantic_ai import Agent, NativeOutput
from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
from pydantic_ai.providers.anthropic import AnthropicProvider

pytestmark = pytest.mark.slow

MODEL = "claude-sonnet-4-6"  # minimum cacheable prefix: 1,024 simulator tokens
INSTRUCTIONS = "You are a weather assistant. Answer briefly and name the city. " * 120  # well over 1,024 tokens


@pytest.fixture(scope="module")
def sim() -> Iterator[SimProcess]:
    with foldline_sim() as process:
        yield process


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny, 21 C in {city}"


# --- langchain-anthropic ------------------------------------------------------------------------------------------


def chat(sim: SimProcess) -> langchain_anthropic.ChatAnthropic:
    return langchain_anthropic.ChatAnthropic(
        model=MODEL, base_url=sim.url, api_key="sk-sim", max_tokens=300, max_retries=0
    )


def test_langchain_plain_call(sim: SimProcess) -> None:
    reply = chat(sim).invoke("Hello there")
    assert reply.content == "Simulated answer to: Hello there"
    assert reply.usage_metadata["input_tokens"] > 0 and reply.usage_metadata["output_tokens"] > 0


def test_langchain_tool_round_trip(sim: SimProcess) -> None:
    weather = tool(get_weather)
    bound = chat(sim).bind_tools([weather])
    messages = [HumanMessage("What is the weather in Paris?")]
    call = bound.invoke(messages)
    assert [(c["name"], c["args"]) for c in call.tool_calls] == [("get_weather", {"city": "<city>"})]
    result = weather.invoke(call.tool_calls[0]["args"])
    messages += [call, ToolMessage(result, tool_call_id=call.tool_calls[0]["id"])]
    answer = bound.invoke(messages)
    assert answer.content == f"Simulated answer after 1 tool result(s): {result}"


def test_langchain_streamed_call(sim: SimProcess) -> None:
    pieces = [chunk.content for chunk in chat(sim).stream("Stream this answer to me please")]
    assert len([p for p in pieces if p]) > 1
    assert "".join(p for p in pieces if isinstance(p, str)) == "Simulated answer to: Stream this answer to me please"

    async def streamed() -> str:
        return "".join([c.content async for c in chat(sim).astream("And async?") if isinstance(c.content, str)])

    assert asyncio.run(streamed()) == "Simulated answer to: And async?"


def test_langchain_reads_the_cache_fields_on_the_second_call(sim: SimProcess) -> None:
    system = SystemMessage(content=[{"type": "text", "text": INSTRUCTIONS, "cache_control": {"type": "ephemeral"}}])
    llm = langchain_anthropic.ChatAnthropic(
        model=MODEL, base_url=sim.url, api_key="sk-langchain-cache", max_tokens=300, max_retries=0
    )
    first = llm.invoke([system, HumanMessage("hi")]).usage_metadata["input_token_details"]
    second = llm.invoke([system, HumanMessage("hi again")]).usage_metadata["input_token_details"]
    # langchain-anthropic reports a write by its lifetime (the 5m/1h split), not again as cache_creation.
    assert first["cache_read"] == 0 and first["ephemeral_5m_input_tokens"] > 1024
    assert second["cache_read"] == first["ephemeral_5m_input_tokens"] and second["ephemeral_5m_input_tokens"] == 0


# --- pydantic-ai --------------------------------------------------------------------------------------------------


def agent(sim: SimProcess, key: str = "sk-sim", **options: object) -> Agent:
    model = AnthropicModel(MODEL, provider=AnthropicProvider(base_url=sim.url, api_key=key))
    return Agent(model, **options)  # type: ignore[arg-type]


def test_pydantic_ai_plain_call(sim: SimProcess) -> None:
    result = agent(sim).run_sync("Hello there")
    assert result.output == "Simulated answer to: Hello there"
    assert result.usage.input_tokens > 0 and result.usage.requests == 1


def test_pydantic_ai_tool_round_trip(sim: SimProcess) -> None:
    weather_agent = agent(sim, tools=[get_weather])
    result = weather_agent.run_sync("What is the weather in Paris?")
    assert result.output == "Simulated answer after 1 tool result(s): sunny, 21 C in <city>"
    assert (result.usage.requests, result.usage.tool_calls) == (2, 1)


class Forecast(BaseModel):
    city: str
    celsius: int = Field(ge=-60, le=60)
    sky: Literal["clear", "cloudy"]


def test_pydantic_ai_native_output_gets_a_schema_valid_value(sim: SimProcess) -> None:
    result = agent(sim, output_type=NativeOutput(Forecast)).run_sync("Forecast for Paris?")
    assert result.output == Forecast(city="<city>", celsius=-60, sky="clear")
    assert result.usage.requests == 1


def test_pydantic_ai_streamed_call(sim: SimProcess) -> None:
    async def streamed() -> tuple[list[str], str]:
        async with agent(sim).run_stream("Stream this answer to me please") as run:
            pieces = [piece async for piece in run.stream_text(delta=True, debounce_by=None)]
            return pieces, await run.get_output()

    pieces, output = asyncio.run(streamed())
    assert len(pieces) > 1 and "".join(pieces) == output == "Simulated answer to: Stream this answer to me please"


def test_pydantic_ai_reads_the_cache_fields_on_the_second_call(sim: SimProcess) -> None:
    settings = AnthropicModelSettings(anthropic_cache_instructions=True)
    cached = agent(sim, "sk-pydantic-cache", instructions=INSTRUCTIONS, model_settings=settings)
    first = cached.run_sync("hi").usage
    second = cached.run_sync("hi again").usage
    assert first.cache_read_tokens == 0 and first.cache_write_tokens > 1024
    assert second.cache_read_tokens == first.cache_write_tokens and second.cache_write_tokens == 0
