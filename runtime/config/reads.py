"""What a node reads of its dependencies: ``inputs``, ``inherit``, ``accept_failures`` (pure).

One set of rules for a scenario's ``[[nodes]]`` table and a code-built
:class:`runtime.flows.flow.Node`:

- ``inputs``: the dependencies whose results the node's first request
  carries (each must be in ``depends_on``, once); unset, every dependency
  but the one it inherits from; ``[]``: none.
- ``inherit``: on a child, ``"view"`` (a clone of its emitter's view) or
  ``"none"`` (fresh). On a top-level node, the id of one dependency whose
  folded view it starts from (the planned counterpart of a spawned child);
  left at its default ``"view"`` it starts fresh (so a dependency named
  ``view`` cannot be inherited).
- ``accept_failures``: a failed or skipped dependency does not skip the
  node; its result block carries the failure reason instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.config.checks import _NAME_EXPECTED, check_choice, check_name, join_index, render_value, wrong_type
from runtime.errors import ConfigError

FRESH = ("view", "none")
"""The ``inherit`` values that leave a top-level node on a fresh branch (on a child: its two modes)."""


def inherited_dependency(spawned_by: str | None, inherit: str) -> str | None:
    """The dependency a top-level node starts from (None: a child, or a fresh start)."""
    return None if spawned_by is not None or inherit == "view" else inherit


def dependencies_read(depends_on: Sequence[str], inputs: Sequence[str] | None, inherits: str | None) -> tuple[str, ...]:
    """The dependencies whose results a node's first request carries, in dependency order."""
    if inputs is not None:
        return tuple(d for d in depends_on if d in inputs)
    return tuple(d for d in depends_on if d != inherits)


def check_reads(
    where: str,
    *,
    depends_on: Sequence[str],
    child: bool,
    inherit: Any,
    inputs: Any,
    accept_failures: Any,
    inherit_given: bool = False,
) -> None:
    """Refuse ``inherit``, ``inputs`` or ``accept_failures`` values that cannot apply, naming the key path.

    ``inherit_given``: the key was written (a table's ``inherit = "view"`` on a top-level node is refused).
    """
    listed = ", ".join(render_value(d) for d in depends_on) or "none"
    if child:
        check_choice(inherit, f"{where}.inherit", FRESH)
    else:
        check_name(inherit, f"{where}.inherit", expected=f"a dependency's node id: {_NAME_EXPECTED}")
        if inherit == "none" or (inherit == "view" and inherit_given):
            raise ConfigError(
                f"{where}.inherit: {render_value(inherit)} applies to a child (with spawned_by); on a top-level node inherit names "
                f"the dependency whose view it starts from (depends_on: {listed})"
            )
        if inherit != "view" and inherit not in depends_on:
            raise ConfigError(
                f"{where}.inherit: {render_value(inherit)} is not a dependency of this node (depends_on: {listed}); "
                "a top-level node starts from the view of one of its dependencies"
            )
    if inputs is not None:
        if isinstance(inputs, str) or not isinstance(inputs, (tuple, list)):
            raise wrong_type(f"{where}.inputs", inputs, "an array of dependency node ids")
        seen: set[str] = set()
        for i, name in enumerate(inputs):
            at = join_index(f"{where}.inputs", i)
            check_name(name, at, expected=f"a dependency's node id: {_NAME_EXPECTED}")
            if name not in depends_on:
                raise ConfigError(
                    f"{at}: {render_value(name)} is not a dependency of this node; "
                    f"inputs names nodes from depends_on: {listed}"
                )
            if name in seen:
                raise ConfigError(f"{at}: {render_value(name)} is listed twice")
            seen.add(name)
    if not isinstance(accept_failures, bool):
        raise wrong_type(f"{where}.accept_failures", accept_failures, "true or false")
