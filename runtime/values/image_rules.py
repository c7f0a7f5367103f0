"""Which rule a request's images are counted by: the wire's (pure).

An image costs what the wire it is sent on says, and the two wires foldline
speaks say different things: the Messages API scales it down and counts
about ``width * height / 750`` (:func:`runtime.values.images.image_tokens`), the
chat-completions API fits it within 2,048, takes its short side to 768 and
counts 85 tokens plus 170 per 512-pixel tile
(:func:`runtime.values.chat_images.chat_image_tokens`). A 100 x 100 image is 14
tokens on the first and 255 on the second; a 4,000 x 4,000 one about 1,600 and
765. An :class:`ImageRule` names one of them; the measure
(:func:`runtime.measuring.image_count.measure_request`) counts every image of a request
by the rule it is given, and a provider says which rule its wire follows
(:func:`runtime.contract.provider.image_rule_of`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import attrs

from runtime.values.chat_images import chat_image_tokens
from runtime.values.images import image_tokens

RuleName = Literal["messages", "chat"]
RULE_NAMES: tuple[RuleName, ...] = ("messages", "chat")


def _check_name(_instance: object, _attribute: attrs.Attribute, value: object) -> None:
    if value not in RULE_NAMES:
        raise ValueError(f"ImageRule name: {value!r} is not one of {', '.join(RULE_NAMES)}")


@attrs.frozen
class ImageRule:
    """How one wire counts an image: ``"messages"`` (the Messages API's) or ``"chat"`` (chat completions')."""

    name: RuleName = attrs.field(validator=_check_name)

    def tokens(self, width: int, height: int) -> int:
        """The tokens a ``width`` x ``height`` image costs on this wire."""
        if self.name == "chat":
            return chat_image_tokens(width, height)
        return image_tokens(width, height)

    def total(self, sizes: Iterable[tuple[int, int]]) -> int:
        """The tokens of images of these ``(width, height)`` sizes together."""
        return sum(self.tokens(width, height) for width, height in sizes)


MESSAGES_IMAGES = ImageRule("messages")
"""The Messages API's rule (the Anthropic wire, the simulator's Messages face, the scripted provider)."""
CHAT_IMAGES = ImageRule("chat")
"""The chat-completions rule (the OpenAI-compatible wire, the simulator's chat face)."""
