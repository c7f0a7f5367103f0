"""Request-level rules the Messages API enforces beyond the shape of each field (pure).

- sampling: ``temperature`` from 0 to 1, ``top_p`` from 0 to 1, ``top_k`` a
  non-negative integer (the pinned SDK no longer names them; older clients
  send them, so they are taken and checked);
- ``thinking``: ``type: "enabled"`` needs ``budget_tokens`` of at least 1,024
  and below ``max_tokens``;
- ``max_tokens`` within the model's output limit, where the model table
  (``runtime/data/models.toml``) states one;
- features the SDK can send that the simulator does not simulate are refused
  with a 400 saying so: ``thread`` (message threads: the answer carries the
  ``thread_unsupported_request`` details the SDK recognizes, so a tool runner
  continues without a thread, as its default says), ``mcp_servers`` and
  ``fallbacks`` when non-empty, and a system message's ``output_config`` or
  ``clear_at``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.models.limits import default_model_table
from runtime.sim.errors import SimAPIError, invalid_request

SAMPLING_KEYS = frozenset({"temperature", "top_k", "top_p"})
MIN_THINKING_BUDGET = 1_024
THREADS_BETA = "message-threads-2026-08-12"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sampling(body: Mapping[str, Any]) -> None:
    for key in ("temperature", "top_p"):
        value = body.get(key)
        if value is not None and (not _number(value) or not 0 <= value <= 1):
            raise invalid_request(f"{key}: Input should be a number from 0 to 1, got {value!r}")
    top_k = body.get("top_k")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise invalid_request(f"top_k: Input should be an integer >= 0, got {top_k!r}")


def check_thinking_budget(body: Mapping[str, Any]) -> None:
    """``budget_tokens`` of an enabled ``thinking``: at least 1,024, and below ``max_tokens`` (a create)."""
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") != "enabled":
        return
    budget = thinking.get("budget_tokens")
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise invalid_request(f"thinking.enabled.budget_tokens: Field required (an integer), got {budget!r}")
    if budget < MIN_THINKING_BUDGET:
        raise invalid_request(
            f"thinking.enabled.budget_tokens: Input should be greater than or equal to {MIN_THINKING_BUDGET}"
        )
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, int) and max_tokens > 0 and budget >= max_tokens:
        raise invalid_request(
            f"`max_tokens` must be greater than `thinking.budget_tokens` ({max_tokens} <= {budget}). "
            "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
        )


def check_output_limit(body: Mapping[str, Any]) -> None:
    """``max_tokens`` within the model's stated output limit."""
    limit = default_model_table().max_output_tokens(str(body.get("model")))
    max_tokens = body.get("max_tokens")
    if limit is not None and isinstance(max_tokens, int) and max_tokens > limit:
        raise invalid_request(
            f"max_tokens: {max_tokens} > {limit}, which is the maximum allowed number of output tokens "
            f"for {body.get('model')}"
        )


def check_unsimulated(body: Mapping[str, Any]) -> None:
    """Refuse, saying so, a feature the simulator does not simulate."""
    if body.get("thread") is not None:
        raise SimAPIError(
            400,
            "invalid_request_error",
            f"thread: message threads ({THREADS_BETA}) are not simulated; send the whole conversation without 'thread'",
            details={"error_code": "thread_unsupported_request", "unsupported": ["thread"]},
        )
    for key in ("mcp_servers", "fallbacks"):
        if body.get(key):
            raise invalid_request(f"{key}: not simulated by foldline's simulator (send the request without it)")


def check_system_message_extras(message: Mapping[str, Any], i: int) -> None:
    for key in ("output_config", "clear_at"):
        if message.get(key) is not None:
            raise invalid_request(f"messages.{i}.{key}: not simulated on a system message by foldline's simulator")
