"""Micro benchmarks: the costs that decide whether the runtime keeps up.

Each figure is measured several times and reported as a median with its
spread (minimum and maximum). These functions read a monotonic clock, and
the import figure starts fresh interpreters: they are benchmarks, not part
of the pure core.

- clone of a 10,000-message branch;
- compile and measure of a 100k-token conversation after one appended turn
  (the counter already knows the earlier turns, as it does in a run);
- one ``tool_io`` fold at 98k tokens and one clip pass over a 100,045-character
  result (from the fold package's own bench, :mod:`runtime.bench.fold_micro`);
- signal-bus throughput with 1 and 10 subscribers;
- import time of the runtime, in a fresh interpreter.
"""

from __future__ import annotations

import importlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import attrs

from actors.branch import Branch
from actors.tools import synthetic_text
from runtime.measuring.measure import TokenCounter, measure
from runtime.measuring.tokenizer import encoding
from runtime.request.compiler import RequestSettings, compile_request
from runtime.values.messages import (
    AssistantResponse,
    Instruction,
    Message,
    TextPart,
    ToolCall,
    ToolResult,
)
from signals.throughput import measure_bus_throughput

MODEL = "claude-haiku-5-5"


@attrs.frozen
class Figure:
    """One micro figure: its samples in ``unit`` (or why it was not measured)."""

    name: str
    unit: str
    samples: tuple[float, ...] = ()
    note: str = ""

    @property
    def measured(self) -> bool:
        return bool(self.samples)

    def to_json(self) -> dict[str, object]:
        if not self.samples:
            return {"name": self.name, "unit": self.unit, "measured": False, "note": self.note}
        return {
            "name": self.name,
            "unit": self.unit,
            "measured": True,
            "median": statistics.median(self.samples),
            "min": min(self.samples),
            "max": max(self.samples),
            "runs": len(self.samples),
            "note": self.note,
        }

    def line(self) -> str:
        if not self.samples:
            return f"{self.name}: {self.note}"
        median = statistics.median(self.samples)
        return (
            f"{self.name}: median {_num(median)} {self.unit} "
            f"(spread {_num(min(self.samples))} to {_num(max(self.samples))}, {len(self.samples)} runs)"
            + (f"; {self.note}" if self.note else "")
        )


