"""Measurement rules a mutation run found unpinned (scripts/mutation): each test names the rule it pins."""

from __future__ import annotations

from runtime.bench.conversations import Conversation, measurer_for
from runtime.measuring.measure import TokenCounter, measure
from runtime.values.pieces import SegmentedPieces
from tests.test_fold_planner import read


# measure mutmut_8, _9: a compiled request's segmented pieces, measured from its lineage's earlier state, give the
# same measurement (its scale and estimate included) as the same pieces measured one by one.
def test_a_segmented_measurement_equals_the_plain_one_scale_and_estimate_included() -> None:
    counter = TokenCounter()
    c = Conversation()
    c.task("Read.")
    c.round([read("a.md", 3000)])
    for _ in range(2):  # the first request of a lineage, then one that shares its prefix
        branch = c.branch()
        pieces = measurer_for(branch, counter=counter).compile(branch.view()).pieces()
        assert isinstance(pieces, SegmentedPieces)
        segmented = measure(pieces, counter, 1.5)
        assert segmented == measure(list(pieces), TokenCounter(), 1.5)
        assert segmented.scale == 1.5 and segmented.estimate == -(-segmented.counted * 3 // 2)
        c.round([read("b.md", 3000)])
