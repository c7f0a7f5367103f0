"""The benchmark workloads, written out as scenario files (pure apart from file I/O at the edges).

Each workload is a function of a :class:`Sizes` value that returns the text
of a scenario file (``schema = "foldline.scenario/v1"``). The files under
``scenarios/bench/`` are :data:`FULL` renderings, committed so they can be read
and run as they are; a test checks they still match this module. The
:data:`SMALL` renderings are the same shapes scaled down, for the test that
keeps the harness from rotting.

Every node is scripted for the reader policy (:mod:`runtime.bench.reader`):
reads and stages of the bench tools (:mod:`runtime.bench.tools`), facts
planted in their outputs, and recall probes (``answer`` calls whose value is
``{ recall = "<fact>" }``) placed well after the read that planted the fact.
Document and stage sizes come from a random generator seeded by the
workload's name, so every rendering is the same.

- ``fits``: about 20k tokens of system and tools, about 2k new tokens per
  round, 50 rounds, under a ceiling it never reaches.
- ``reading-20k``: 40 reads of 2,000 to 30,000 characters under a
  20,000-token ceiling, with probes.
- ``reading-40k``: 28 reads of the same mix under a 40,000-token ceiling.
- ``staged-64``: 64 stages in one iterative turn; each stage needs the key
  the previous one printed and adds bulk output; 100,000-token ceiling.
- ``fanout``: a lead reads until its view is large, then spawns 8 children
  cloned from its view: 5 iterative ones under a ceiling below the lead's
  size (they fold their own copy and recall the lead's facts) and 3 bounded
  ones with a per-call ceiling below it (they fail as their own nodes).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from actors.tools import synthetic_text
from runtime.bench.tools import BENCH_TOOLS, stage_fact
from runtime.config import Scenario
from runtime.config.loader import load_scenario, loads_scenario

MODEL = "claude-haiku-5-5"
TOOLS = ("read_doc", "answer")
STAGE_TOOLS = ("stage", "answer")
FANOUT_TOOLS = ("read_doc", "answer", "spawn")


@attrs.frozen
class Sizes:
    """How big each workload is; :data:`FULL` is the benchmark, :data:`SMALL` the test's."""

    label: str
    fits_system_chars: int
    fits_rounds: int
    fits_read_chars: int
    fits_ceiling: int
    reading_small_reads: int
    reading_large_reads: int
    read_chars: tuple[int, int]
    reading_small_ceiling: int
    reading_large_ceiling: int
    stages: int
    stage_chars: tuple[int, int]
    staged_ceiling: int
    fanout_lead_reads: int
    fanout_lead_chars: tuple[int, int]
    fanout_lead_ceiling: int
    fanout_child_ceiling: int
    fanout_bounded_ceiling: int
    system_chars: int


FULL = Sizes(
    label="full",
    fits_system_chars=76_000,
    fits_rounds=50,
    fits_read_chars=7_200,
    fits_ceiling=200_000,
    reading_small_reads=40,
    reading_large_reads=28,
    read_chars=(2_000, 30_000),
    reading_small_ceiling=20_000,
    reading_large_ceiling=40_000,
    stages=64,
    stage_chars=(6_000, 24_000),
    staged_ceiling=100_000,
    fanout_lead_reads=14,
    fanout_lead_chars=(12_000, 20_000),
    fanout_lead_ceiling=100_000,
    fanout_child_ceiling=40_000,
    fanout_bounded_ceiling=30_000,
    system_chars=3_000,
)

SMALL = Sizes(
    label="small",
    fits_system_chars=6_000,
    fits_rounds=8,
    fits_read_chars=1_500,
    fits_ceiling=30_000,
    reading_small_reads=10,
    reading_large_reads=8,
    read_chars=(1_000, 7_000),
    reading_small_ceiling=6_000,
    reading_large_ceiling=9_000,
    stages=10,
    stage_chars=(1_500, 5_000),
    staged_ceiling=10_000,
    fanout_lead_reads=5,
    fanout_lead_chars=(3_000, 5_000),
    fanout_lead_ceiling=30_000,
    fanout_child_ceiling=6_000,
    fanout_bounded_ceiling=4_000,
    system_chars=600,
)


# -- a small TOML writer for the values a scenario holds -------------------------------


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Sequence):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot write {value!r} ({type(value).__name__}) as a TOML value")


