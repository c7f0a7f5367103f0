"""What one send was built from and what came of it: the row the store keeps and replay rebuilds."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class RequestRecord:
    """What one send was built from and what came of it (for the store and replay).

    The request is rebuilt from the record by compiling ``view_ids`` with the
    system message ``system_id``, the tool definitions ``tools_json`` and the
    settings, then applying ``marks``, under compiler recipe ``recipe_version``;
    its SHA-256 must equal ``digest``.
    """

    request_id: str
    node_id: str | None
    digest: str
    recipe_version: int
    system_id: str | None
    tools_json: tuple[str, ...]
    view_ids: tuple[str, ...]
    model: str
    max_tokens: int
    intent: str
    tool_choice_json: str | None
    marks: tuple[tuple[tuple[Any, ...], str, str], ...]
    status: str
    usage: dict[str, Any] | None = None
    result_bound: int | None = None
    """The ``tool_result_max_chars`` the request compiled under (replay projects results with it)."""
    prompt_cache: dict[str, Any] | None = None
    """The placement's record (``Placement.to_record()``: marks, landing, g1, tail_skip) when caching was on."""
    thinking_json: str | None = None
    """The request's ``thinking`` field as canonical JSON (None: not sent); replay compiles with it."""
    output_config_json: str | None = None
    context_management_json: str | None = None
    """The request's ``context_management`` (server-side edits) as canonical JSON (None: not sent); replay
    compiles with it."""
    """A typed operation's ``output_config`` as canonical JSON (None: not sent); replay compiles with it."""
