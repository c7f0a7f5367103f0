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
  ones with a per-call ceiling below it (without folding they fail as their
  own nodes).
- ``emitter``: seed 000's shape (ADR-0130 P3: a dependent child inherited
  3,477,964 characters on a provider taking 1,048,576 a turn): an emitter with
  no ceiling reads until its view is about 3.3 times its children's ceiling,
  then 3 dependent workers fold their own copy and a bounded checker has a
  per-call ceiling below it (without folding it fails as its own node). The
  seed's absolute size is past the simulated model's 1M-token window, so the
  ratio is kept.
- ``staged-curl``: seed 004's staged task (pi-fold's 64-stage run over the
  curl repository: 1,249,415 fresh tokens over 56 stages against a 272,000-token
  budget, about 8% of the budget a stage): 64 stages each adding about 8% of a
  50,000-token ceiling.

The sizes of these two come from the seeds' figures, not from how the policy
fares on them; none of the workloads is tuned to move a figure.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from runtime.bench.tools import BENCH_TOOLS, stage_fact
from runtime.bench.workload_text import probe as _probe
from runtime.bench.workload_text import read as _read
from runtime.bench.workload_text import reading_steps as _reading_steps
from runtime.bench.workload_text import scenario_text as _scenario_text_on
from runtime.bench.workload_text import sizes as _sizes
from runtime.bench.workload_text import system as _system
from runtime.config import Scenario
from runtime.config.loader import loads_scenario

MODEL = "claude-opus-5"
"""The benchmark's model: the simulator serves it like claude-haiku-5-5 (a 1M-token window, a 512-token
cache minimum) and the pricing table knows every one of its prices, output included."""
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
    emitter_reads: int = 23
    emitter_chars: tuple[int, int] = (20_000, 40_000)
    emitter_child_ceiling: int = 60_000
    emitter_bounded_ceiling: int = 40_000
    curl_stages: int = 64
    curl_stage_chars: tuple[int, int] = (7_000, 21_000)
    curl_ceiling: int = 50_000


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
    emitter_reads=14,
    emitter_chars=(3_000, 5_000),
    emitter_child_ceiling=5_000,
    emitter_bounded_ceiling=3_000,
    curl_stages=10,
    curl_stage_chars=(1_200, 3_600),
    curl_ceiling=8_000,
)


RUN_AS_IS: Mapping[str, Any] = {"prompt_caching": True, "context_management": True}
"""Every workload profile's own settings: foldline's (caching and folding on), so that ``foldline run`` of a
shipped file shows foldline at work. Each strategy sets both keys itself (:mod:`runtime.bench.strategies`), so
the bench's figures do not depend on them."""


def _scenario_text(
    name: str,
    description: str,
    profiles: Mapping[str, Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any] | None = None,
) -> str:
    shown = {profile_name: {**profile, **RUN_AS_IS} for profile_name, profile in profiles.items()}
    return _scenario_text_on(name, description, shown, nodes, run, model=MODEL)


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
    return _staged(
        "staged-64",
        sizes.stages,
        sizes.stage_chars,
        sizes.staged_ceiling,
        sizes,
        f"{sizes.stages} stages in one iterative turn; each stage's result carries the key the next stage needs "
        f"plus {sizes.stage_chars[0]:,} to {sizes.stage_chars[1]:,} characters of bulk output; "
        f"{sizes.staged_ceiling:,}-token ceiling.",
    )


def staged_curl(sizes: Sizes) -> str:
    return _staged(
        "staged-curl",
        sizes.curl_stages,
        sizes.curl_stage_chars,
        sizes.curl_ceiling,
        sizes,
        f"Seed 004's staged task: {sizes.curl_stages} stages in one turn, each adding about 8% of the "
        f"{sizes.curl_ceiling:,}-token ceiling ({sizes.curl_stage_chars[0]:,} to {sizes.curl_stage_chars[1]:,} "
        "characters), the share pi-fold's 64-stage run added per stage (1,249,415 fresh tokens over 56 stages "
        "against a 272,000-token budget).",
    )


