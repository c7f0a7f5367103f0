"""Shared test configuration.

Async tests use anyio's pytest plugin and run once on asyncio and once on trio
(the ``anyio_backend`` fixture below). Tests that want trio's autojump clock use
pytest-trio directly with ``@pytest.mark.trio``.
"""

from __future__ import annotations

import pytest

from runtime.logs import configure_logging

# Library logs go to stderr at warning level during tests (the CLI configures its own).
configure_logging(level="warning")


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param
