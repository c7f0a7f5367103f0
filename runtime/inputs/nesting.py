"""How deep a JSON-like value nests (pure).

Three inputs bound their nesting (a scenario's tables, a stored JSON text, a
simulated request body): a value nested thousands deep would end any later
recursive walk in a ``RecursionError``. :func:`nested_deeper_than` is the one
walk they share; each caller words its own error.
"""

from __future__ import annotations

from typing import Any


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` (dicts and lists, counted as levels) nests more than ``limit`` levels; iterative."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
