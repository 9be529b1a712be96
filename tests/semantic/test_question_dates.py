"""Dates in the question: memories dated in the period it names rank first, relative
expressions count from the caller's `reference_date`, and every result carries its date; a
question that asks for a number or a date puts the memories holding one first."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_memory.retrieval import RetrievalConfig
from agent_memory.tiers.semantic.statements import holds_wanted
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


async def test_a_question_that_asks_for_a_number_puts_the_memory_holding_one_first(
    make_memory: MemoryFactory,
) -> None:
    # Two memories on the same topic; only the second says how long. Without the answer-kind
    # step the one worded more like the question comes first. (A share of 0.5 rather than
    # the default 0.05: two memories alone are far apart once fused.)
    texts = [
        "I have been collecting vintage cameras, mostly vintage rangefinder cameras.",
        "I have been collecting vintage cameras for three months.",
    ]
    question = "How long have I been collecting vintage cameras?"
    for tenant, share in (("plain", 0.0), ("kind", 0.5)):
        memory = make_memory(tenant=tenant, config=RetrievalConfig(answer_kind=share))
        await memory.learn_many([{"content": t} for t in texts])
        found = await memory.recall(question, 2)
        first = texts[1] if share else texts[0]
        assert found.results[0].fact.content == first
        # a question that asks for no number or date is left alone
        where = await memory.recall("Which vintage cameras have I been collecting?", 2)
        assert where.results[0].fact.content == texts[0]


@pytest.mark.parametrize(
    ("question", "text", "holds"),
    [
        ("How many cameras do I have?", "I have 17 cameras now.", True),
        ("How many cameras do I have?", "I love my cameras.", False),
        ("When is the party?", "The party is on Friday.", True),
        ("When did I start?", "I started three weeks ago.", True),
        ("Where do I live?", "I live at number 5.", False),
    ],
)
def test_the_kind_of_value_a_question_asks_for(question: str, text: str, holds: bool) -> None:
    assert holds_wanted(question, text) is holds
