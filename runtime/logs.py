"""Logging: structlog, sync API only, human-readable on a terminal or JSON.

``configure_logging`` is called once by the command line. Library code only
calls :func:`get_logger` and binds run / node / branch ids with
:func:`bound_contextvars`; it never logs an API key or a full request body
(requests are logged by digest and size).

Used as a library, foldline is silent until the application configures
logging, as Python's logging convention asks of libraries: while nobody has
configured structlog (neither :func:`configure_logging` nor the application's
own ``structlog.configure``), each line goes to the standard library logger of
its name (``foldline.fold``, ``signals.bus``, ...), and the ``foldline`` and
``signals`` loggers carry a ``NullHandler``, so nothing is printed unless the
application sets up ``logging`` (``logging.basicConfig(level=logging.INFO)``
shows foldline's lines like any library's).

Importing structlog costs about a quarter of importing the runtime (it brings
asyncio, and rich when that is installed), so nothing here imports it until it
is needed: :func:`get_logger` gives a logger that resolves
``structlog.get_logger(name)`` on its first call, :func:`bound_contextvars`
imports structlog when a run or node binds its ids, and the configuration
:func:`configure_logging` was given is applied then (at once when structlog
is imported already). What a logger
does is structlog's: the same processors, the same context variables.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TextIO

if TYPE_CHECKING:
    import structlog


class LazyLogger:
    """A structlog logger that imports structlog on its first call (see the module docstring).

    Every attribute (``info``, ``warning``, ``bind``, ...) is the attribute of
    ``structlog.get_logger(name)``, which follows the configuration in force
    when the call is made, as structlog's own lazy proxy does.
    """

    __slots__ = ("_logger", "_stdlib", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._logger: Any = None
        self._stdlib: Any = None

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        structlog = _structlog()
        if structlog.is_configured():
            if self._logger is None:
                self._logger = structlog.get_logger(self.name)
            return getattr(self._logger, attribute)
        if self._stdlib is None:  # nobody configured structlog: the standard library's logger of this name
            self._stdlib = structlog.wrap_logger(
                logging.getLogger(self.name),
                processors=[
                    structlog.contextvars.merge_contextvars,
                    structlog.processors.KeyValueRenderer(key_order=["event"], drop_missing=True),
                ],
                wrapper_class=structlog.stdlib.BoundLogger,
            )
        return getattr(self._stdlib, attribute)

    def __repr__(self) -> str:
        return f"<LazyLogger {self.name!r}>"


def get_logger(name: str) -> Any:
    """The logger named ``name``; structlog is imported when it first logs."""
    return LazyLogger(name)


@contextmanager
def bound_contextvars(**values: object) -> Iterator[None]:
    """``structlog.contextvars.bound_contextvars``: bind ``values`` for every log line inside."""
    with _structlog().contextvars.bound_contextvars(**values):
        yield


def configure_logging(
    *, level: str = "warning", fmt: Literal["console", "json"] = "console", stream: TextIO | None = None
) -> None:
    """Route foldline's structlog output to ``stream`` (stderr by default).

    The level is checked at once; structlog is configured when it is first
    imported (a command that never logs never imports it), or at once when
    it is imported already.
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    _PENDING[:] = [(numeric, fmt, stream or sys.stderr)]
    if "structlog" in sys.modules:
        _structlog()


for _library in ("foldline", "signals"):
    logging.getLogger(_library).addHandler(logging.NullHandler())

_PENDING: list[tuple[int, str, TextIO]] = []
"""The configuration :func:`configure_logging` was given and structlog has not taken yet."""


def _structlog() -> Any:
    """structlog, imported, with the configuration :func:`configure_logging` was last given applied."""
    import structlog

    if _PENDING:
        numeric, fmt, out = _PENDING.pop()
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
    return structlog
