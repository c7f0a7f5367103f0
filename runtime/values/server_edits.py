"""Anthropic's server-side context management: the edit types, their betas and documented defaults (pure).

One place for the names every layer uses: a profile's ``server_context_edits``
(:mod:`runtime.config.server_edits`) is sent as the request's
``context_management.edits``; the Anthropic provider names the betas the edits
need (:func:`betas_for`); the simulator applies them (:mod:`runtime.sim.context_edits`,
:mod:`runtime.sim.compaction`).

Defaults and bounds are Anthropic's, from its context-editing and compaction
pages: ``clear_tool_uses_20250919`` triggers above 100,000 input tokens and
keeps the 3 most recent tool uses; ``clear_thinking_20251015`` keeps the most
recent thinking turn; ``compact_20260112`` triggers at 150,000 input tokens
(at least 50,000).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from runtime.values.canonical import canonical_json

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
CLEAR_THINKING = "clear_thinking_20251015"
COMPACT = "compact_20260112"
EDIT_TYPES = (CLEAR_TOOL_USES, CLEAR_THINKING, COMPACT)

CONTEXT_MANAGEMENT_BETA = "context-management-2025-06-27"
COMPACT_BETA = "compact-2026-01-12"
BETA_OF = {CLEAR_TOOL_USES: CONTEXT_MANAGEMENT_BETA, CLEAR_THINKING: CONTEXT_MANAGEMENT_BETA, COMPACT: COMPACT_BETA}
"""The ``anthropic-beta`` value each edit type needs."""

MAX_EDITS = 8
"""The most edits one request may carry (the simulator's bound; the API names no number)."""

DEFAULT_TRIGGER_TOKENS = 100_000
DEFAULT_KEEP_TOOL_USES = 3
DEFAULT_KEEP_THINKING_TURNS = 1
DEFAULT_COMPACT_TRIGGER = 150_000
MIN_COMPACT_TRIGGER = 50_000

COMPACTION_BLOCK = "compaction"
"""The content block a compaction writes (and a client sends back, verbatim, on later requests)."""
COMPACTION_STOP = "compaction"
"""The stop reason of a response paused after compaction (``pause_after_compaction``)."""


def betas_for(edits: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    """The betas ``edits`` need, in a stable order (unknown types add none: the API refuses them itself)."""
    needed = {BETA_OF[edit["type"]] for edit in edits if edit.get("type") in BETA_OF}
    return tuple(sorted(needed))


def context_management_json(edits_json: str | None) -> str | None:
    """The request's ``context_management`` field (canonical JSON) for a profile's edits (None: none)."""
    return None if edits_json is None else canonical_json({"edits": json.loads(edits_json)})