def _num(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _round(i: int, chars: int) -> tuple[AssistantResponse, ToolResult]:
    call = ToolCall.create(f"toolu_micro_{i:06d}", "read_file", {"path": f"src/file-{i}.py", "size": chars})
    result = ToolResult.for_call(call, synthetic_text(f"src/file-{i}.py", chars))
    return AssistantResponse((TextPart(f"reading file {i}"), call), stop_reason="tool_use"), result


async def _branch_with(messages: int) -> Branch:
    branch = Branch.create(system="You are a micro benchmark.")
    async with branch.turn() as turn:
        turn.append(Instruction("Read every file."))
        i = 0
        while branch.record_length() < messages:
            response, result = _round(i, 40)
            turn.append(response)
            turn.append(result)
            i += 1
    return branch


async def clone_figure(messages: int = 10_000, runs: int = 30) -> Figure:
    """Milliseconds to clone a branch of ``messages`` messages."""
    branch = await _branch_with(messages)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        clone = branch.clone()
        samples.append((time.perf_counter() - started) * 1000)
        if len(clone.view_ids()) != len(branch.view_ids()):
            raise RuntimeError("the clone does not see the branch's view")
    return Figure(f"clone of a {branch.record_length():,}-message branch", "ms", tuple(samples))


def compile_measure_figure(tokens: int = 100_000, runs: int = 20) -> Figure:
    """Milliseconds to compile and measure a ``tokens``-token conversation after one appended turn."""
    counter = TokenCounter()
    settings = RequestSettings(model=MODEL)
    view: list[Message] = [Instruction("Read the files and report.")]
    i = 0
    counted = 0
    while counted < tokens:
        response, result = _round(i, 8_000)
        view += [response, result]
        i += 1
        counted = measure(
            compile_request(system="sys", tools=(), view=view, settings=settings).pieces(), counter, 1.0
        ).counted
    samples = []
    for _ in range(runs):
        response, result = _round(i, 2_000)
        view += [response, result]
        i += 1
        started = time.perf_counter()
        request = compile_request(system="sys", tools=(), view=view, settings=settings)
        m = measure(request.pieces(), counter, 1.0)
        samples.append((time.perf_counter() - started) * 1000)
        if m.counted < tokens:
            raise RuntimeError(f"the conversation measured {m.counted} tokens, expected at least {tokens}")
    return Figure(
        f"compile + measure of a {tokens // 1000}k-token conversation after one appended turn", "ms", tuple(samples)
    )


def compile_measure_scratch_figure(tokens: int = 100_000, runs: int = 5) -> Figure:
    """Milliseconds to compile and measure a ``tokens``-token conversation from scratch:
    messages never rendered before and a token counter with an empty cache."""
    settings = RequestSettings(model=MODEL)
    encoding()  # the tokenizer's one-time load is not part of a measurement
    samples = []
    for run in range(runs):
        view: list[Message] = [Instruction(f"Read the files and report ({run}).")]
        i = 0
        while len(view) < 2 * (tokens // 2_000):  # about 2,000 tokens a round
            response, result = _round(1_000 * run + i, 8_000)
            view += [response, result]
            i += 1
        counter = TokenCounter()
        started = time.perf_counter()
        m = measure(compile_request(system="sys", tools=(), view=view, settings=settings).pieces(), counter, 1.0)
        samples.append((time.perf_counter() - started) * 1000)
        if m.counted < tokens:
            raise RuntimeError(f"the conversation measured {m.counted} tokens, expected at least {tokens}")
    return Figure(f"compile + measure of a {tokens // 1000}k-token conversation from scratch", "ms", tuple(samples))


def _fold_bench(function: str) -> Callable[[int], list[float]] | str:
    """``runtime.bench.fold_micro``'s ``function``, or why it is not there."""
    try:
        module = importlib.import_module("runtime.bench.fold_micro")
    except ModuleNotFoundError as exc:
        if exc.name not in ("runtime.bench.fold_micro", "runtime.fold"):
            raise
        return "not built yet (runtime.bench.fold_micro is missing)"
    found = getattr(module, function, None)
    return found if callable(found) else f"not built yet (runtime.bench.fold_micro has no {function})"


def fold_figure(runs: int = 7) -> Figure:
    """Milliseconds for one tool_io fold of a 98k-token branch (``runtime.bench.fold_micro.bench_tool_io_fold``)."""
    name = "one tool_io fold at 98k tokens"
    bench = _fold_bench("bench_tool_io_fold")
    if isinstance(bench, str):
        return Figure(name, "ms", note=bench)
    return Figure(name, "ms", tuple(seconds * 1000 for seconds in bench(runs)))


def clip_figure(runs: int = 7) -> Figure:
    """Milliseconds for one clip pass over a 100,045-character result (``runtime.bench.fold_micro.bench_clip_pass``)."""
    name = "one clip pass over a 100,045-character result"
    bench = _fold_bench("bench_clip_pass")
    if isinstance(bench, str):
        return Figure(name, "ms", note=bench)
    return Figure(name, "ms", tuple(seconds * 1000 for seconds in bench(runs)))


async def bus_figure(subscribers: int, events: int = 20_000, runs: int = 5) -> Figure:
    """Events per second through the signal bus to ``subscribers`` readers."""
    samples = [await measure_bus_throughput(events, subscribers) for _ in range(runs)]
    return Figure(f"bus throughput, {subscribers} subscriber(s)", "events/s", tuple(samples))


IMPORT_PROBE = "import time\nstarted = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - started)\n"


def import_figure(module: str, runs: int = 5) -> Figure:
    """Milliseconds to import ``module`` in a fresh interpreter (startup itself excluded)."""
    samples = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", IMPORT_PROBE.format(module=module)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"importing {module} failed: {done.stderr.strip()[-400:]}")
        samples.append(float(done.stdout.strip()) * 1000)
    return Figure(f"import {module} (fresh interpreter)", "ms", tuple(samples))


async def run_micro(progress: Callable[[Figure], None] | None = None) -> list[Figure]:
    """Every micro figure, in order; ``progress`` sees each as it is done."""
    figures: list[Figure] = []

    def done(figure: Figure) -> None:
        figures.append(figure)
        if progress is not None:
            progress(figure)

    # The bus first: the later figures leave large conversations and caches on the
    # heap, and the bus (allocation-heavy) is then measured against the cost of
    # collecting them rather than on its own.
    done(await bus_figure(1))
    done(await bus_figure(10))
    done(await clone_figure())
    done(compile_measure_figure())
    done(compile_measure_scratch_figure())
    done(fold_figure())
    done(clip_figure())
    done(import_figure("runtime, actors, signals"))
    done(import_figure("runtime.runtime"))
    done(import_figure("runtime.scenarios.run"))
    return figures
