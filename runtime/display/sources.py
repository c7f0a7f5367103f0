"""What ``foldline report SOURCE`` reads, and what it found there.

A SOURCE is one of:

- a run's store (a SQLite file, or a directory holding one; ``foldline run --store``):
  the events, the scenario (each node's fold line) and every branch's record and view;
- a signals file (JSON Lines; ``foldline run --signals``): the events only;
- a ``foldline bench --json`` output (a JSON object with ``"schema": "foldline.bench/v1"``).

The kind is told from the file's first bytes, never from its name. A file that
is none of these raises :class:`ReportSourceError` naming the path, what was
found and what was expected.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from runtime.errors import FoldlineError
from runtime.inputs.files import FileTooLarge, read_bounded
from runtime.models.pricing import PricingTable
from runtime.report import ReportBuilder
from runtime.store.inspect import BranchPicture
from signals.envelope import Event, InvalidEventError

SQLITE_MAGIC = b"SQLite format 3\x00"
BENCH_SCHEMA = "foldline.bench/v1"
MAX_TEXT_SOURCE_BYTES = 1 << 30
"""The largest signals or bench file read (1 GiB); a store is read through SQLite and has no such bound."""


class ReportSourceError(FoldlineError):
    """A report source that cannot be read: the message names the path, what it is and what was expected."""


class MalformedSource(ReportSourceError):
    """A store that opens but whose content cannot be read back (a corrupt row, event or message)."""


@attrs.frozen
class RunSource:
    """A run read from a store or a signals file."""

    kind: str  # "store" or "signals"
    path: str
    events: tuple[Event, ...]
    report: Mapping[str, Any]
    default_model: str | None
    fold_at: Mapping[str, float | None]
    """Each node's fold fraction, None for a node that does not fold (from a store's scenario; empty otherwise)."""
    branches: tuple[BranchFacts, ...] | None
    """Every branch's picture (from a store), or None: a signals file holds no records or views."""
    pricing: PricingTable = attrs.field(factory=PricingTable.load_default)
    depends_on: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    """Each node's dependencies (from a store's scenario; empty otherwise)."""
    """The prices the run's report uses (a store's scenario's ``[pricing]`` merged in; the packaged table else)."""


@attrs.frozen
class BranchFacts:
    """A branch's picture (``foldline inspect``), its record's size, and the view entries that are restored
    originals (messages a note or a clipped copy once stood for, back in the view)."""

    picture: BranchPicture
    restored: frozenset[int]
    record_chars: int


@attrs.frozen
class BenchSource:
    path: str
    document: Mapping[str, Any]


def load_source(path: str | os.PathLike[str]) -> RunSource | BenchSource:
    """Read ``path`` as a store, a signals file or a bench JSON output (see the module docstring)."""
    label = os.fspath(path)
    target = Path(path)
    if not target.exists():
        raise ReportSourceError(f"{label}: no such file or directory; expected a store, a signals file or bench JSON")
    if target.is_dir() or _head(target, len(SQLITE_MAGIC)) == SQLITE_MAGIC:
        return _load_store(label)
    try:
        text = read_bounded(target, MAX_TEXT_SOURCE_BYTES, what="a report source").decode("utf-8")
    except FileTooLarge as exc:  # by its size, or (a device, a pipe) by what was read
        raise ReportSourceError(f"{label}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ReportSourceError(
            f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected a store, a signals file or bench JSON"
        ) from exc
    try:
        document = _whole_json(text)
    except RecursionError:
        raise ReportSourceError(f"{label}: JSON nested too deep; expected a signals file or bench JSON") from None
    if isinstance(document, dict) and "schema" in document and "type" not in document:
        if document.get("schema") != BENCH_SCHEMA:
            raise ReportSourceError(f"{label}: schema {document.get('schema')!r} is not {BENCH_SCHEMA!r}")
        _check_bench(label, document)
        return BenchSource(label, document)
    return _load_signals(label)


def _head(path: Path, count: int) -> bytes:
    with open(path, "rb") as file:
        return file.read(count)


def _whole_json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _check_bench(label: str, document: Mapping[str, Any]) -> None:
    workloads = document.get("workloads")
    if not isinstance(workloads, list):
        raise ReportSourceError(f"{label}: workloads: {workloads!r} is not a list of workload results")
    for index, workload in enumerate(workloads):
        where = f"{label}: workloads[{index}]"
        if not isinstance(workload, dict):
            raise ReportSourceError(f"{where}: {workload!r} is not a JSON object")
        for key, kind in (("workload", str), ("lower_bound", dict), ("runs", dict)):
            if not isinstance(workload.get(key), kind):
                raise ReportSourceError(f"{where}.{key}: {workload.get(key)!r} is not a {kind.__name__}")
        for name, run in workload["runs"].items():
            if (
                not isinstance(run, dict)
                or not isinstance(run.get("cost"), dict)
                or not isinstance(run.get("usage"), dict)
            ):
                raise ReportSourceError(f"{where}.runs.{name}: expected an object with cost and usage objects")


