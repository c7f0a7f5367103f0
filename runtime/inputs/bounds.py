"""The bounds of every limit a configuration sets, in one place.

Each limit has a lower and an upper bound; :mod:`runtime.config` checks both
when a value is built, from code or from a file, so a value such as
``10**30`` is refused at load with its key path rather than reaching a
provider. The upper bounds are far above any sensible use and below what
would hang or exhaust the machine. Model-specific bounds (the context window,
the output limit) come from the model table (:mod:`runtime.models.limits`).
"""

from __future__ import annotations

MAX_CONCURRENCY = 1_024
"""``run.concurrency``: nodes running at once."""

MAX_IN_FLIGHT = 1_024
"""``provider.max_in_flight``: requests one provider has out at once (the simulator's connection cap)."""

MAX_SPAWN_LIMIT = 100_000
"""``run.spawn_limit``: children per run."""

MAX_ROUNDS = 100_000
"""``nodes[i].max_rounds``: requests an iterative operation may take."""

MAX_OUTPUT_TOKENS = 1_000_000
"""``max_tokens`` of a model whose output limit the model table does not know."""

MAX_RETRIES = 100
"""``provider.max_retries``."""

MAX_TOOL_RESULT_CHARS = 100_000_000
"""``profiles.NAME.tool_result_max_chars``."""

MAX_TOKEN_FACTOR = 100.0
"""``provider.token_factor`` (the simulated server's count over ours)."""

MAX_LATENCY_S = 86_400.0
"""``provider.latency_s``: a day, in (virtual) seconds."""

MAX_FAULT_REQUEST = 1_000_000_000
"""``provider.faults[i].on_request`` and ``every``."""

MAX_RETRY_AFTER_MS = 86_400_000
"""``provider.faults[i].retry_after_ms``: a day."""

MAX_SCRIPT_STEPS = 100_000
"""``nodes[i].script``: steps of one node's script."""

MAX_SCENARIO_BYTES = 4 * 1024 * 1024
"""A scenario file's size, checked before it is read (the shipped ones are under 10 KB)."""

MAX_PRICING_BYTES = 4 * 1024 * 1024
"""A user pricing file's size, checked before it is read."""
