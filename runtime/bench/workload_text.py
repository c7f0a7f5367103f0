"""The pieces the benchmark workloads are written from: a small TOML writer and plan steps (pure).

:mod:`runtime.bench.workloads` builds each workload's scenario file text from these.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from actors.tools import synthetic_text

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


def scenario_text(
    name: str,
    description: str,
    profiles: Mapping[str, Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
    run: Mapping[str, Any] | None = None,
    *,
    model: str,
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
    _table(lines, "[provider]", {"kind": "simulated", "model": model})
    for profile_name, profile in profiles.items():
        _table(lines, f"[profiles.{profile_name}]", profile)
    for node in nodes:
        _table(lines, "[[nodes]]", node)
    return "\n".join(lines)


# -- plan pieces ----------------------------------------------------------------------


def read(path: str, size: int, facts: Sequence[str] = ()) -> dict[str, Any]:
    arguments: dict[str, Any] = {"path": path, "size": size}
    if facts:
        arguments["facts"] = list(facts)
    return {"name": "read_doc", "arguments": arguments}


def probe(fact: str) -> dict[str, Any]:
    return {"name": "answer", "arguments": {"fact": fact, "value": {"recall": fact}}}


def system(seed: str, chars: int, lead: str) -> str:
    body = synthetic_text(seed, max(0, chars - len(lead) - 1))
    return lead + "\n" + body


def sizes(rng: random.Random, count: int, bounds: tuple[int, int]) -> list[int]:
    low, high = bounds
    return [rng.randrange(low, high + 1, 100) if high - low >= 100 else low for _ in range(count)]


def reading_steps(prefix: str, sizes: Sequence[int], facts_every: int, probe_lag: int) -> list[dict[str, Any]]:
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
            calls.append(probe(probed))
        calls.append(read(f"docs/{prefix.lower()}{i + 1:03d}.md", size, facts))
        steps.append({"tool_calls": calls})
    late = [probe(fact) for _, fact in sorted(planted.items())]
    if late:
        steps.append({"tool_calls": late})
    return steps
