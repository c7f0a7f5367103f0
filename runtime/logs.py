"""Logging: structlog, sync API only, human-readable on a terminal or JSON.

``configure_logging`` is called once by the command line. Library code only
calls ``structlog.get_logger(...)`` and binds run / node / branch ids; it
never logs an API key or a full request body (requests are logged by digest
and size).
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog


def configure_logging(
    *, level: str = "warning", fmt: Literal["console", "json"] = "console", stream: TextIO | None = None
) -> None:
    """Route foldline's structlog output to ``stream`` (stderr by default)."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    out = stream or sys.stderr
    renderer: structlog.types.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer(sort_keys=True)
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=out.isatty())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=False,
    )
