"""Cache rules a third mutation run found unpinned (scripts/mutation): each test names the rule it pins."""

from __future__ import annotations

import pytest

from runtime.cache.errors import CacheInputError
from runtime.cache.record import G1


# record G1.__attrs_post_init__ mutmut_7: an unknown exclusion reason is refused, listing the known ones.
def test_an_unknown_g1_exclusion_reason_is_refused_listing_the_known_ones() -> None:
    with pytest.raises(CacheInputError) as refused:
        G1("excluded", "because")
    assert str(refused.value) == (
        "g1 exclusion reason 'because' is not one of no_established_candidate, route_unselected, ledger_evicted, "
        "caller_marks, ttl_order, length_unknown"
    )
