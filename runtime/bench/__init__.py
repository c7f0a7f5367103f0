"""The benchmark: workloads, strategies, the lower bound and ``foldline bench``.

- :mod:`runtime.bench.facts`: the facts planted in tool outputs and how they read.
- :mod:`runtime.bench.tools`: the bench tools (``read_doc``, ``stage``, ``answer``).
- :mod:`runtime.bench.reader`: the reader policy, the scripted model that
  follows a plan and answers recall probes from what its request shows.
- :mod:`runtime.bench.workloads`: the workloads, as scenario files.
- :mod:`runtime.bench.strategies`: the strategies, as profile overrides.
- :mod:`runtime.bench.lower_bound`: the cost floor of an append-only conversation.
- :mod:`runtime.bench.harness`: runs a workload under a strategy and measures it.
- :mod:`runtime.bench.table`: the table, the JSON document and the targets.
- :mod:`runtime.bench.micro`: the micro benchmarks.
- :mod:`runtime.cli.bench`: ``foldline bench``.
"""
