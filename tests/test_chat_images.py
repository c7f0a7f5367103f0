"""Images on the chat-completions wire: the documented scaling, the simulator's count, a vision run through the SDK."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from actors.images import scenario_registry
from runtime.config.loader import load_scenario
from runtime.errors import InputCeilingExceeded
from runtime.scenarios.run import run_scenario
from runtime.sim.chat.wire import read_chat_request
from runtime.sim.errors import SimAPIError
from runtime.values.chat_images import chat_image_tokens, chat_scaled

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "vision.toml"
FIGURES = SCENARIO.parent / "vision"


@pytest.mark.parametrize(
    ("size", "scaled", "tokens"),
    [
        ((1024, 1024), (768, 768), 765),  # the guide's example: 4 tiles
        ((2048, 4096), (768, 1536), 1105),  # the guide's example: 6 tiles
        ((100, 100), (100, 100), 255),  # never scaled up: one tile
        ((512, 512), (512, 512), 255),
        ((513, 512), (513, 512), 425),  # a pixel over the tile: two
        ((4096, 1024), (2048, 512), 765),  # fits 2,048 first; its short side is then under 768
    ],
)
def test_the_documented_scaling_and_tiles(size: tuple[int, int], scaled: tuple[int, int], tokens: int) -> None:
    assert chat_scaled(*size) == pytest.approx(scaled)
    assert chat_image_tokens(*size) == tokens


def test_a_size_that_is_no_image_is_refused() -> None:
    with pytest.raises(ValueError, match="0 x 5"):
        chat_image_tokens(0, 5)


def _image_request(data: bytes) -> dict:
    url = "data:image/png;base64," + base64.b64encode(data).decode()
    parts = [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": url}}]
    return {"model": "m", "messages": [{"role": "user", "content": parts}]}


def test_the_simulator_counts_an_image_by_the_chat_rule_not_by_its_base64() -> None:
    data = (FIGURES / "chart.png").read_bytes()  # 400 x 300: one tile
    request = read_chat_request(_image_request(data))
    (text, images), *_ = request.counted
    assert images == chat_image_tokens(400, 300) == 255
    assert base64.b64encode(data).decode()[:40] not in text
    assert base64.b64encode(data).decode()[:40] in request.segments[0]  # the cache still tells images apart


def test_an_unreadable_image_is_the_apis_400() -> None:
    with pytest.raises(SimAPIError, match="Could not process image"):
        read_chat_request(_image_request(b"not an image"))


@pytest.mark.anyio
async def test_the_vision_scenario_runs_on_the_openai_provider(tmp_path: Path) -> None:
    pytest.importorskip("openai")
    registry = scenario_registry(SCENARIO)
    scenario = load_scenario(SCENARIO, tool_names=registry.names())
    run = await run_scenario(scenario.evolve(provider=scenario.provider.with_kind("openai")), registry=registry)
    assert run.result.outcomes["look"].status == "ok"
    # Chat completions has no count endpoint: uncalibrated, the send decides on the family prior (1.37), and the
    # fold cannot bring look-small's last round (its 800 x 600 photo, 765 tokens by the chat rule) under 2,000.
    # It is refused, nothing sent (tests/test_chat_image_measure.py: nothing goes over by the server's count).
    small = run.result.outcomes["look-small"]
    assert small.status == "failed" and isinstance(small.error, InputCeilingExceeded)
    assert run.report["bytes_unrecoverable"] == 0
    assert run.report["rewrites"]["unexplained"] == 0