def _report(events: Sequence[Event], model: str | None, pricing: PricingTable | None = None) -> dict[str, Any]:
    return ReportBuilder(pricing or PricingTable.load_default(), model or "unknown").feed_all(events).to_json()


def _load_signals(label: str) -> RunSource:
    from runtime.display.model import first_model
    from signals.sinks import read_jsonl

    try:
        events = tuple(read_jsonl(label))
    except InvalidEventError as exc:
        raise ReportSourceError(f"not a signals file (JSON Lines of events) nor bench JSON: {exc}") from exc
    if not events:
        raise ReportSourceError(f"{label}: holds no events; expected a signals file written by foldline run --signals")
    model = first_model(events)
    return RunSource("signals", label, events, _report(events, model), model, {}, None)


def _load_store(label: str) -> RunSource:
    from runtime.store.errors import NotAStore, StoreCorrupt
    from runtime.store.integrity import check_events_cover_rows
    from runtime.store.reader import StoreReader

    try:
        reader = StoreReader(label)
    except NotAStore as exc:
        raise ReportSourceError(str(exc)) from exc
    with reader:
        try:
            events = tuple(reader.events())
            check_events_cover_rows(reader.requests(), events, label)  # never a report of fewer requests than sent
            scenario = _stored_scenario(reader)
            branches = branch_facts_of(reader)
        except StoreCorrupt as exc:
            raise MalformedSource(f"{label}: malformed store: {exc}") from exc
    model = scenario.provider.model_config.name if scenario is not None else None
    fold_at: dict[str, float | None] = {}
    if scenario is not None:
        for node in scenario.nodes:
            profile = scenario.profiles.get(node.profile)
            if profile is not None:
                folds = profile.context_management and profile.context_strategy == "fold"
                fold_at[node.id] = profile.context_fold_at if folds else None
    pricing = scenario.prices() if scenario is not None else PricingTable.load_default()
    depends_on = {node.id: tuple(node.depends_on) for node in scenario.nodes} if scenario is not None else {}
    report = _report(events, model, pricing)
    return RunSource("store", label, events, report, model, fold_at, branches, pricing, depends_on)


def _stored_scenario(reader: Any) -> Any:
    from runtime.config.loader import loads_scenario
    from runtime.scenarios.tools import stored_tool_names
    from runtime.store.integrity import stored_scenario_label

    meta = reader.meta()
    if "scenario_text" not in meta:
        return None
    return loads_scenario(
        meta["scenario_text"],
        path_label=stored_scenario_label(reader.label, meta),
        tool_names=stored_tool_names(meta),
    )


def branch_facts_of(reader: Any) -> tuple[BranchFacts, ...]:
    """Every stored branch's view as its requests compile it (what ``foldline inspect`` shows)."""
    from runtime.measuring.tokenizer import count_tokens
    from runtime.store.inspect import describe_branch, side_prompt_ids
    from runtime.store.replay import result_projection

    branches = reader.restore_branches()
    nodes = reader.node_of_branches()
    rows = reader.requests()
    bounds = {row.branch_id: row.result_bound for row in rows if row.intent != "side"}
    side = side_prompt_ids(rows)
    facts = []
    for branch in branches.values():
        projection = result_projection(bounds.get(branch.id), branch, branch.state.protected_round)
        picture = describe_branch(
            branch, count_tokens=count_tokens, node_id=nodes.get(branch.id), projection=projection, side_prompts=side
        )
        facts.append(branch_facts(branch, picture))
    return tuple(facts)


def branch_facts(branch: Any, picture: BranchPicture) -> BranchFacts:
    """What the picture leaves out: the record's size and which view entries are restored originals."""
    from runtime.store.inspect import message_chars
    from runtime.values.messages import Note, ToolResult

    ever_folded: set[str] = set()
    record_chars = 0
    for index in range(branch.record_length()):
        message = branch.message_at(index)
        record_chars += message_chars(message)
        if isinstance(message, Note):
            ever_folded.update(message.replaced)
        elif isinstance(message, ToolResult) and message.clipped_from is not None:
            ever_folded.add(message.clipped_from)
    restored = frozenset(entry.index for entry in picture.entries if branch.message_at(entry.index).id in ever_folded)
    return BranchFacts(picture=picture, restored=restored, record_chars=record_chars)
