"""The models the simulated server serves, with the facts it enforces, as data.

Every Claude model the model table lists (``runtime/data/models.toml``: the
ids the ``anthropic`` SDK's ``Model`` type names, aliases and dated ids alike;
a test checks the installed SDK's list against it) is served, plus the ids in
:data:`STATED` and the dated ids in :data:`DATED_IDS` (an id an SDK release
drops stays served). Nothing here imports the SDK: the scripted provider,
which is this simulator called in process, never pays for it.
Per model:

- ``min_cacheable_tokens``: the shortest prefix a cache mark may write (a
  shorter one is processed without caching and without an error). Stated
  for the models in :data:`STATED` (Anthropic's prompt-caching page, see the
  project's caching notes); :data:`DEFAULT_MIN_CACHEABLE` otherwise.
- ``context_window``: the most input tokens a request may carry (past it the
  API answers 400 "prompt is too long"): the model table's figure
  (``runtime/data/models.toml``, a source per row, shared with the runtime);
  :data:`DEFAULT_CONTEXT_WINDOW` where no source states it.
- ``created_at``: the date in a dated id (``...-20250929``), else the epoch
  (the Models API's documented value for an unknown release date).
- ``lifecycle``: ``deprecated`` with ``retires_at`` for the ids the SDK warns
  about (its end-of-life table), ``active`` otherwise. The simulator serves
  deprecated ids all the same.

A dated id has the facts of its alias. Counts are in the simulator's own tokens.
"""

from __future__ import annotations

import functools
import re
import typing
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from runtime.models.limits import default_model_table
from runtime.sim.errors import SimAPIError

DEFAULT_MIN_CACHEABLE = 1_024
DEFAULT_CONTEXT_WINDOW = 200_000
EPOCH = "1970-01-01T00:00:00Z"

STATED: Mapping[str, int] = MappingProxyType(
    {
        # id: the minimum cacheable prefix (Anthropic's prompt-caching page, see the project's caching notes)
        "claude-haiku-5-5": 512,
        "claude-fable-5-1": 512,
        "claude-mythos-5-1": 512,
        "claude-fable-5": 512,
        "claude-mythos-5": 512,
        "claude-opus-5": 512,
        "claude-sonnet-5": 1_024,
        "claude-opus-4-8": 1_024,
        "claude-sonnet-4-6": 1_024,
        "claude-sonnet-4-5": 1_024,
        "claude-mythos-preview": 2_048,
        "claude-opus-4-7": 2_048,
        "claude-opus-4-6": 4_096,
        "claude-opus-4-5": 4_096,
        "claude-haiku-4-5": 4_096,
    }
)
DATED_IDS: tuple[str, ...] = (
    # Dated snapshots of the aliases above, as the SDK releases up to 2.14 named them (a dated id has its alias's facts).
    "claude-sonnet-4-5-20250929",
    "claude-haiku-4-5-20251001",
    "claude-opus-4-5-20251101",
)
"""Dated ids served whether or not the installed SDK still names them (older clients send them)."""

RETIRES_AT: Mapping[str, str] = MappingProxyType(
    {
        # The SDK's end-of-life table (anthropic 2.14.0, _data/deprecated_models.py).
        "claude-mythos-preview": "2026-06-30T00:00:00Z",
        "claude-opus-4-5": "2027-01-22T00:00:00Z",
        "claude-sonnet-4-5": "2026-11-30T00:00:00Z",
    }
)

_DATED = re.compile(r"^(?P<alias>.+)-(?P<y>\d{4})(?P<m>\d{2})(?P<d>\d{2})$")


@attrs.frozen
class ModelFacts:
    name: str
    min_cacheable_tokens: int
    context_window: int
    created_at: str = EPOCH
    retires_at: str | None = None

    def info(self) -> dict[str, Any]:
        """The model as ``GET /v1/models/{id}`` describes it."""
        return {
            "type": "model",
            "id": self.name,
            "display_name": display_name(self.name),
            "created_at": self.created_at,
            "lifecycle": "deprecated" if self.retires_at is not None else "active",
            "deprecated_at": None,
            "retires_at": self.retires_at,
            "max_input_tokens": self.context_window,
        }