def _long_text(text: str) -> str:
    """A multi-line literal string (the text must not contain three single quotes)."""
    if "'''" in text:
        raise ValueError("text for a multi-line literal string contains '''")
    return "'''\n" + text + "'''"


def _table(lines: list[str], header: str, values: Mapping[str, Any]) -> None:
    lines.append(header)
    for key, value in values.items():
        if key == "script":
            lines.append("script = [")
            lines.extend(f"  {_toml_value(step)}," for step in value)
            lines.append("]")
        elif isinstance(value, str) and "\n" in value:
            lines.append(f"{key} = {_long_text(value)}")
        else:
            lines.append(f"{key} = {_toml_value(value)}")
    lines.append("")


def _scenario_text(
    name: str,
    description: str,
    profiles: Mapping[str, Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any] | None = None,
) -> str:
    lines = [
        f"# Benchmark workload {name!r}, written by runtime/bench/workloads.py; regenerate it there, do not edit.",
        'schema = "foldline.scenario/v1"',
        f"name = {_toml_value(name)}",
        f"description = {_toml_value(description)}",
        "",
    ]
    if run:
        _table(lines, "[run]", run)
    _table(lines, "[provider]", {"kind": "simulated", "model": MODEL})
    for profile_name, profile in profiles.items():
        _table(lines, f"[profiles.{profile_name}]", profile)
    for node in nodes:
        _table(lines, "[[nodes]]", node)
    return "\n".join(lines)


# -- plan pieces ----------------------------------------------------------------------


def _read(path: str, size: int, facts: Sequence[str] = ()) -> dict[str, Any]:
    arguments: dict[str, Any] = {"path": path, "size": size}
    if facts:
        arguments["facts"] = list(facts)
    return {"name": "read_doc", "arguments": arguments}


def _probe(fact: str) -> dict[str, Any]:
    return {"name": "answer", "arguments": {"fact": fact, "value": {"recall": fact}}}


def _system(seed: str, chars: int, lead: str) -> str:
    body = synthetic_text(seed, max(0, chars - len(lead) - 1))
    return lead + "\n" + body


def _sizes(rng: random.Random, count: int, bounds: tuple[int, int]) -> list[int]:
    low, high = bounds
    return [rng.randrange(low, high + 1, 100) if high - low >= 100 else low for _ in range(count)]


def _reading_steps(prefix: str, sizes: Sequence[int], facts_every: int, probe_lag: int) -> list[dict[str, Any]]:
    """Reads with a fact planted in every ``facts_every``-th one, each probed ``probe_lag`` reads later."""
    steps: list[dict[str, Any]] = []
    planted: dict[int, str] = {}
    for i, size in enumerate(sizes):
        facts = []
        if i % facts_every == 1:
            fact = f"{prefix}{i + 1}"
            facts.append(fact)
            planted[i] = fact
        calls = []
        probed = planted.pop(i - probe_lag, None)
        if probed is not None:
            calls.append(_probe(probed))
        calls.append(_read(f"docs/{prefix.lower()}{i + 1:03d}.md", size, facts))
        steps.append({"tool_calls": calls})
    late = [_probe(fact) for _, fact in sorted(planted.items())]
    if late:
        steps.append({"tool_calls": late})
    return steps


# -- the workloads ---------------------------------------------------------------------


def fits(sizes: Sizes) -> str:
    rng = random.Random("fits")
    system = _system(
        "fits/handbook",
        sizes.fits_system_chars,
        "You are a maintenance agent. The handbook below is your standing reference; read one queue item per "
        "round with read_doc and answer the questions you are asked with answer.",
    )
    steps: list[dict[str, Any]] = []
    planted: list[str] = []
    for i in range(sizes.fits_rounds - 1):
        facts = []
        if i % 8 == 2:
            facts = [f"Q{i + 1}"]
            planted.append(facts[0])
        calls = []
        if i % 8 == 6 and planted:
            calls.append(_probe(planted.pop(0)))
        size = sizes.fits_read_chars + rng.randrange(-300, 301, 100)
        calls.append(_read(f"queue/item-{i + 1:03d}.md", size, facts))
        steps.append({"tool_calls": calls})
    steps.append({"text": "The queue is done; every item was read and every question answered."})
    return _scenario_text(
        "fits",
        "A loop that stays under its ceiling: about 20k tokens of system and tools, about 2k new tokens per "
        f"round, {sizes.fits_rounds} rounds.",
        {"default": {"system": system, "tools": list(TOOLS), "max_input_tokens": sizes.fits_ceiling}},
        [
            {
                "id": "worker",
                "instruction": "Work through the queue, one item per round; answer each question as it comes.",
                "max_rounds": 3 * sizes.fits_rounds,
                "script": steps,
            }
        ],
    )


