"""Requests over their ceiling by the simulator's count when new content arrives (issue 28, items 1 and 2).

Usage: ``python scripts/over_ceiling_new_content.py`` (from the repository root).
For each content kind (CJK, emoji, base64, random unicode, digits) and token
factor (1.15, 1.37, 1.9), one node reads one blob of 8,000 characters through
a tool on the scripted provider (the simulator's counting code in process),
under a sweep of ceilings between our estimate of the blob's request and the
simulator's bill of it, in two settings:

- ``calibrated``: the run starts from a book fitted on other content (scale
  1.0) and the provider has its count-tokens endpoint (item 1);
- ``no endpoint``: nothing calibrated and no count-tokens endpoint (item 2).

It prints how many ceilings of each sweep had a request billed over the
ceiling its send decided under, and exits 1 when any was.
"""

from __future__ import annotations

import base64
import random
import sys
from pathlib import Path
from typing import Any

import anyio
import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors.env import ModelScales  # noqa: E402
from actors.tools import tool  # noqa: E402
from actors.tools.registry import BUILTIN_TOOLS  # noqa: E402
from runtime.config import Profile  # noqa: E402
from runtime.config.operation import Operation  # noqa: E402
from runtime.flows.flow import Flow, Node  # noqa: E402
from runtime.inputs.bounds import MAX_TOKEN_FACTOR  # noqa: E402
from runtime.logs import configure_logging  # noqa: E402
from runtime.measuring.model_calibration import CalibrationBook, ModelCalibration  # noqa: E402
from runtime.providers.scripted import ScriptedProvider  # noqa: E402
from runtime.runtime import Runtime  # noqa: E402
from runtime.scripted.policies import PolicyRegistry, ScriptCall, ScriptPolicy, ScriptStep  # noqa: E402
from runtime.sim.clock import ManualClock  # noqa: E402

MODEL = "claude-haiku-5-5"
KINDS = ("cjk", "emoji", "base64", "unicode", "digits")
FACTORS = (1.15, 1.37, 1.6, MAX_TOKEN_FACTOR)


def content(kind: str, size: int, seed: int) -> str:
    """``size`` characters of one content kind (deterministic)."""
    r = random.Random(seed)
    if kind == "cjk":
        return "".join(chr(r.randint(0x4E00, 0x9FFF)) for _ in range(size))
    if kind == "emoji":
        return "".join(chr(r.randint(0x1F300, 0x1F64F)) for _ in range(size))
    if kind == "base64":
        return base64.b64encode(r.randbytes(size)).decode()[:size]
    if kind == "digits":
        return "".join(r.choice("0123456789") for _ in range(size))
    return "".join(chr(r.choice((r.randint(0x20, 0xD7FF), r.randint(0xE000, 0xFFFD)))) for _ in range(size))


@tool
def blob(kind: str, size: int, seed: int) -> str:
    """Return a blob of content.

    Args:
        kind: cjk, emoji, base64, unicode or digits
        size: characters
        seed: which blob
    """
    return content(kind, size, seed)


PROFILE = Profile(system="You read files and answer briefly.", tools=("blob",))
REGISTRY = BUILTIN_TOOLS.with_tools([blob])


def book_at(scale: float) -> ModelScales:
    """A run starting from a calibration fitted on other content, at ``scale``."""
    return ModelScales(book=CalibrationBook({MODEL: ModelCalibration(scale=scale, samples=1, low=scale)}))


def script(kind: str, size: int) -> list[ScriptStep]:
    call = ScriptCall.create("blob", {"kind": kind, "size": size, "seed": 7})
    return [ScriptStep(tool_calls=(call,)), ScriptStep(text="done")]


