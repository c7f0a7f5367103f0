"""Cache rules a third mutation run found unpinned (scripts/mutation): each test names the rule it pins."""

from __future__ import annotations

import pytest

from runtime.cache.certificates import certify_payload
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


def _payload(last: str, **extra: object) -> dict[str, object]:
    return {
        "model": "claude-haiku-5-5",
        "system": [{"type": "text", "text": "You read files."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read a."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
            {"role": "user", "content": [{"type": "text", "text": last}]},
        ],
        **extra,
    }


# certificates _certify mutmut_33: a payload certified incrementally knows none of the certificates the previous
# payload had past their shared prefix (a lookup of one is not "present").
def test_an_incremental_certification_forgets_the_previous_payloads_later_certificates() -> None:
    first = certify_payload(_payload("Read b."))
    second = certify_payload(_payload("Read c."), previous=first)
    assert first.index_of(first.refs[-1].certificate) == len(first.refs) - 1
    assert second.index_of(first.refs[-1].certificate) is None
    assert second.index_of(first.refs[-2].certificate) == len(first.refs) - 2
    assert second.refs == certify_payload(_payload("Read c.")).refs


# certificates _mapping_source mutmut_93: a payload whose speed differs shares no certification with the previous.
def test_an_incremental_certification_with_another_speed_equals_a_fresh_one() -> None:
    first = certify_payload(_payload("Read b.", speed="fast"))
    again = certify_payload(_payload("Read b."), previous=first)
    assert again.refs == certify_payload(_payload("Read b.")).refs
    assert again.refs[0].certificate != first.refs[0].certificate  # the speed is in every certificate


# certificates _RefsByLocation.__getitem__ mutmut_3, _5, _7: the mapping by location answers "not there" for a
# location that is not a non-empty tuple, and its KeyError names the location looked up.
def test_the_refs_by_location_refuse_what_is_not_a_location() -> None:
    refs = certify_payload(_payload("Read b.")).by_location()
    assert ("messages", 0, 0) in refs
    assert () not in refs and "ab" not in refs
    with pytest.raises(KeyError) as missing:
        refs[("messages", 9, 0)]
    assert missing.value.args == (("messages", 9, 0),)
