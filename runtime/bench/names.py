"""The names of the benchmark workloads and strategies, without importing them.

``foldline bench --help`` and argument errors name these; the modules that
define them (:mod:`runtime.bench.workloads`, :mod:`runtime.bench.strategies`)
import the runtime, which a help text should not pay for. A test checks that
these tuples list exactly what those modules define, in the same order.
"""

from __future__ import annotations

WORKLOAD_NAMES = ("fits", "reading-20k", "reading-40k", "staged-64", "fanout", "emitter", "staged-curl")
STRATEGY_NAMES = (
    "naive",
    "cache-only",
    "compaction",
    "fold-immediate",
    "foldline",
    "foldline-cost",
    "api-clear-tool-uses",
    "api-clear-tool-uses/ceiling",
    "api-clear-tool-uses/half",
    "api-clear-tool-uses/ceiling-keep1",
    "api-clear-tool-uses/ceiling-keep8",
    "api-clear-tool-uses/ceiling-least",
    "api-compaction",
    "api-compaction/ceiling",
)
MODEL = "claude-opus-5"
"""The built-in workloads' model (every price known, output included); a test checks it is the workloads'."""