@attrs.define(eq=False)
class NoCountEndpoint:
    """The scripted simulator without its count-tokens endpoint (as the chat-completions face is)."""

    inner: ScriptedProvider

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def counts_tokens(self) -> bool:
        return False

    async def count_tokens(self, request: Any) -> int:
        raise NotImplementedError("this provider has no count-tokens endpoint")

    async def send(self, request: Any, *, node_id: str | None) -> Any:
        return await self.inner.send(request, node_id=node_id)


async def run_once(
    ceiling: int | str, kind: str, factor: float, size: int, *, book: float | None, counts: bool = True
) -> tuple[Any, list[dict[str, Any]], list[int]]:
    """Run the one-node flow; returns the outcome, the sent decisions' ceilings and estimates, and the bills."""
    policies = PolicyRegistry({"n": ScriptPolicy("n", script(kind, size))})
    clock = ManualClock(1_000.0)
    scripted = ScriptedProvider(policies, clock=clock, token_factor=factor)
    provider: Any = scripted if counts else NoCountEndpoint(scripted)
    events: list[Any] = []
    calibration = book_at(book) if book is not None else ModelScales()
    operation = Operation("iterative", ("Read the blob.",), max_rounds=4)
    flow = Flow([Node("n", operation, profile=PROFILE.evolve(max_input_tokens=ceiling))])
    async with Runtime(
        provider=provider, clock=clock, monotonic=clock, model=MODEL, registry=REGISTRY, calibration=calibration
    ) as rt:
        rt.signals.add_handler(events.append, name="t")
        result = await rt.run(flow)
    decided = [dict(e.data) for e in events if e.type == "ContextDecision"]
    bills = [
        sum(v for k, v in e.data["usage"].items() if k != "output_tokens")
        for e in events
        if e.type == "ResponseReceived"
    ]
    return result["n"], decided, bills


_BASE: dict[tuple[Any, ...], tuple[int, int]] = {}


async def last_request(kind: str, factor: float, size: int, book: float | None, counts: bool) -> tuple[int, int]:
    """(our estimate, the simulator's bill) of the request carrying the blob, with no ceiling."""
    key = (kind, factor, size, book, counts)
    if key not in _BASE:
        _, decided, bills = await run_once("none", kind, factor, size, book=book, counts=counts)
        _BASE[key] = (decided[-1]["estimate_after"], bills[-1])
    return _BASE[key]


def sent_over(decided: list[dict[str, Any]], bills: list[int]) -> list[tuple[int, int]]:
    """(billed, ceiling) of every response billed over the ceiling its send decided under."""
    ceilings = [d["ceiling"] for d in decided if d["sent"]]
    return [(b, c) for b, c in zip(bills, ceilings, strict=False) if c is not None and b > c]


SWEEP_FACTORS = (1.15, 1.37, MAX_TOKEN_FACTOR)
SWEEP_SIZE = 8_000
SWEEP_POINTS = 8


async def sweep(calibrated: bool) -> tuple[int, int]:
    """(ceilings with a request billed over, ceilings tried) over every kind and factor."""
    over = tried = 0
    for kind in KINDS:
        for factor in SWEEP_FACTORS:
            book = 1.0 if calibrated else None
            estimate, billed = await last_request(kind, factor, SWEEP_SIZE, book, True)
            low = estimate if calibrated else round(billed / factor)  # no endpoint: from our plain count
            for ceiling in range(low, billed, max(1, (billed - low) // SWEEP_POINTS)):
                _, decided, bills = await run_once(ceiling, kind, factor, SWEEP_SIZE, book=book, counts=calibrated)
                tried += 1
                over += bool(sent_over(decided, bills))
    return over, tried


async def main() -> int:
    total = 0
    for calibrated, label in ((True, "calibrated on other content"), (False, "no endpoint, uncalibrated")):
        over, tried = await sweep(calibrated)
        total += over
        print(f"{label}: {over} of {tried} ceilings had a request billed over its ceiling")
    return 1 if total else 0


if __name__ == "__main__":
    configure_logging(level="error")
    raise SystemExit(anyio.run(main))
