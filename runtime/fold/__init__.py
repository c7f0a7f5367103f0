"""Folding: keeping a conversation under its ceiling without losing a byte (the pure core).

Everything here is synchronous and pure: no I/O, no clock, no event loop
(``tests/test_layering.py`` fails on an import of a shell, an event loop, a
clock or the store). The shell that runs the decisions is in :mod:`actors`
(:mod:`actors.send` and :mod:`actors.folding`): it sends the summary requests
the planner asks for and lands each fold commit in one batch.

- :mod:`runtime.fold.formats`: the text formats the model sees, and their parsers.
- :mod:`runtime.fold.bodies`: recovery text and the bodies of a tool result.
- :mod:`runtime.fold.projection`: the one projection behind the result bound and clips.
- :mod:`runtime.fold.units`: rounds, chronology keys, the kept tail.
- :mod:`runtime.fold.notes`: fold notes and their call listings.
- :mod:`runtime.fold.clip`: the deficit-driven clip stage.
- :mod:`runtime.fold.marks`: the model's pending fold marks.
- :mod:`runtime.fold.protected`: the protected first round.
- :mod:`runtime.fold.planner`: the stages, as a sans-IO state machine; its
  values in :mod:`runtime.fold.plan_values`, its working state in
  :mod:`runtime.fold.plan_run`, the target rule in :mod:`runtime.fold.target`.
- :mod:`runtime.fold.recovery`: read_result and restore.
- :mod:`runtime.fold.context_tool`: the model's context tool: schema and actions.
- :mod:`runtime.fold.measurer`: measuring candidate views like requests.
- :mod:`runtime.fold.settings`: the fold's settings.
- :mod:`runtime.fold.after_read`: fold after read or keep a verbatim tail (the cost model's choice).
- :mod:`runtime.fold.audit`: bytes a view dropped with no recovery path.

Beside the core, not in it: the scripted summarizer is
:mod:`runtime.sim.summary_policy`; building conversations outside a run and the
fold micro-benchmarks (which read a clock) are :mod:`runtime.bench.conversations`
and :mod:`runtime.bench.fold_micro`.
"""
