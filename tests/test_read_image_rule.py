"""``read_image`` states an image's tokens by the rule of the provider in use (issue 18).

A 100 x 100 image costs 14 tokens by the Messages API's rule and 255 by the
chat-completions rule (85 plus one 512-pixel tile of 170): the tool's result
text says which the run's wire will charge. Checked on the tool itself, and
in runs on both providers (the scripted Messages provider, and the openai
provider over the official SDK to the simulator's chat face), where the text
is read from what the server was sent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from support import ProviderWrapper, calls, iterative, node, text

from actors.images import read_image_tool
from actors.tools import BUILTIN_TOOLS, ToolContext
from runtime.config import Profile
from runtime.flows.flow import Flow
from runtime.providers.scripted import ScriptedProvider
from runtime.runtime import Runtime
from runtime.scripted.policies import PolicyRegistry, ScriptPolicy
from runtime.sim.clock import ManualClock
from runtime.values.chat_images import chat_image_tokens
from runtime.values.image_rules import CHAT_IMAGES, MESSAGES_IMAGES
from runtime.values.images import image_tokens

openai = pytest.importorskip("openai")

from openai_sim import chat_simulated  # noqa: E402
from test_chat_image_measure import png  # noqa: E402

SIZES = {"small.png": (100, 100), "wide.png": (1_600, 400)}


def _figures(root: Path) -> None:
    for name, (w, h) in SIZES.items():
        (root / name).write_bytes(png(w, h))


def _stated(text: str, name: str) -> int:
    line = next(line for line in text.splitlines() if line.startswith(name + ":"))
    return int(line.rsplit("~", 1)[1].removesuffix(" tokens"))


def test_the_rules_disagree_on_these_sizes() -> None:
    for w, h in SIZES.values():  # otherwise the tests below could not tell the rules apart
        assert image_tokens(w, h) != chat_image_tokens(w, h)
    assert (image_tokens(100, 100), chat_image_tokens(100, 100)) == (14, 255)


@pytest.mark.anyio
@pytest.mark.parametrize("rule", [MESSAGES_IMAGES, CHAT_IMAGES], ids=lambda r: r.name)
async def test_the_tool_states_each_images_tokens_by_the_contexts_rule(tmp_path: Path, rule: Any) -> None:
    _figures(tmp_path)
    tool = read_image_tool(tmp_path)
    output = await tool.func({"paths": list(SIZES)}, ToolContext(node_id="n", branch_id="b", image_rule=rule))
    for name, (w, h) in SIZES.items():
        assert _stated(output.text, name) == rule.tokens(w, h)


@pytest.mark.anyio
async def test_a_context_without_a_rule_states_the_messages_rule(tmp_path: Path) -> None:
    _figures(tmp_path)
    output = await read_image_tool(tmp_path).func({"path": "small.png"}, ToolContext(node_id=None, branch_id="b"))
    assert _stated(output.text, "small.png") == 14


def _result_text(messages: list[dict[str, Any]]) -> str:
    """The read_image result's text in a Messages payload's or a chat body's messages."""
    for message in messages:
        if message.get("role") == "tool":
            return str(message["content"])
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                return "".join(p["text"] for p in block["content"] if p.get("type") == "text")
    raise AssertionError("no read_image result was sent")


@attrs.define(eq=False)
class Recording(ProviderWrapper):
    """Keeps the Messages payload of each attempt."""

    sent: list[dict[str, Any]] = attrs.field(factory=list)

    async def send(self, request: Any, *, node_id: str | None) -> Any:
        self.sent.append(request.payload())
        return await self.inner.send(request, node_id=node_id)


SCRIPT = [calls(("read_image", {"paths": list(SIZES)})), text("Two black figures.")]
PROFILE = Profile(system="You look at figures.", tools=("read_image",), max_input_tokens=20_000)


@pytest.mark.anyio
async def test_on_the_openai_provider_the_result_states_the_chat_rule(tmp_path: Path) -> None:
    _figures(tmp_path)
    registry = BUILTIN_TOOLS.with_tool(read_image_tool(tmp_path))
    async with chat_simulated({"n": SCRIPT}) as (_sim, capture, clock):
        async with Runtime(provider=capture, clock=clock, monotonic=clock, model="gpt-sim", registry=registry) as rt:
            result = await rt.run(Flow([node("n", iterative("Look.", max_rounds=3), profile=PROFILE)]))
    assert result.outcomes["n"].status == "ok"
    stated = _result_text(capture.bodies[-1]["messages"])
    for name, (w, h) in SIZES.items():
        assert _stated(stated, name) == chat_image_tokens(w, h)


@pytest.mark.anyio
async def test_on_the_messages_provider_the_result_states_the_messages_rule(tmp_path: Path) -> None:
    _figures(tmp_path)
    registry = BUILTIN_TOOLS.with_tool(read_image_tool(tmp_path))
    clock = ManualClock(1_000.0)
    provider = Recording(ScriptedProvider(PolicyRegistry({"n": ScriptPolicy("n", SCRIPT)}), clock=clock))
    async with Runtime(provider=provider, clock=clock, monotonic=clock, registry=registry) as rt:
        result = await rt.run(Flow([node("n", iterative("Look.", max_rounds=3), profile=PROFILE)]))
    assert result.outcomes["n"].status == "ok"
    stated = _result_text(provider.sent[-1]["messages"])
    for name, (w, h) in SIZES.items():
        assert _stated(stated, name) == image_tokens(w, h)
