"""Images measured by the wire's rule (issue 18): the chat-completions tiles on the openai kind, the Messages API's elsewhere.

The measure counts a request's images by the rule its provider's wire follows
(:func:`runtime.contract.provider.image_rule_of`); these tests hold it against
the rule itself (a Hypothesis property over image sizes), against the
simulator's chat face through the official ``openai`` SDK (small, tall, wide
and huge images), and in runs whose sends must stay under their ceiling by
the server's count.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import ProviderWrapper, calls, iterative, node, text

import actors.exact_count
from actors.images import read_image_tool, scenario_registry
from actors.tools import BUILTIN_TOOLS
from runtime.bench.ordering import OrderedSends
from runtime.config import Profile
from runtime.config.loader import load_scenario
from runtime.contract.provider import image_rule_of
from runtime.errors import InputCeilingExceeded
from runtime.flows.flow import Flow
from runtime.measuring.image_count import measure_request
from runtime.measuring.measure import TokenCounter, measure
from runtime.measuring.model_calibration import ModelCalibration, fallback_measurement
from runtime.models.limits import default_model_table
from runtime.providers.anthropic import AnthropicProvider
from runtime.providers.scripted import ScriptedProvider
from runtime.request.compiler import RequestSettings, compile_request
from runtime.runtime import Runtime
from runtime.scenarios.run import run_scenario
from runtime.scripted.policies import PolicyRegistry
from runtime.sim.chat.wire import read_chat_request
from runtime.sim.clock import ManualClock
from runtime.values.chat_images import chat_image_tokens
from runtime.values.image_rules import CHAT_IMAGES, MESSAGES_IMAGES, ImageRule
from runtime.values.images import image_tokens
from runtime.values.messages import AssistantResponse, ImagePart, Instruction, ToolCall, ToolResult

openai = pytest.importorskip("openai")

from openai_sim import ChatCapture, chat_simulated  # noqa: E402

from runtime.providers.openai import OpenAIProvider  # noqa: E402
from runtime.providers.openai_wire import ChatDialect, chat_payload  # noqa: E402

VISION = Path(__file__).resolve().parents[1] / "scenarios" / "vision.toml"
CLAUDE = "claude-haiku-5-5"
"""A model with a family prior (1.37): what the send decides on while uncalibrated, with no count endpoint."""


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width: int, height: int, *, pixels: bool = True) -> bytes:
    """A black 1-bit grayscale PNG of this size (whole and decodable; ``pixels=False``: its header only)."""
    header = _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
    body = b""
    if pixels:
        row = b"\x00" * (1 + (width + 7) // 8)
        body = _chunk(b"IDAT", zlib.compress(row * height, 6))
    return b"\x89PNG\r\n\x1a\n" + header + body + _chunk(b"IEND", b"")


def image(width: int, height: int, *, pixels: bool = True) -> ImagePart:
    return ImagePart.from_bytes(png(width, height, pixels=pixels), f"{width}x{height}.png")


def request_with(asked: tuple[ImagePart, ...], returned: tuple[ImagePart, ...], model: str = "gpt-sim") -> Any:
    """An instruction carrying ``asked``, a call, and its result carrying ``returned``; compiled."""
    call = ToolCall.create("call_1", "read_image", {"path": "figures"})
    view = [Instruction("What do these show?", images=asked), AssistantResponse((call,))]
    view.append(ToolResult.for_call(call, "the figures", images=returned))
    return compile_request(system="You look at figures.", tools=(), view=view, settings=RequestSettings(model=model))


# -- the rule each provider's wire follows ------------------------------------------------------------------------


def test_each_provider_names_its_wires_rule() -> None:
    assert OpenAIProvider.create(api_key="sk-x", base_url="http://127.0.0.1:1/v1").image_rule == CHAT_IMAGES
    assert AnthropicProvider.create(api_key="sk-ant-x", base_url="http://127.0.0.1:1").image_rule == MESSAGES_IMAGES
    scripted = ScriptedProvider(PolicyRegistry({}), clock=ManualClock(0.0))
    assert image_rule_of(scripted) == MESSAGES_IMAGES  # a Messages-wire provider need not say so


def test_a_wrapper_passes_its_inner_providers_rule_on_and_a_wrong_one_is_refused() -> None:
    inner = OpenAIProvider.create(api_key="sk-x", base_url="http://127.0.0.1:1/v1")
    assert image_rule_of(ChatCapture(inner)) == CHAT_IMAGES
    assert OrderedSends(inner).image_rule == CHAT_IMAGES  # the benchmark's ordering wrapper

    @attrs.define
    class Confused:
        name: str = "confused"
        image_rule: object = "chat"

    with pytest.raises(
        TypeError, match="'confused': image_rule is 'chat', expected a runtime.values.image_rules.ImageRule"
    ):
        image_rule_of(Confused())
    with pytest.raises(ValueError, match="'tiles' is not one of messages, chat"):
        ImageRule("tiles")  # type: ignore[arg-type]


def test_the_rules_differ_where_the_issue_says() -> None:
    assert (MESSAGES_IMAGES.tokens(100, 100), CHAT_IMAGES.tokens(100, 100)) == (14, 255)
    assert MESSAGES_IMAGES.tokens(4000, 4000) > CHAT_IMAGES.tokens(4000, 4000) == 765
    assert CHAT_IMAGES.total([(100, 100), (1024, 1024)]) == 255 + 765


# -- the measured count is the chat rule's (property) -------------------------------------------------------------

EDGES = (1, 2, 511, 512, 513, 767, 768, 769, 1023, 1024, 1025, 1536, 2047, 2048, 2049, 4096, 7999, 8000)
sides = st.one_of(st.sampled_from(EDGES), st.integers(1, 8000))
sizes = st.lists(st.tuples(sides, sides), max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(asked=sizes, returned=sizes)
@example(asked=[(100, 100)], returned=[])  # one tile, never scaled up
@example(asked=[(1536, 1536)], returned=[(513, 512)])  # the short side taken to 768; a pixel over one tile
@example(asked=[], returned=[(8000, 3), (4096, 1024), (1024, 8000)])  # fitted within 2,048 first
def test_the_measured_count_is_the_text_plus_the_chat_rule(
    asked: list[tuple[int, int]], returned: list[tuple[int, int]]
) -> None:
    request = request_with(
        tuple(image(w, h, pixels=False) for w, h in asked), tuple(image(w, h, pixels=False) for w, h in returned)
    )
    counter = TokenCounter()
    text = measure(request.pieces(counting=True), counter, 1.0).counted
    chat = sum(chat_image_tokens(w, h) for w, h in asked + returned)
    messages = sum(image_tokens(w, h) for w, h in asked + returned)
    assert measure_request(request, counter, 1.0, CHAT_IMAGES).counted == text + chat
    assert measure_request(request, counter, 1.0, MESSAGES_IMAGES).counted == text + messages
    assert measure_request(request, counter, 1.0).counted == text + messages  # the default: the Messages wire
    # The simulator's chat face, reading the body the provider sends, counts the same images the same way.
    body = chat_payload(request, ChatDialect(), "origin")
    assert sum(images for _, images in read_chat_request(body).counted) == chat


@settings(max_examples=60, deadline=None)
@given(size=st.tuples(sides, sides), scale=st.sampled_from([1.0, 1.15, 1.37]))
def test_the_rule_changes_only_what_the_images_count(size: tuple[int, int], scale: float) -> None:
    request = request_with((image(*size, pixels=False),), ())
    counter = TokenCounter()
    chat = measure_request(request, counter, scale, CHAT_IMAGES)
    messages = measure_request(request, counter, scale, MESSAGES_IMAGES)
    assert chat.counted - messages.counted == chat_image_tokens(*size) - image_tokens(*size)
    assert chat.estimate == measure_request(request, TokenCounter(), scale, CHAT_IMAGES).estimate
    label = request.messages[0].source_ids[0]
    assert dict(chat.parts).get(label, 0) >= chat_image_tokens(*size)  # the image is booked to its message
    # A request without images is measured alike by both rules.
    plain = request_with((), ())
    assert measure_request(plain, counter, scale, CHAT_IMAGES) == measure_request(plain, counter, scale)


# -- against the simulator's chat face, through the official SDK --------------------------------------------------

SIZES = {"small": (100, 100), "tall": (300, 3000), "wide": (4096, 1024), "huge": (6000, 6000)}


@pytest.mark.anyio
async def test_the_estimate_counts_each_image_as_the_chat_face_reports_it() -> None:
    script = [text("It is black.") for _ in SIZES]
    async with chat_simulated({"n": script}) as (_sim, capture, _clock):
        rule = image_rule_of(capture)
        assert rule == CHAT_IMAGES
        counter = TokenCounter()
        gaps: dict[str, int] = {}
        old_gaps: dict[str, int] = {}
        for name, size in SIZES.items():
            request = compile_request(
                system=None,
                tools=(),
                view=(Instruction("What is in this image?", images=(image(*size),)),),
                settings=RequestSettings(model=CLAUDE),
            )
            measured = measure_request(request, counter, 1.0, rule)
            reply = await capture.send(request, node_id="n")
            server = reply.usage.total_input  # the chat face's prompt_tokens
            gaps[name] = server - measured.counted
            old_gaps[name] = server - measure_request(request, counter, 1.0, MESSAGES_IMAGES).counted
            # What the send decides on (no count endpoint, uncalibrated): never under the server's count.
            decided = fallback_measurement(measured, default_model_table().token_prior(CLAUDE), ModelCalibration())
            assert decided.estimate >= server, (name, decided.estimate, server)
    # Every request has the same text, so what the server counts beyond our count is the same for every size:
    # each image is counted exactly as the server counts it (the rest is the chat wire's text framing).
    assert len(set(gaps.values())) == 1, gaps
    assert abs(gaps["small"]) < 40  # a few tokens of framing, either way
    # By the Messages rule the small and tall ones were under-counted, the huge one over-counted.
    assert old_gaps["small"] - gaps["small"] == 255 - 14
    assert old_gaps["tall"] > gaps["tall"] and old_gaps["huge"] < gaps["huge"]


# -- runs: nothing sent over its ceiling by the server's count ----------------------------------------------------


@attrs.define
class ServerTally:
    """Pairs each response with the ceiling its send was decided under (by run and request id)."""

    ceilings: dict[tuple[str, str | None], int | None] = attrs.field(factory=dict)
    counted: list[tuple[int, int]] = attrs.field(factory=list)
    refused: int = 0

    def feed(self, event: Any) -> None:
        data = getattr(event, "data", None)
        if data is None:
            return
        key = (event.run_id, event.request_id)
        if event.type == "ContextDecision":
            if data["sent"]:
                self.ceilings[key] = data["ceiling"]
            elif data["action"] == "refuse":
                self.refused += 1
        elif event.type == "ResponseReceived":
            usage = data["usage"]
            ceiling = self.ceilings.get(key)
            if ceiling is not None:
                self.counted.append((sum(int(v) for k, v in usage.items() if k != "output_tokens"), ceiling))

    @property
    def over(self) -> list[tuple[int, int]]:
        return [(total, ceiling) for total, ceiling in self.counted if total > ceiling]


@attrs.define(eq=False)
class MessagesRuled(ProviderWrapper):
    """The OpenAI provider measured by the Messages rule: how every image was counted before this change."""

    @property
    def image_rule(self) -> ImageRule:
        return MESSAGES_IMAGES

    async def send(self, request: Any, *, node_id: str | None) -> Any:
        return await self.inner.send(request, node_id=node_id)


SMALL_FIGURES = [f"fig{i}.png" for i in range(8)]


async def _small_figures_run(tmp_path: Path, *, old_rule: bool) -> tuple[Any, ServerTally]:
    """Eight 100 x 100 figures read in one call, under a 1,500-token ceiling, on the openai kind."""
    for name in SMALL_FIGURES:
        (tmp_path / name).write_bytes(png(100, 100))
    profile = Profile(system="You look at figures.", tools=("read_image",), max_input_tokens=1_500, model=CLAUDE)
    script = [calls(("read_image", {"paths": SMALL_FIGURES})), text("Eight black squares.")]
    tally = ServerTally()
    registry = BUILTIN_TOOLS.with_tool(read_image_tool(tmp_path))
    async with chat_simulated({"n": script}) as (_sim, capture, clock):
        provider = MessagesRuled(capture) if old_rule else capture
        async with Runtime(provider=provider, clock=clock, monotonic=clock, model="gpt-sim", registry=registry) as rt:
            rt.signals.add_handler(tally.feed, policy="block", name="tally")
            result = await rt.run(Flow([node("n", iterative("Look at the figures.", max_rounds=3), profile=profile)]))
    return result, tally


@pytest.mark.anyio
async def test_small_images_are_never_sent_over_the_ceiling_by_the_servers_count(tmp_path: Path) -> None:
    result, tally = await _small_figures_run(tmp_path, old_rule=False)
    assert tally.over == [] and tally.counted  # the first request went, by the server's count under 1,500
    outcome = result.outcomes["n"]
    assert outcome.status == "failed" and isinstance(outcome.error, InputCeilingExceeded)  # the images do not fit
    assert tally.refused == 1


@pytest.mark.anyio
async def test_counted_by_the_messages_rule_the_same_run_went_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The failure this change removes: eight small images at 14 tokens each by the Messages rule are 255 each
    # by the chat rule, so the request was sent, and the server counted it over its ceiling. (Measured at the
    # table's largest prior, 1.37, as then: the family's uncalibrated maximum, 2.0, would refuse it on its own.)
    monkeypatch.setattr(actors.exact_count, "family_maximum", lambda model: 1.37)
    _result, tally = await _small_figures_run(tmp_path, old_rule=True)
    assert [ceiling for _, ceiling in tally.over] == [1_500]
    assert tally.over[0][0] > 8 * 255


@pytest.mark.anyio
async def test_the_vision_scenario_on_the_openai_kind_sends_nothing_over_its_ceiling() -> None:
    registry = scenario_registry(VISION)
    scenario = load_scenario(VISION, tool_names=registry.names())
    tally = ServerTally()
    run = await run_scenario(
        scenario, provider_kind="openai", registry=registry, progress=tally.feed, clock=lambda: 1_000_000.0
    )
    assert tally.over == [] and len(tally.counted) >= 5
    assert run.report["bytes_unrecoverable"] == 0
    assert run.result.outcomes["look"].status == "ok"