def display_name(model_id: str) -> str:
    """``claude-opus-4-6`` -> ``Claude Opus 4.6`` (a dated id keeps no date)."""
    match = _DATED.match(model_id)
    words = (match["alias"] if match else model_id).split("-")
    names = [word.capitalize() for word in words if not word.isdigit()]
    version = ".".join(word for word in words if word.isdigit())
    return " ".join(names + ([version] if version else []))


def sdk_model_ids() -> tuple[str, ...]:
    """The model ids the installed ``anthropic`` SDK's ``Model`` type names, in its order.

    For the check that the model table lists them all (it imports the SDK: never on a request's path).
    """
    from anthropic.types import Model

    ids: list[str] = []
    for arm in typing.get_args(Model):
        ids.extend(value for value in typing.get_args(arm) if isinstance(value, str))
    return tuple(ids)


def _facts(model_id: str) -> ModelFacts:
    match = _DATED.match(model_id)
    alias = match["alias"] if match else model_id
    minimum = STATED.get(alias, DEFAULT_MIN_CACHEABLE)
    window = default_model_table().context_window(alias) or DEFAULT_CONTEXT_WINDOW
    created = f"{match['y']}-{match['m']}-{match['d']}T00:00:00Z" if match else EPOCH
    return ModelFacts(model_id, minimum, window, created, RETIRES_AT.get(alias))


def table_model_ids() -> tuple[str, ...]:
    """The Claude models of the packaged model table (names starting ``claude-``), in its order."""
    return tuple(name for name in default_model_table().entries if name.startswith("claude-"))


@functools.cache
def served_models() -> Mapping[str, ModelFacts]:
    """Every model served: the model table's Claude ids, then the stated and dated ones (built on first use)."""
    ids = dict.fromkeys((*table_model_ids(), *STATED, *DATED_IDS))
    return MappingProxyType({model_id: _facts(model_id) for model_id in ids})


def model_facts(model: str) -> ModelFacts:
    """The facts of ``model``; an unknown model is the API's 404 ``not_found_error``."""
    facts = served_models().get(model)
    if facts is None:
        raise SimAPIError(404, "not_found_error", f"model: {model}")
    return facts


def list_models(query: Mapping[str, str]) -> dict[str, Any]:
    """``GET /v1/models``: a page of models (``limit`` 1-1000, default 20; ``after_id`` / ``before_id``)."""
    models = served_models()
    ids = list(models)
    raw_limit = query.get("limit", "20")
    if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= 1000:
        raise SimAPIError(400, "invalid_request_error", f"limit: expected an integer from 1 to 1000, got {raw_limit!r}")
    limit = int(raw_limit)
    for cursor in ("after_id", "before_id"):
        if cursor in query and query[cursor] not in models:
            raise SimAPIError(400, "invalid_request_error", f"{cursor}: no model {query[cursor]!r}")
    if "before_id" in query:
        end = ids.index(query["before_id"])
        page = ids[max(0, end - limit) : end]
        has_more = end - limit > 0
    else:
        begin = ids.index(query["after_id"]) + 1 if "after_id" in query else 0
        page = ids[begin : begin + limit]
        has_more = begin + limit < len(ids)
    return {
        "data": [models[model_id].info() for model_id in page],
        "has_more": has_more,
        "first_id": page[0] if page else None,
        "last_id": page[-1] if page else None,
    }


SYSTEM_MESSAGE_MODELS = frozenset({"claude-opus-4-8"})
"""The models named as taking mid-conversation ``system`` messages: Anthropic's page on them says "available on
Claude Opus 4.8 only" (read 2026-12-04). Models of generation 5 and later (released after it) take them too:
Claude Code 2.1.332 treats every model from claude-opus-4-8 on as accepting them and sends them to its
default model, claude-opus-5-5, so the real API takes them there."""
FIRST_GENERATION_WITH_SYSTEM_MESSAGES = 5


def supports_system_messages(model: str) -> bool:
    """Whether ``model`` (an alias or a dated id) takes mid-conversation ``system`` messages."""
    match = _DATED.match(model)
    alias = match["alias"] if match else model
    generation = next((int(word) for word in alias.split("-") if word.isdigit()), 0)
    return alias in SYSTEM_MESSAGE_MODELS or (
        alias.startswith("claude-") and generation >= FIRST_GENERATION_WITH_SYSTEM_MESSAGES
    )
