"""Shared test configuration.

Async tests use anyio's pytest plugin and run once on asyncio and once on trio
(the ``anyio_backend`` fixture below). Tests that want trio's autojump clock use
pytest-trio directly with ``@pytest.mark.trio``.
"""

from __future__ import annotations

import pytest
from hypothesis import Phase, settings

from runtime.logs import configure_logging

# Library logs go to stderr at warning level during tests (the CLI configures its own).
configure_logging(level="warning")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


# The mutation runs (scripts/mutation/run.py) use this profile: no deadline, so a
# slow mutant under load is not counted as killed; derandomized, so a verdict is
# the same on every run; and no shrinking, since a mutant is killed by the first
# failing example (shrinking it would only cost time).
settings.register_profile(
    "mutation",
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
