"""The model table's rows for claude-sonnet-4-6 and claude-opus-4-8, read from Anthropic's own model pages.

Each page's header gives "Context window: 1M tokens · Max output: 128K tokens"
(``runtime/data/models.toml`` names the page). The simulator holds requests to
both limits, through the real SDK over HTTP; asyncio and trio.
"""

from __future__ import annotations

import anthropic
import pytest
from sdk_sim import default_model_client

from runtime.models.limits import default_model_table

MODELS = ("claude-sonnet-4-6", "claude-opus-4-8")


@pytest.mark.parametrize("model", MODELS)
def test_the_rows_hold_the_pages_figures_and_name_them(model: str) -> None:
    table = default_model_table()
    assert (table.context_window(model), table.max_output_tokens(model)) == (1_000_000, 128_000)
    limits = table.limits(model)
    assert (
        limits is not None
        and "platform.claude.com/docs/" in limits.source
        and model.replace("claude-", "") in limits.source
    )


@pytest.mark.anyio
@pytest.mark.parametrize("model", MODELS)
async def test_the_simulator_holds_max_tokens_to_the_output_limit(model: str) -> None:
    ask = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    async with default_model_client() as (_, sdk):
        client = sdk.with_options(timeout=60.0)  # a set timeout: the SDK lets a non-streamed 128K-token ask through
        reply = await client.messages.create(max_tokens=128_000, **ask)  # type: ignore[call-overload]
        assert reply.stop_reason == "end_turn"
        with pytest.raises(anthropic.BadRequestError) as raised:
            await client.messages.create(max_tokens=128_001, **ask)  # type: ignore[call-overload]
    assert "max_tokens: 128001 > 128000, which is the maximum allowed" in raised.value.message
