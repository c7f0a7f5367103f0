"""Measuring a request that may carry images (pure).

An image counts as its wire's documented rule says (:class:`~runtime.values.image_rules.ImageRule`:
the Messages API's ``pixels / 750`` after its resize, or the chat-completions
tiles), never as the o200k count of its base64 text: the request is measured
with each image's data left empty (:meth:`~runtime.request.compiler.Request.pieces`
with ``counting``) and each image's tokens by the rule are added to the part
of the message that carries it. The rule is the measure's configuration (the
send path takes it from the provider: :func:`runtime.contract.provider.image_rule_of`);
the compiled request, its bytes and its digest do not depend on it. A request
without images is measured exactly as :func:`runtime.measuring.measure.measure`
measures its pieces, whatever the rule.
"""

from __future__ import annotations

from runtime.measuring.measure import (
    TOP_PARTS,
    Measurement,
    TokenCounter,
    measure,
    scaled_estimate,
)
from runtime.request.compiler import Request
from runtime.values.image_rules import MESSAGES_IMAGES, ImageRule


def measure_request(
    request: Request, counter: TokenCounter, scale: float, images: ImageRule = MESSAGES_IMAGES
) -> Measurement:
    """The measurement of ``request``, its images counted by the ``images`` rule (the wire's)."""
    by_label = request.image_tokens(images)
    if not by_label:
        return measure(request.pieces(), counter, scale)
    text = measure(request.pieces(counting=True), counter, scale)
    # The estimate stays ceil(counted x scale), images included, so calibration
    # (counted against the provider's reported input) sees one number.
    added = sum(by_label.values())
    parts = dict(text.parts)
    for label, tokens in by_label.items():
        parts[label] = parts.get(label, 0) + tokens
    largest = sorted(parts.items(), key=lambda item: -item[1])[:TOP_PARTS]
    return Measurement(
        counted=text.counted + added,
        scale=text.scale,
        estimate=scaled_estimate(text.counted + added, text.scale),
        parts=tuple(largest),
    )
