"""foldline's error types.

Every error foldline raises on purpose derives from :class:`FoldlineError`, so
a caller can tell foldline's refusals from bugs.
"""

from __future__ import annotations


class FoldlineError(Exception):
    """Base of every error foldline raises on purpose."""


class ConfigError(FoldlineError, ValueError):
    """Bad input: the message names where (file and key path), the value and what was expected."""


class InputCeilingExceeded(FoldlineError):
    """A request measured over its input ceiling with nothing left to fold: nothing was sent.

    Carries the numbers of the refusal: ``estimate`` (= ceil(counted x scale)),
    ``ceiling``, ``counted``, ``scale``, ``largest_parts`` as (label, tokens)
    pairs, largest first, and the refused ``branch_id`` when there is one. The
    refusal is sticky on that branch until its caller clears it.
    """

    def __init__(
        self,
        *,
        estimate: int,
        ceiling: int,
        counted: int,
        scale: float,
        largest_parts: list[tuple[str, int]] | tuple[tuple[str, int], ...] = (),
        branch_id: str | None = None,
    ) -> None:
        self.estimate = estimate
        self.ceiling = ceiling
        self.counted = counted
        self.scale = scale
        self.largest_parts = [(str(label), int(tokens)) for label, tokens in largest_parts]
        self.branch_id = branch_id
        super().__init__(self._message())

    def _message(self) -> str:
        on = f" on branch {self.branch_id}" if self.branch_id is not None else ""
        parts = ", ".join(f"{label} {tokens}" for label, tokens in self.largest_parts) or "none"
        return (
            f"input ceiling exceeded{on}: estimate {self.estimate} tokens "
            f"(counted {self.counted} x scale {self.scale:.4f}) > ceiling {self.ceiling}; "
            f"nothing was sent; largest parts: {parts}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_input_ceiling_exceeded, (self.to_dict(),))

    def to_dict(self) -> dict[str, object]:
        """The refusal's numbers as plain JSON-ready values (for events and reports)."""
        return {
            "estimate": self.estimate,
            "ceiling": self.ceiling,
            "counted": self.counted,
            "scale": self.scale,
            "largest_parts": [[label, tokens] for label, tokens in self.largest_parts],
            "branch_id": self.branch_id,
        }


def _rebuild_input_ceiling_exceeded(data: dict[str, object]) -> InputCeilingExceeded:
    return InputCeilingExceeded(**data)  # type: ignore[arg-type]


def extra_hint(extra: str) -> str:
    """How to add foldline's ``extra`` to the install that is running (foldline is installed from its clone)."""
    import sys

    return (
        f"add the {extra} extra to this install: from your foldline clone, run "
        f"{sys.executable} -m pip install -e '.[{extra}]'"
    )