def _reading(name: str, reads: int, ceiling: int, sizes: Sizes) -> str:
    rng = random.Random(name)
    doc_sizes = _sizes(rng, reads, sizes.read_chars)
    steps = _reading_steps("F", doc_sizes, facts_every=3, probe_lag=7)
    steps.append({"text": f"Read all {reads} documents and answered every question about them."})
    system = _system(
        f"{name}/system",
        sizes.system_chars,
        "You are a research agent. Read each document you are given with read_doc; when asked what a fact "
        "said, answer with answer.",
    )
    return _scenario_text(
        name,
        f"{reads} reads of {sizes.read_chars[0]:,} to {sizes.read_chars[1]:,} characters under a "
        f"{ceiling:,}-token ceiling, with facts planted in the documents and probed seven reads later.",
        {"default": {"system": system, "tools": list(TOOLS), "max_input_tokens": ceiling}},
        [
            {
                "id": "reader",
                "instruction": f"Read the {reads} documents in order and answer each question about them.",
                "max_rounds": 4 * len(steps),
                "script": steps,
            }
        ],
    )


def reading_20k(sizes: Sizes) -> str:
    return _reading("reading-20k", sizes.reading_small_reads, sizes.reading_small_ceiling, sizes)


def reading_40k(sizes: Sizes) -> str:
    return _reading("reading-40k", sizes.reading_large_reads, sizes.reading_large_ceiling, sizes)


