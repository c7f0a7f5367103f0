"""Measuring a request that may carry images (pure).

An image counts as the API's documented estimate (:func:`runtime.images.image_tokens`),
never as the o200k count of its base64 text: the request is measured with
each image's data left empty (:meth:`~runtime.compiler.Request.pieces` with
``counting``) and each image's estimate is added to the part of the message
that carries it. A request without images is measured exactly as
:func:`runtime.measure.measure` measures its pieces.
"""

from __future__ import annotations

from runtime.compiler import Request
from runtime.measure import (
    TOP_PARTS,
    Measurement,
    TokenCounter,
    measure,
    scaled_estimate,
)


def measure_request(request: Request, counter: TokenCounter, scale: float) -> Measurement:
    """The measurement of ``request``, its images counted by the documented estimate."""
    images = request.image_tokens()
    if not images:
        return measure(request.pieces(), counter, scale)
    text = measure(request.pieces(counting=True), counter, scale)
    # The estimate stays ceil(counted x scale), images included, so calibration
    # (counted against the provider's reported input) sees one number.
    added = sum(images.values())
    parts = dict(text.parts)
    for label, tokens in images.items():
        parts[label] = parts.get(label, 0) + tokens
    largest = sorted(parts.items(), key=lambda item: -item[1])[:TOP_PARTS]
    return Measurement(
        counted=text.counted + added,
        scale=text.scale,
        estimate=scaled_estimate(text.counted + added, text.scale),
        parts=tuple(largest),
    )
