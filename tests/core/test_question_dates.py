"""`retrieval.question_window`: the period a question names, against when it is asked."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agent_memory.retrieval import question_window

ASKED = datetime(2023, 10, 20, 15, tzinfo=UTC).timestamp()


def _day(y: int, m: int, d: int) -> float:
    return datetime(y, m, d, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did she show me on October 13, 2023?", _day(2023, 10, 13), _day(2023, 10, 14)),
        ("What did he find on 1 February, 2023?", _day(2023, 2, 1), _day(2023, 2, 2)),
        ("what happened on 2023-05-07", _day(2023, 5, 7), _day(2023, 5, 8)),
        ("What did they paint in July 2023?", _day(2023, 7, 1), _day(2023, 8, 1)),
        ("When did she go camping in June?", _day(2023, 6, 1), _day(2023, 7, 1)),
        ("what did we do in October", _day(2023, 10, 1), _day(2023, 11, 1)),
        ("what did we do last October", _day(2022, 10, 1), _day(2022, 11, 1)),
        ("How often did she go to the beach in 2022?", _day(2022, 1, 1), _day(2023, 1, 1)),
        ("what did we talk about last month", _day(2023, 9, 1), _day(2023, 10, 1)),
        ("where did they travel last year", _day(2022, 1, 1), _day(2023, 1, 1)),
        ("what did I eat yesterday", _day(2023, 10, 19), _day(2023, 10, 20)),
    ],
)
def test_dates_months_and_years_become_their_period(
    question: str, start: float, end: float
) -> None:
    assert question_window(question, ASKED) == (start, end)


def test_relative_expressions_count_back_from_the_reference() -> None:
    start, end = question_window("what did I start two weeks ago?", ASKED) or (0, 0)
    assert start < ASKED - 14 * 86_400 < end <= ASKED
    assert question_window("last May", _day(2024, 3, 1)) == (_day(2023, 5, 1), _day(2023, 6, 1))


@pytest.mark.parametrize(
    "question", ["May I ask what you like?", "what is my favourite food", "February 30, 2023"]
)
def test_no_period_when_the_question_names_none(question: str) -> None:
    assert question_window(question, ASKED) is None