def staged_64(sizes: Sizes) -> str:
    rng = random.Random("staged-64")
    bulk = _sizes(rng, sizes.stages, sizes.stage_chars)
    probe_every = max(2, sizes.stages // 8)
    steps: list[dict[str, Any]] = []
    for n in range(1, sizes.stages + 1):
        calls: list[dict[str, Any]] = []
        if n > probe_every and n % probe_every == 0:
            calls.append(_probe(stage_fact(n - probe_every + 1)))
        arguments: dict[str, Any] = {"n": n, "size": bulk[n - 1]}
        if n > 1:
            arguments["key"] = {"recall": stage_fact(n - 1)}
        calls.append({"name": "stage", "arguments": arguments})
        steps.append({"tool_calls": calls})
    steps.append({"text": f"All {sizes.stages} stages are complete."})
    system = _system(
        "staged-64/system",
        sizes.system_chars,
        "You are running a staged job. Call stage 1, then each next stage with the key the previous stage "
        "printed; when asked what an earlier key was, answer with answer.",
    )
    return _scenario_text(
        "staged-64",
        f"{sizes.stages} stages in one iterative turn; each stage's result carries the key the next stage needs "
        f"plus {sizes.stage_chars[0]:,} to {sizes.stage_chars[1]:,} characters of bulk output; "
        f"{sizes.staged_ceiling:,}-token ceiling.",
        # A wrong key fails the job (the bench's signal that a strategy lost it), not an error result.
        {
            "default": {
                "system": system,
                "tools": list(STAGE_TOOLS),
                "max_input_tokens": sizes.staged_ceiling,
                "tool_errors": "fail",
            }
        },
        [
            {
                "id": "runner",
                "instruction": f"Run all {sizes.stages} stages of the job in order, in this one turn.",
                "max_rounds": 4 * len(steps),
                "script": steps,
            }
        ],
    )


FANOUT_ITERATIVE = 5
FANOUT_BOUNDED = 3


def fanout(sizes: Sizes) -> str:
    rng = random.Random("fanout")
    lead_sizes = _sizes(rng, sizes.fanout_lead_reads, sizes.fanout_lead_chars)
    lead_facts = [f"L{i + 1}" for i in range(sizes.fanout_lead_reads)]
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_read(f"lead/doc-{i + 1:02d}.md", size, [lead_facts[i]])]} for i, size in enumerate(lead_sizes)
    ]
    children = [f"worker-{i + 1}" for i in range(FANOUT_ITERATIVE)] + [
        f"checker-{i + 1}" for i in range(FANOUT_BOUNDED)
    ]
    steps.append({"tool_calls": [{"name": "spawn", "arguments": {"node": child}} for child in children]})
    steps.append({"text": f"Spawned {len(children)} children from what I read."})
    system = _system(
        "fanout/system",
        sizes.system_chars,
        "You are a lead agent. Read the documents with read_doc, then hand the follow-up work to children "
        "that start from a copy of this conversation.",
    )
    nodes: list[dict[str, Any]] = [
        {
            "id": "lead",
            "instruction": "Read the lead documents, then spawn the follow-up workers and checkers.",
            "max_rounds": 4 * len(steps),
            "script": steps,
        }
    ]
    for i in range(FANOUT_ITERATIVE):
        own = _sizes(rng, 2, sizes.fanout_lead_chars)
        recalled = [lead_facts[(2 * i) % len(lead_facts)], lead_facts[(2 * i + 3) % len(lead_facts)]]
        child_steps: list[dict[str, Any]] = [
            {"tool_calls": [_read(f"worker-{i + 1}/extra-{j + 1}.md", size)]} for j, size in enumerate(own)
        ]
        child_steps.append({"tool_calls": [_probe(fact) for fact in recalled]})
        child_steps.append({"text": f"Worker {i + 1} checked its two facts against the lead's reading."})
        nodes.append(
            {
                "id": f"worker-{i + 1}",
                "spawned_by": "lead",
                "inherit": "view",
                "profile": "child",
                "instruction": f"Read your two extra documents, then state facts {recalled[0]} and {recalled[1]} "
                "from the lead's reading.",
                "max_rounds": 4 * len(child_steps),
                "script": child_steps,
            }
        )
    for i in range(FANOUT_BOUNDED):
        nodes.append(
            {
                "id": f"checker-{i + 1}",
                "spawned_by": "lead",
                "inherit": "view",
                "profile": "child",
                "operation": "bounded",
                "max_input_tokens": sizes.fanout_bounded_ceiling,
                "instruction": "In one answer, say whether the lead's reading is complete.",
                "script": [{"text": "The lead's reading is complete."}],
            }
        )
    return _scenario_text(
        "fanout",
        f"A lead reads {sizes.fanout_lead_reads} documents, then spawns {FANOUT_ITERATIVE} iterative children "
        f"under a {sizes.fanout_child_ceiling:,}-token ceiling (they fold their own copy) and {FANOUT_BOUNDED} "
        f"bounded ones with a {sizes.fanout_bounded_ceiling:,}-token per-call ceiling (they must fail as their "
        "own nodes while the rest finish).",
        {
            "default": {"system": system, "tools": list(FANOUT_TOOLS), "max_input_tokens": sizes.fanout_lead_ceiling},
            "child": {"system": system, "tools": list(FANOUT_TOOLS), "max_input_tokens": sizes.fanout_child_ceiling},
        },
        nodes,
        run={"concurrency": 4, "spawn_limit": 16},
    )


WORKLOADS: Mapping[str, Callable[[Sizes], str]] = {
    "fits": fits,
    "reading-20k": reading_20k,
    "reading-40k": reading_40k,
    "staged-64": staged_64,
    "fanout": fanout,
}
"""Every workload by name, in table order."""


def render(name: str, sizes: Sizes = FULL) -> str:
    """The scenario file text of workload ``name`` at ``sizes``."""
    try:
        builder = WORKLOADS[name]
    except KeyError:
        raise ValueError(f"workload {name!r} is not one of {', '.join(WORKLOADS)}") from None
    return builder(sizes)


def build(name: str, sizes: Sizes = FULL) -> Scenario:
    """Workload ``name`` at ``sizes`` as a scenario (validated like a file)."""
    return loads_scenario(render(name, sizes), path_label=f"{name}.toml", tool_names=BENCH_TOOLS.names())


def file_name(name: str) -> str:
    return f"{name}.toml"


def load(directory: str | Path, name: str) -> Scenario:
    """Load workload ``name`` from its file in ``directory`` (the bench tools are known)."""
    return load_scenario(Path(directory) / file_name(name), tool_names=BENCH_TOOLS.names())


def write_all(directory: str | Path, sizes: Sizes = FULL) -> list[Path]:
    """Write every workload's file into ``directory``; returns the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in WORKLOADS:
        path = out / file_name(name)
        path.write_text(render(name, sizes), encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        print("usage: python -m runtime.bench.workloads DIRECTORY", file=sys.stderr)
        sys.exit(2)
    for written_path in write_all(sys.argv[1]):
        print(written_path)
