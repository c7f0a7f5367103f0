"""The scaling table of ``foldline bench --micro``: each cost at several sizes, against its target.

Every figure is CPU time (``time.process_time`` in process, the children's
``getrusage`` CPU for a started process), reported as the median of several
runs with its spread, the target it is held to and whether the median met it:

- compile + measure + place marks after one appended turn, at 10k, 100k, 1M
  and 3.5M tokens of history (the counter, the compiler and the placement
  have seen the earlier turns, as they have in a run; the branch's ledger
  holds what the earlier responses wrote);
- compile + measure of a 100k-token conversation from scratch (messages never
  rendered, an empty counter: the resume case);
- clone of a branch of 1k, 10k and 100k messages (no target: reported);
- one ``tool_io`` fold at 10k, 100k and 1M tokens;
- bus throughput with 1, 10 and 100 subscribers (no target at 100);
- ``foldline --help`` and ``foldline run BAD.toml`` to its exit-2 message,
  ``import runtime.runtime`` and the tokenizer's load, each in a fresh process.
  Where ``PYTHONDONTWRITEBYTECODE`` is set, every start compiles each module
  from source, so the import and both commands are also measured with the
  bytecode cache on, as an installed package runs (the import's target there:
  200 ms; the commands are reported).
  The load is measured with the rank cache warm (as after a machine's first
  load, which fills it; the parent has loaded the tokenizer by then) and,
  reported beside it, with the cache turned off; "time to first count" is
  what a program waits from importing the tokenizer to its first count.

These functions read clocks and start processes: they are benchmarks, not
part of the pure core.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import attrs

from runtime.bench.fold_micro import _input, _measurer, reading_branch
from runtime.bench.micro import MODEL, _branch_with, _round
from runtime.cache import CacheLedger, place_marks
from runtime.fold.planner import FoldPlan, FoldPlanner
from runtime.fold.settings import FoldSettings
from runtime.measuring.measure import TokenCounter, measure
from runtime.measuring.tokenizer import count_tokens, encoding
from runtime.request.compiler import RequestSettings, compile_request
from runtime.request.layout import forget_layouts
from runtime.values.messages import Instruction, Message
from runtime.values.usage import Usage
from signals.throughput import measure_bus_throughput

ROUTE, PROCESS = "direct", "bench"


@attrs.frozen
class Row:
    """One figure of the table: samples in ``unit``, and its target (``at_most`` or at least).

    ``target`` is None for a figure the issue sets no target for (clone, the
    bus at 100 subscribers): it is reported, and ``met`` is None.
    """

    name: str
    unit: str
    samples: tuple[float, ...]
    target: float | None
    at_most: bool = True
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.median <= self.target if self.at_most else self.median >= self.target

    def _target_text(self) -> str:
        if self.target is None:
            return "no target set"
        return f"{'<=' if self.at_most else '>='} {_num(self.target)} {self.unit}"

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "unit": self.unit,
            "median": self.median,
            "min": min(self.samples),
            "max": max(self.samples),
            "runs": len(self.samples),
            "target": self._target_text(),
            "met": self.met,
            "note": self.note,
        }

    def line(self) -> str:
        status = {True: "met", False: "MISSED", None: "reported"}[self.met]
        return (
            f"[{status}] {self.name}: median {_num(self.median)} {self.unit} "
            f"(spread {_num(min(self.samples))} to {_num(max(self.samples))}, {len(self.samples)} runs; "
            f"target {self._target_text()})" + (f"; {self.note}" if self.note else "")
        )


def _num(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _cpu_ms(work: Callable[[], object]) -> float:
    started = time.process_time()
    work()
    return (time.process_time() - started) * 1000


def after_one_turn(tokens: int, target_ms: float, runs: int = 15) -> Row:
    """Compile + measure + place marks after one appended turn, ``tokens`` of history."""
    counter = TokenCounter()
    settings = RequestSettings(model=MODEL)
    view: list[Message] = [Instruction(f"Read the files and report ({tokens}).")]
    i = 0
    while len(view) < 2 * (tokens // 2_000):  # about 2,000 tokens a round
        view += _round(i, 8_000)
        i += 1
    ledger = CacheLedger.empty()
    previous = None
    samples = []
    m = None
    for run in range(runs + 1):
        if run:
            view += _round(i, 2_000)
            i += 1
        started = time.process_time()
        request = compile_request(system="You read files.", tools=(), view=view, settings=settings)
        m = measure(request.pieces(), counter, 1.0)
        placement = place_marks(
            request.prepared(),
            ledger=ledger,
            now=0.0,
            route=ROUTE,
            process_id=PROCESS,
            previous=None if previous is None else previous.certified,
        )
        request.with_marks(placement.marks)
        elapsed = (time.process_time() - started) * 1000
        if run:  # the first pass primes the counter and the ledger, as the earlier turns of a run did
            samples.append(elapsed)
        usage = Usage(
            input_tokens=0,
            cache_read_input_tokens=max(m.counted - 2_600, 0),
            cache_write_5m_tokens=min(2_600, m.counted),
            output_tokens=40,
        )
        ledger = ledger.after_response(placement, usage, 0.0, ROUTE, PROCESS)
        previous = placement
    counted = 0 if m is None else m.counted
    if counted < tokens:
        raise RuntimeError(f"the conversation measured {counted} tokens, expected at least {tokens}")
    label = f"{tokens / 1_000_000:g}M" if tokens >= 1_000_000 else f"{tokens // 1000}k"
    return Row(
        f"compile + measure + place after one turn, {label} tokens",
        "ms",
        tuple(samples),
        target_ms,
        note=f"{len(view):,} messages, {counted:,} tokens",
    )


def from_scratch(tokens: int = 100_000, target_ms: float = 20.0, runs: int = 7) -> Row:
    """Compile + measure of a ``tokens``-token conversation never seen before, with an empty counter."""
    settings = RequestSettings(model=MODEL)
    encoding()  # the tokenizer's one-time load is its own figure
    samples: list[float] = []
    bare: list[float] = []
    counted = 0
    for run in range(runs):
        view: list[Message] = [Instruction(f"Read the files and report (scratch {run}).")]
        i = 0
        while len(view) < 2 * (tokens // 2_000):
            view += _round(100_000 * (run + 1) + i, 8_000)
            i += 1
        forget_layouts()
        counter = TokenCounter()
        started = time.process_time()
        request = compile_request(system="s", tools=(), view=view, settings=settings)
        counted = measure(request.pieces(), counter, 1.0).counted
        samples.append((time.process_time() - started) * 1000)
        text = request.payload_text()
        started = time.process_time()
        whole = count_tokens(text)
        bare.append((time.process_time() - started) * 1000)
        if whole != counted:
            raise RuntimeError(f"from scratch: measured {counted} tokens, the whole payload has {whole}")
    return Row(
        f"compile + measure from scratch, {tokens // 1000}k tokens",
        "ms",
        tuple(samples),
        target_ms,
        note=f"{counted:,} tokens; one tiktoken count of the whole payload: median {statistics.median(bare):.2f} ms",
    )


async def clone(messages: int, target_ms: float | None = None, runs: int = 15) -> Row:
    branch = await _branch_with(messages)
    samples = [_cpu_ms(branch.clone) for _ in range(runs)]
    return Row(f"clone of a {branch.record_length():,}-message branch", "ms", tuple(samples), target_ms)


def fold(tokens: int, target_ms: float, runs: int = 5) -> Row:
    """One tool_io fold of a branch of about ``tokens`` tokens (rounds of about 2,450 tokens)."""
    rounds = max(4, tokens // 2_450)
    samples = []
    before = 0
    for _ in range(runs):
        branch = reading_branch(rounds=rounds, chars=8_950)
        counter = TokenCounter()
        measurer = _measurer(branch, counter)
        before = measurer.estimate(branch.view())
        settings = FoldSettings(ceiling=max(before * 100 // 98, 1))
        started = time.process_time()
        plan = FoldPlanner(_input(branch, settings), measurer).start()
        samples.append((time.process_time() - started) * 1000)
        if not isinstance(plan, FoldPlan) or "tool_io" not in plan.stages:
            raise RuntimeError(f"the {tokens}-token fold did not land a tool_io pass: {plan!r:.200}")
    label = f"{tokens / 1_000_000:g}M" if tokens >= 1_000_000 else f"{tokens // 1000}k"
    return Row(f"one tool_io fold at {label} tokens", "ms", tuple(samples), target_ms, note=f"{before:,} tokens")


async def bus(subscribers: int, target: float | None, events: int = 20_000, runs: int = 5) -> Row:
    samples = [await measure_bus_throughput(events, subscribers, timer=time.process_time) for _ in range(runs)]
    return Row(f"bus throughput, {subscribers} subscriber(s)", "events/s", tuple(samples), target, at_most=False)


def _child_cpu_ms(args: list[str], expect: int, env: dict[str, str] | None = None) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    environ = None if env is None else {**os.environ, **env}
    done = subprocess.run(args, capture_output=True, text=True, check=False, env=environ)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expect:
        raise RuntimeError(f"{' '.join(args[1:])} exited {done.returncode}, expected {expect}: {done.stderr[-300:]}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def cli(
    name: str,
    arguments: list[str],
    expect: int,
    target_ms: float | None,
    runs: int = 5,
    env: dict[str, str] | None = None,
    note: str = "the whole process, interpreter start included",
) -> Row:
    command = [sys.executable, "-m", "runtime.cli", *arguments]
    samples = [_child_cpu_ms(command, expect, env) for _ in range(runs)]
    return Row(name, "ms", tuple(samples), target_ms, note=note)


_PROBE = "import time\nstarted = time.process_time()\n{setup}\nprint(time.process_time() - started)\n"


def in_child(
    name: str,
    setup: str,
    target_ms: float | None,
    runs: int = 5,
    prelude: str = "",
    env: dict[str, str] | None = None,
    note: str = "",
) -> Row:
    samples = []
    for _ in range(runs):
        code = prelude + _PROBE.format(setup=setup)
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=False,
            env=None if env is None else {**os.environ, **env},
        )
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed: {done.stderr.strip()[-400:]}")
        samples.append(float(done.stdout.strip()) * 1000)
    return Row(name, "ms", tuple(samples), target_ms, note="in a fresh interpreter" + (f"; {note}" if note else ""))


async def run_scaling(progress: Callable[[Row], None] | None = None) -> list[Row]:
    """Every row of the table, in order; ``progress`` sees each as it is done."""
    rows: list[Row] = []

    def done(row: Row) -> None:
        rows.append(row)
        if progress is not None:
            progress(row)

    # The bus first: later rows leave large conversations on the heap.
    done(await bus(1, 200_000))
    done(await bus(10, 100_000))
    done(await bus(100, None))
    for tokens, target in ((10_000, 2.0), (100_000, 2.0), (1_000_000, 3.0), (3_500_000, 5.0)):
        done(after_one_turn(tokens, target))
    done(from_scratch())
    for messages in (1_000, 10_000, 100_000):
        done(await clone(messages))
    for tokens in (10_000, 100_000, 1_000_000):
        done(fold(tokens, 25.0))
    with tempfile.TemporaryDirectory() as directory:
        bad = Path(directory) / "bad.toml"
        bad.write_text('schema = "foldline.scenario/v1"\n[flow]\nname = 3\n', encoding="utf-8")
        done(cli("foldline --help", ["--help"], 0, 300.0))
        done(cli("foldline run BAD.toml to its exit-2 message", ["run", str(bad)], 2, 300.0))
        bytecode = "none written (PYTHONDONTWRITEBYTECODE set)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
        done(in_child("import runtime.runtime", "import runtime.runtime", 250.0, note=f"bytecode cache {bytecode}"))
        if os.environ.get("PYTHONDONTWRITEBYTECODE"):
            # Every module was compiled from source above: what an installed package (bytecode written) costs.
            cached = {"PYTHONDONTWRITEBYTECODE": ""}
            in_child("bytecode warm-up", "import runtime.runtime", None, runs=1, env=cached)
            _child_cpu_ms([sys.executable, "-m", "runtime.cli", "run", str(bad)], 2, cached)  # the CLI's own modules
            installed = "the modules' bytecode written by a first import, as an installed package has it"
            done(
                in_child(
                    "import runtime.runtime, bytecode cached",
                    "import runtime.runtime",
                    200.0,
                    env=cached,
                    note=installed,
                )
            )
            done(cli("foldline --help, bytecode cached", ["--help"], 0, None, env=cached, note=installed))
            args = ["run", str(bad)]
            done(cli("foldline run BAD.toml, bytecode cached", args, 2, None, env=cached, note=installed))
    encoding()  # fills the rank cache if this machine has never loaded the tokenizer
    done(
        in_child(
            "tokenizer load",
            "tokenizer.encoding()",
            100.0,
            prelude="from runtime.measuring import tokenizer\n",
            note="rank cache warm",
        )
    )
    done(
        in_child(
            "tokenizer load, rank cache off",
            "tokenizer.encoding()",
            None,
            prelude="from runtime.measuring import tokenizer\n",
            env={"FOLDLINE_CACHE_DIR": ""},
            note="the rank file parsed",
        )
    )
    done(
        in_child(
            "tokenizer: import to first count",
            "from runtime.measuring.tokenizer import count_tokens\ncount_tokens('hello world')",
            None,
            note="rank cache warm; what a program waits for its first count",
        )
    )
    return rows
