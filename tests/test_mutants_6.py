"""Session 4 of issue 20: the last survivors of the core's mutation run, killed by behaviour a caller sees."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from actors.tools import synthetic_text
from runtime.bench.conversations import Conversation, measurer_for
from runtime.fold.bodies import Body
from runtime.fold.clip import clip_stage
from runtime.fold.measurer import ViewMeasurer
from runtime.fold.projection import bound_retained, project_body
from runtime.measuring.measure import TokenCounter
from runtime.request.compiler import Request, RequestSettings
from runtime.request.rendering import Block, RenderedMessage
from runtime.values.canonical import canonical_json
from runtime.values.image_rules import MESSAGES_IMAGES
from runtime.values.messages import Message

_TEXT = canonical_json({"type": "text", "text": "hello"})
_IMAGE = canonical_json({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}})
_IMAGE_COUNTED = canonical_json({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}})


def _request(*messages: RenderedMessage, system: str | None = None, thinking: str | None = None) -> Request:
    settings = RequestSettings(model="claude-haiku-5-5", thinking_json=thinking)
    return Request(settings=settings, tools=(), system=system, messages=messages)


def _image_block(source_id: str | None) -> Block:
    return Block(_IMAGE, "image", source_id, count_json=_IMAGE_COUNTED, image_sizes=((200, 300),))


def test_the_thinking_field_is_labelled_envelope_in_the_pieces() -> None:
    thinking = canonical_json({"type": "enabled", "budget_tokens": 2048})
    request = _request(RenderedMessage("user", (Block(_TEXT, "text", "m1"),), ("m1",)), thinking=thinking)
    labelled = [label for label, text in request.pieces().flat() if text == ',"thinking":' + thinking]
    assert labelled == ["envelope"]
    assert {label for label, _ in request.pieces().flat()} == {"envelope", "m1"}


def test_a_block_with_no_source_is_labelled_envelope_in_pieces_and_image_tokens() -> None:
    request = _request(RenderedMessage("user", (Block(_TEXT, "text", None), _image_block(None)), ()))
    labels = [label for label, text in request.pieces().flat() if text in (_TEXT, _IMAGE)]
    assert labels == ["envelope", "envelope"]
    assert request.image_tokens(MESSAGES_IMAGES) == {"envelope": MESSAGES_IMAGES.total(((200, 300),))}


def test_a_counted_image_only_message_is_keyed_apart_from_its_sent_one() -> None:
    message = RenderedMessage("user", (_image_block("m1"),), ("m1",))
    plain = RenderedMessage("user", (Block(_TEXT, "text", "m2"),), ("m2",))
    request = _request(message, plain)
    sent, counted = request.pieces(), request.pieces(counting=True)
    assert sent.keys[0] != counted.keys[0]
    assert sent.keys[1] == counted.keys[1]
    assert _IMAGE_COUNTED in [text for _, text in counted.flat()]


def test_a_request_without_system_prepares_no_system_block() -> None:
    request = _request(RenderedMessage("user", (Block(_TEXT, "text", "m1"),), ("m1",)))
    assert request.prepared().system == ()
    with_system = _request(RenderedMessage("user", (Block(_TEXT, "text", "m1"),), ("m1",)), system="Be terse.")
    assert len(with_system.prepared().system) == 1


def test_a_million_character_body_is_cut_to_the_greatest_count_that_fits_its_bound() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(1_000_000))
    body = Body(None, 0, text, False)
    for bound in (400_000, 999_000):
        k = bound_retained(body, bound, index=3, total=len(text))
        fitted = project_body(body, index=3, total=len(text), allowance=None, bound=bound)
        assert fitted.cut and fitted.kept == k and len(fitted.text) <= bound
        longer = project_body(body, index=3, total=len(text), allowance=k + 1, bound=None)
        assert len(longer.text) > bound
        assert fitted.text.startswith(text[: (3 * k) // 4]) and fitted.text.endswith(text[-(k - (3 * k) // 4) :])


@attrs.define(eq=False)
class FlooredMeasurer:
    """A real view measurer whose estimates never go below ``floor`` (a cut under it saves nothing measurable)."""

    inner: ViewMeasurer
    floor: int

    @property
    def scale(self) -> float:
        return self.inner.scale

    def estimate(self, view: Sequence[Message]) -> int:
        return max(self.floor, self.inner.estimate(view))

    def block_tokens(self, message: Message) -> tuple[int, int]:
        return self.inner.block_tokens(message)


# clip.x_clip_stage__mutmut_131: a cut whose candidate measures the same as the view is not kept.
def test_a_cut_that_does_not_lower_the_estimate_is_not_kept() -> None:
    c = Conversation()
    c.task("Read.")
    c.round([("read_file", {"path": "a.md"}, synthetic_text("a", 20_000))])
    branch = c.branch()
    view = branch.view()
    inner = measurer_for(branch, counter=TokenCounter())
    estimate = inner.estimate(view)
    outcome = clip_stage(
        view,
        estimate=estimate,
        target=estimate - 2000,
        eligible=lambda result: True,
        record=branch,
        measurer=FlooredMeasurer(inner, estimate),
        bound=None,
    )
    assert outcome.copies == () and list(outcome.view) == list(view) and outcome.estimate == estimate
    kept = clip_stage(
        view,
        estimate=estimate,
        target=estimate - 2000,
        eligible=lambda result: True,
        record=branch,
        measurer=FlooredMeasurer(inner, 0),
        bound=None,
    )
    assert len(kept.copies) == 1 and kept.estimate < estimate


# projection.x_bound_retained__mutmut_58: the last walk up adds one character at a time. Here the marker narrows
# as the kept count grows, so the first estimate stops one short, and 800 characters would not fit.
def test_the_bound_is_met_where_the_marker_narrows_as_more_is_kept() -> None:
    body = Body(None, 400, "x" * 1200, False)
    k = bound_retained(body, 1002, index=3, total=1600)
    fitted = project_body(body, index=3, total=1600, allowance=None, bound=1002)
    assert k == fitted.kept == 799 and len(fitted.text) <= 1002
    assert len(project_body(body, index=3, total=1600, allowance=800, bound=None).text) > 1002
