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

MAX_TOKEN_FACTOR = 1.9
"""``provider.token_factor`` (the simulated server's count over ours), and the simulator's own.

Under the most provider tokens per o200k token a send assumes for content
no calibration saw (2.0: :data:`runtime.measuring.model_calibration.UNCALIBRATED_MAX_SCALE`)
by a margin of 5% for what the simulator adds to the factor (each block
rounded up and counted alone, three tokens a message): a simulator beyond it
would bill requests the decision proved to fit over their ceiling. No
tokenizer on record comes near it (the largest ratio seen is 1.37)."""

TOKEN_FACTOR_REASON = (
    "foldline assumes at most 2 provider tokens per o200k token for content no calibration saw, and the "
    "simulator adds up to 5% to its factor; a simulator counting more would bill requests foldline proved "
    "to fit over their ceiling"
)
"""Why a token factor above :data:`MAX_TOKEN_FACTOR` is refused (the scenario's and the simulator's message)."""

MAX_LATENCY_S = 600.0
"""``provider.latency_s`` and a fault's ``delay_s``: ten minutes, the ``anthropic`` SDK's default request timeout
(a longer wait is only ever a client timeout, and on a wall clock it holds the run); the simulator's own bound."""

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

MAX_NAME_CHARS = 128
"""A name's length (a node id, a profile name, ``depends_on`` and ``spawned_by``): a node id goes out in a header."""

MAX_MODEL_NAME_CHARS = 256
"""A model name's length (``provider.model``, ``profiles.NAME.model``): it goes out in every request body."""

MAX_ARGUMENT_DEPTH = 64
"""How deep a scripted tool call's arguments may nest (objects and arrays): they go out in request bodies."""
