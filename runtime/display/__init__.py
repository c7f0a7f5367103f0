"""Seeing a run: a self-contained HTML report and a live terminal view.

- :mod:`runtime.display.svg`: a small SVG writer (escaping, elements, numbers).
- :mod:`runtime.display.model`: a run's requests, folds, spans and totals, rebuilt from its events.
- :mod:`runtime.display.sources`: what ``foldline report SOURCE`` reads (a store, a signals file, bench JSON).
- :mod:`runtime.display.requests_chart`, :mod:`runtime.display.timeline`, :mod:`runtime.display.branch_view`,
  :mod:`runtime.display.bench_view`: the drawings.
- :mod:`runtime.display.page`: the HTML page (inline CSS and SVG; nothing outside the file).
- ``foldline report`` and ``foldline inspect --html`` are in :mod:`runtime.cli.report`.
- :mod:`runtime.display.live`: the live view of ``foldline run`` on a terminal.
"""
