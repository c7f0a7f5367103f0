"""The names of the benchmark workloads and strategies, without importing them.

``foldline bench --help`` and argument errors name these; the modules that
define them (:mod:`runtime.bench.workloads`, :mod:`runtime.bench.strategies`)
import the runtime, which a help text should not pay for. A test checks that
these tuples list exactly what those modules define, in the same order.
"""

from __future__ import annotations

WORKLOAD_NAMES = ("fits", "reading-20k", "reading-40k", "staged-64", "fanout")
STRATEGY_NAMES = ("naive", "cache-only", "compaction", "fold-immediate", "foldline")
