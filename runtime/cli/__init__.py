"""The ``foldline`` command line: one module per group of commands.

- :mod:`runtime.cli.main`: the parser, ``run``, and :func:`main`.
- :mod:`runtime.cli.progress`: progress lines while a run goes.
- :mod:`runtime.cli.sim`: ``foldline sim`` (the simulated Anthropic server on its own).
- :mod:`runtime.cli.bench`: ``foldline bench``.
- :mod:`runtime.cli.store`: ``run --store``, ``resume``, ``replay``, ``events``, ``inspect``.
- :mod:`runtime.cli.report`: ``foldline report`` and ``inspect --html``.
- :mod:`runtime.cli.temporal`: ``run --engine temporal`` and ``worker`` (runtime.temporal runs them).

Heavy modules are imported inside the command that needs them, so
``foldline --help`` and bad-input exits stay fast.
"""

from __future__ import annotations

from runtime.cli.main import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, main

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "EXIT_OK", "main"]
