"""Dates in the question: memories dated in the period it names rank first, relative
expressions count from the caller's `reference_date`, and every result carries its date."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.semantic.conftest import MemoryFactory


def _at(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, 12, tzinfo=UTC).timestamp()


async def test_the_memory_dated_in_the_named_period_ranks_first(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    await memory.learn_many(
        [
            {"content": "We went camping by the lake", "valid_from": _at(2023, 9, 10)},
            {"content": "We went camping by the coast", "valid_from": _at(2023, 8, 5)},
        ]
    )
    asked = {"reference_date": _at(2023, 10, 1)}
    last_month = await memory.recall("Where did we go camping last month?", 2, asked)
    earlier = await memory.recall("Where did we go camping two months ago?", 2, asked)
    assert last_month.results[0].fact.content.endswith("lake")
    assert earlier.results[0].fact.content.endswith("coast")
    # asked a month later, "last month" is another month
    later = await memory.recall("camping last month", 2, {"reference_date": _at(2023, 9, 2)})
    assert later.results[0].fact.content.endswith("coast")
    summary = last_month.results[0].summary()
    assert summary["date"] == "2023-09-10" and summary["valid_from"] == _at(2023, 9, 10) * 1000


async def test_an_explicit_window_is_not_overridden_by_the_question(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    await memory.learn_many(
        [
            {"content": "We went camping by the lake", "valid_from": _at(2023, 6, 10)},
            {"content": "We went camping by the coast", "valid_from": _at(2023, 8, 5)},
        ]
    )
    window = {"valid_from_after": _at(2023, 8, 1), "valid_from_before": _at(2023, 9, 1)}
    found = await memory.recall("camping in June", 2, window)
    assert [r.fact.content for r in found.results] == ["We went camping by the coast"]
