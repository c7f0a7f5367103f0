"""A pytest plugin for the mutation runs: run first the tests that kill the mutant cheapest.

mutmut runs each mutant's tests with ``-x`` (the first failure ends the run) but
hands them to pytest in a set's order, so a mutant that a 5 ms unit test kills
may first wait for a 10 s property test. This plugin orders the collected tests
by the duration mutmut measured (``mutmut-stats.json``) divided by one plus
the mutants the test already killed in this run (a test that pins a rule tends
to pin its neighbouring mutants too), lowest first: a cheap test goes first,
and an expensive one moves forward as it proves itself, but a 7 s property
test that killed 20 mutants still waits behind a 5 ms test that killed none.

A failing test appends its node id to ``mutation-killers.txt`` (one line an
append, which the forked workers share); the order is read at each collection.
The verdicts do not change (a survivor still runs every selected test); only
the time to reach them does. One exception, to save the most expensive runs (a
survivor runs every test): a mutant named in ``mutation-equivalents.txt`` (the
module's entries of ``equivalent.toml``, written there by ``run.py`` unless it
is given ``--recheck-equivalents``) runs no test at all.

``run.py`` copies this file into each scratch directory and loads it with
``-p fastest_first``. Before mutmut has written its statistics (its first,
collecting run) the order is left as it is.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

_STATS = Path("mutmut-stats.json")
_KILLERS = Path("mutation-killers.txt")
_EQUIVALENT = Path("mutation-equivalents.txt")
_durations: dict[str, float] | None = None


def _load_durations() -> dict[str, float]:
    global _durations
    if _durations is None:
        if not _STATS.exists():
            return {}
        found = json.loads(_STATS.read_text(encoding="utf-8")).get("duration_by_test", {})
        _durations = {str(name): float(seconds) for name, seconds in found.items()}
    return _durations


def _kills() -> Counter[str]:
    if not _KILLERS.exists():
        return Counter()
    return Counter(line for line in _KILLERS.read_text(encoding="utf-8").splitlines() if line)


def _listed_equivalent(mutant: str) -> bool:
    return _EQUIVALENT.exists() and mutant in _EQUIVALENT.read_text(encoding="utf-8").split()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if "__mutmut_" in mutant and _listed_equivalent(mutant):
        # Listed in equivalent.toml with its reason: no test can tell it apart, so none is run (pytest's
        # "no tests" verdict); run.py --recheck-equivalents runs them all the same.
        config.hook.pytest_deselected(items=list(items))
        items.clear()
        return
    durations = _load_durations()
    kills = _kills()
    # Unknown durations (none, once the statistics exist) go last; the sort is stable.
    # Expected cost of a kill: a test's duration over the kills it has made (plus one), lowest first.
    items.sort(key=lambda item: durations.get(item.nodeid, float("inf")) / (1 + kills[item.nodeid]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Only a mutant's run counts: mutmut's forced-fail check fails every test on purpose.
    if report.failed and "__mutmut_" in os.environ.get("MUTANT_UNDER_TEST", ""):
        with _KILLERS.open("a", encoding="utf-8") as killers:
            killers.write(report.nodeid + "\n")
