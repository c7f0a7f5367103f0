"""Shared test configuration.

Async tests use anyio's pytest plugin and run once on asyncio and once on trio
(the ``anyio_backend`` fixture below). Tests that want trio's autojump clock use
pytest-trio directly with ``@pytest.mark.trio``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import Phase, settings

from runtime.logs import configure_logging

# Library logs go to stderr at warning level during tests (the CLI configures its own).
configure_logging(level="warning")


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[str]:
    """One Temporal dev server (in memory) for the whole session, started when a test first asks for it.

    Its tests stay independent on it: every run has a workflow id of its own (``foldline-run-`` and a random
    hex), and a test's workers are stopped before it ends. Starting a server per test module cost its start-up
    and its shutdown (about 1.2 s) in each of the five modules that use one."""
    from temporal_dev import free_port, start_dev_server

    port = free_port()
    proc = start_dev_server(port)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


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
