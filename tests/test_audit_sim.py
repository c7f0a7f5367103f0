"""Hostile bodies at the simulated server: each gets the API's 400 naming the field, never a 500.

Found by an outside audit that mutated every field of a full Messages request
(and of a chat-completions request) to values of the wrong type: the server
answered these with its 500 "simulated server bug" instead of a 400.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest

from runtime.scripted.default_model import DefaultModel
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.admin import Admin
from runtime.sim.clock import ManualClock
from runtime.sim.server import SimConfig, SimServer, serve_simulator

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-5-5"
HEADERS = {
    "x-api-key": "k",
    "authorization": "Bearer k",
    "content-type": "application/json",
    "anthropic-version": "2023-06-01",
}
PATHS = ("/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions")


@asynccontextmanager
async def running() -> AsyncIterator[SimServer]:
    async with serve_simulator(
        SimConfig(), PolicyRegistry(default=DefaultModel(calls="one")), anyio.current_time
    ) as sim:
        yield sim


async def post(sim: SimServer, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    async with httpx2.AsyncClient(base_url=sim.base_url, timeout=30) as client:
        response = await client.post(path, content=body, headers=HEADERS)
    return response.status_code, response.json()


def create(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], **extra}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("body", "why"),
    [
        (
            b'{"model": "claude-haiku-5-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi \\ud800"}]}',
            "a string holds the lone surrogate \\ud800",
        ),
        (
            b'{"model": "claude-haiku-5-5", "max_tokens": 10, "temperature": 1e400, "messages": []}',
            "the number 1e400 is out of range",
        ),
    ],
    ids=["lone-surrogate", "number-beyond-a-double"],
)
async def test_a_lone_surrogate_or_a_number_beyond_a_double_is_a_400_naming_it(
    path: str, body: bytes, why: str
) -> None:
    async with running() as sim:
        status, envelope = await post(sim, path, body)
    assert status == 400, envelope
    assert envelope["error"]["type"] == "invalid_request_error"
    assert envelope["error"]["message"] == f"request body: not valid JSON ({why})"


@pytest.mark.parametrize("ttl", [[], {}, ["1h"], {"a": 1}])
@pytest.mark.parametrize(
    ("where", "build"),
    [
        ("system.0.cache_control", lambda mark: create(system=[{"type": "text", "text": "s", "cache_control": mark}])),
        (
            "tools.0.cache_control",
            lambda mark: create(tools=[{"name": "t", "input_schema": {"type": "object"}, "cache_control": mark}]),
        ),
        ("cache_control", lambda mark: create(cache_control=mark)),
    ],
)
async def test_a_cache_control_ttl_of_the_wrong_type_is_a_400_naming_its_path(where: str, build: Any, ttl: Any) -> None:
    async with running() as sim:
        status, envelope = await post(
            sim, "/v1/messages", json.dumps(build({"type": "ephemeral", "ttl": ttl})).encode()
        )
    assert status == 400, envelope
    assert envelope["error"]["message"] == f"{where}.ttl: Input should be '5m' or '1h', got {ttl!r}"


@pytest.mark.parametrize("name", [[], {}, ["t"], {"name": "t"}])
async def test_a_tool_choice_name_of_the_wrong_type_is_a_400_naming_it(name: Any) -> None:
    tools = [{"name": "t", "input_schema": {"type": "object"}}]
    body = create(tools=tools, tool_choice={"type": "tool", "name": name})
    async with running() as sim:
        status, envelope = await post(sim, "/v1/messages", json.dumps(body).encode())
    assert status == 400, envelope
    assert envelope["error"]["message"] == f"tool_choice.name: {name!r} is not the name of a tool in 'tools'"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"seconds": 1e308}', "seconds: 1e+308 would move the clock from 1000.0 past the year 9999"),
        (b'{"seconds": 99999999999999999999999999}', "seconds: 1e+26 would move the clock from 1000.0 past"),
        (b'{"seconds": 1, "sconds": 2}', "sconds: Extra inputs are not permitted"),
    ],
)
async def test_the_virtual_clock_stays_a_date_and_its_body_has_one_key(body: bytes, message: str) -> None:
    clock = ManualClock(now=1000.0)
    async with serve_simulator(
        SimConfig(), PolicyRegistry(default=DefaultModel(calls="one")), clock, admin=Admin(clock)
    ) as sim:
        status, envelope = await post(sim, "/_foldline/clock/advance", body)
    assert status == 400, envelope
    assert envelope["error"]["message"].startswith(message)
    assert clock.now == 1000.0  # before: 1e308, and chat completions' `created` a 309-digit integer
