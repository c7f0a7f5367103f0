"""The error cache placement raises on bad input."""

from __future__ import annotations

from runtime.errors import FoldlineError


class CacheInputError(FoldlineError, ValueError):
    """Bad input to cache placement.

    The message names what was wrong (a payload path such as
    ``messages[3].content[1]`` or an argument name), the value, and what was
    expected.
    """
