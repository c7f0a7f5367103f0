"""foldline's durable store (DESIGN.md section 10): SQLite, resume, exact replay.

- :mod:`runtime.store.journal`: :class:`RunStore`, the journal a run's
  branches write through (one transaction per batch) and its signals' target.
- :mod:`runtime.store.reader`: reading a store back, messages verified.
- :mod:`runtime.store.replay`: rebuilding a stored request and proving its digest.
- :mod:`runtime.store.resume` / :mod:`runtime.store.run`: continuing a stopped run.
- :mod:`runtime.store.inspect`: a branch's view as the model sees it.
- :mod:`runtime.cli.store`: the ``run --store``, ``resume``, ``replay``,
  ``events`` and ``inspect`` commands.
"""