def _staged(name: str, stages: int, stage_chars: tuple[int, int], ceiling: int, sizes: Sizes, description: str) -> str:
    rng = random.Random(name)
    bulk = _sizes(rng, stages, stage_chars)
    probe_every = max(2, stages // 8)
    steps: list[dict[str, Any]] = []
    for n in range(1, stages + 1):
        calls: list[dict[str, Any]] = []
        if n > probe_every and n % probe_every == 0:
            calls.append(_probe(stage_fact(n - probe_every + 1)))
        arguments: dict[str, Any] = {"n": n, "size": bulk[n - 1]}
        if n > 1:
            arguments["key"] = {"recall": stage_fact(n - 1)}
        calls.append({"name": "stage", "arguments": arguments})
        steps.append({"tool_calls": calls})
    steps.append({"text": f"All {stages} stages are complete."})
    system = _system(
        f"{name}/system",
        sizes.system_chars,
        "You are running a staged job. Call stage 1, then each next stage with the key the previous stage "
        "printed; when asked what an earlier key was, answer with answer.",
    )
    return _scenario_text(
        name,
        description,
        # A wrong key fails the job (the bench's signal that a strategy lost it), not an error result.
        {"default": {"system": system, "tools": list(STAGE_TOOLS), "max_input_tokens": ceiling, "tool_errors": "fail"}},
        [
            {
                "id": "runner",
                "instruction": f"Run all {stages} stages of the job in order, in this one turn.",
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


EMITTER_WORKERS = 3
SEED_000_RATIO = 3_477_964 / 1_048_576
"""Seed 000 (P3): a child inherited 3,477,964 characters of history on a provider taking 1,048,576 per turn."""


def emitter(sizes: Sizes) -> str:
    """Seed 000's emitter feeding dependent children, at the seed's ratio of inherited view to child ceiling.

    The emitter runs with no ceiling (the seed's emitter ran on a provider that took its whole
    history); its dependent children clone its view and start at about 3.3 times their own
    ceiling: iterative workers fold their own copy and recall the emitter's facts, a bounded
    checker must fail as its own node. The seed's absolute size (3.48M characters, about 1.0M
    simulator tokens) is past the simulated model's 1M-token window, so the ratio is kept, not the size.
    """
    rng = random.Random("emitter")
    lead_sizes = _sizes(rng, sizes.emitter_reads, sizes.emitter_chars)
    lead_facts = [f"E{i + 1}" for i in range(sizes.emitter_reads)]
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_read(f"emitter/doc-{i + 1:02d}.md", size, [lead_facts[i]])]}
        for i, size in enumerate(lead_sizes)
    ]
    children = [f"worker-{i + 1}" for i in range(EMITTER_WORKERS)] + ["checker"]
    steps.append({"tool_calls": [{"name": "spawn", "arguments": {"node": child}} for child in children]})
    steps.append({"text": f"Spawned {len(children)} children from what I read."})
    system = _system(
        "emitter/system",
        sizes.system_chars,
        "You are an emitter. Read the documents with read_doc, then hand the follow-up work to children "
        "that start from a copy of this conversation.",
    )
    nodes: list[dict[str, Any]] = [
        {
            "id": "emitter",
            "profile": "emitter",
            "instruction": "Read the documents, then spawn the children.",
            "max_rounds": 4 * len(steps),
            "script": steps,
        }
    ]
    for i in range(EMITTER_WORKERS):
        recalled = [lead_facts[(3 * i) % len(lead_facts)], lead_facts[(3 * i + 4) % len(lead_facts)]]
        child_steps: list[dict[str, Any]] = [
            {"tool_calls": [_read(f"worker-{i + 1}/extra.md", _sizes(rng, 1, sizes.emitter_chars)[0])]},
            {"tool_calls": [_probe(fact) for fact in recalled]},
            {"text": f"Worker {i + 1} checked facts {recalled[0]} and {recalled[1]}."},
        ]
        nodes.append(
            {
                "id": f"worker-{i + 1}",
                "spawned_by": "emitter",
                "inherit": "view",
                "instruction": f"Read your extra document, then state facts {recalled[0]} and {recalled[1]} from "
                "the emitter's reading.",
                "max_rounds": 4 * len(child_steps),
                "script": child_steps,
            }
        )
    nodes.append(
        {
            "id": "checker",
            "spawned_by": "emitter",
            "inherit": "view",
            "operation": "bounded",
            "max_input_tokens": sizes.emitter_bounded_ceiling,
            "instruction": "In one answer, say whether the emitter's reading is complete.",
            "script": [{"text": "The emitter's reading is complete."}],
        }
    )
    return _scenario_text(
        "emitter",
        f"Seed 000's shape: an emitter with no ceiling reads {sizes.emitter_reads} documents of "
        f"{sizes.emitter_chars[0]:,} to {sizes.emitter_chars[1]:,} characters, then spawns {EMITTER_WORKERS} "
        f"dependent workers under a {sizes.emitter_child_ceiling:,}-token ceiling (they start at about "
        f"{SEED_000_RATIO:.1f} times it, as the seed's child did, and fold their own copy) and one bounded "
        f"checker with a {sizes.emitter_bounded_ceiling:,}-token per-call ceiling (without folding it fails as its own node).",
        {
            "default": {"system": system, "tools": list(FANOUT_TOOLS), "max_input_tokens": sizes.emitter_child_ceiling},
            "emitter": {"system": system, "tools": list(FANOUT_TOOLS), "max_input_tokens": "none"},
        },
        nodes,
        run={"concurrency": 2, "spawn_limit": 8},
    )


WORKLOADS: Mapping[str, Callable[[Sizes], str]] = {
    "fits": fits,
    "reading-20k": reading_20k,
    "reading-40k": reading_40k,
    "staged-64": staged_64,
    "fanout": fanout,
    "emitter": emitter,
    "staged-curl": staged_curl,
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
