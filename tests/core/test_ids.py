from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_memory.ids import content_hash, is_ulid, new_ulid, ulid_time_ms


@given(st.floats(min_value=0, max_value=4_000_000_000))
def test_ulid_round_trips_its_timestamp(now: float) -> None:
    ulid = new_ulid(now)
    assert is_ulid(ulid)
    assert ulid_time_ms(ulid) == int(now * 1000)


def test_ulids_sort_by_time_and_are_unique() -> None:
    ids = [new_ulid(1_700_000_000 + i) for i in range(50)]
    assert ids == sorted(ids)
    assert len({new_ulid(1_700_000_000) for _ in range(1000)}) == 1000


def test_content_hash_ignores_case_and_spacing_only() -> None:
    assert content_hash("Likes  ROI framing") == content_hash("likes roi framing\n")
    assert content_hash("likes roi framing") != content_hash("likes roi framings")
