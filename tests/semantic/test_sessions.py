"""Session-aware results: a result brings the memories next to it in its session (within
the caller's budget), and the top is spread over sessions when asked for several things."""

from __future__ import annotations

import pytest

from agent_memory.retrieval import (
    ReplyConfig,
    RetrievalConfig,
    asks,
    asks_for_several,
    lift_replies,
)
from tests.semantic.conftest import MemoryFactory

TRIP = [
    "Ana: We finally left for the coast on Friday",
    "Ben: Which car did you take?",
    "Ana: The old van, it broke down near Salem",
    "Ben: Oh no, what then?",
    "Ana: A farmer towed us to a garage",
]


async def test_a_result_brings_its_session_neighbours_within_the_budget(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory()
    ids = [
        r.fact_id
        for r in await memory.learn_many([{"content": text, "session": "trip"} for text in TRIP])
    ]
    found = await memory.recall("van broke down near Salem", 1, {"neighbours": 1})
    [result] = found.results
    assert result.fact.fact_id == ids[2]
    assert [(c.fact_id, c.offset) for c in result.context] == [(ids[1], -1), (ids[3], 1)]
    assert result.summary()["context"][0]["content"] == TRIP[1]
    # two either side, but only three context memories in all
    wide = await memory.recall(
        "van broke down near Salem", 1, {"neighbours": 2, "context_budget": 3}
    )
    assert [c.offset for c in wide.results[0].context] == [-2, -1, 1]  # nearest first
    plain = await memory.recall("van broke down near Salem", 1)
    assert plain.results[0].context == [] and "context" not in plain.results[0].summary()


async def test_several_things_are_looked_for_across_sessions(make_memory: MemoryFactory) -> None:
    # A penalty large enough for this tiny hashing-embedder case (the default is 0.05).
    memory = make_memory(config=RetrievalConfig(session_spread=0.4, auto_diversify=True))
    await memory.learn_many(
        [
            {"content": "Ana: I read a book about whales", "session": "s1"},
            {"content": "Ana: that book about whales was long", "session": "s1"},
            {"content": "Ana: the whales book had great photos", "session": "s1"},
            {"content": "Ana: I started a book about bees", "session": "s2"},
        ]
    )
    question = "What books about whales has Ana read?"
    assert asks_for_several(question)
    spread = await memory.recall(question, 2)
    assert {r.fact.session_key for r in spread.results} == {"s1", "s2"}
    assert [r.score for r in spread.results] == sorted(
        (r.score for r in spread.results), reverse=True
    )
    kept = await memory.recall(question, 2, {"diversify": False})
    assert {r.fact.session_key for r in kept.results} == {"s1"}
    # by default only a caller's request spreads the top
    plain = make_memory(config=RetrievalConfig(session_spread=0.4))
    assert {r.fact.session_key for r in (await plain.recall(question, 2)).results} == {"s1"}
    asked = await plain.recall(question, 2, {"diversify": True})
    assert {r.fact.session_key for r in asked.results} == {"s1", "s2"}


def test_which_questions_ask_for_several_things() -> None:
    assert asks_for_several("What activities does Melanie partake in?")
    assert asks_for_several("How many times has she gone to the beach?")
    assert not asks_for_several("What is Caroline's favourite book?")
    assert not asks_for_several("When did Melanie go camping?")


SUNSET = [
    "Maria: What a beautiful beach picture!",
    "Maria: Wow! How often do you get to watch sunsets like this one?",
    "John: At least once a week, it is my way to disconnect and find some peace.",
    "Maria: I should go to the beach more often too.",
]


async def test_the_answer_to_a_question_ranks_above_the_question(
    make_memory: MemoryFactory,
) -> None:
    """The turn worded like the question is the question; its reply, the next memory of
    its session, holds the answer and now ranks first."""
    question = "How often does Maria's friend get to watch sunsets like that?"
    turns = [{"content": text, "session": "beach"} for text in SUNSET]
    plain = make_memory("plain", config=RetrievalConfig(replies=ReplyConfig(depth=0)))
    ids = [r.fact_id for r in await plain.learn_many(turns)]
    assert (await plain.recall(question, 1)).results[0].fact.fact_id == ids[1]

    memory = make_memory()
    ids = [r.fact_id for r in await memory.learn_many(turns)]
    found = await memory.recall(question, 2)
    assert [r.fact.fact_id for r in found.results] == [ids[2], ids[1]]
    assert found.results[0].score > found.results[1].score
    # Without a session, no turn is known to answer another.
    loose = make_memory("loose")
    ids = [r.fact_id for r in await loose.learn_many([{"content": t} for t in SUNSET])]
    assert (await loose.recall(question, 1)).results[0].fact.fact_id == ids[1]


def test_which_memories_mostly_ask() -> None:
    assert asks("How often do you get to watch sunsets like this one?", 20)
    assert asks("Wow, nice spot! Where is it?", 20)
    assert asks("夕日はよく見ますか\uff1f", 20)  # a fullwidth question mark
    # A turn that tells something, then asks back, holds an answer itself.
    told = (
        "I went to the LGBTQ support group yesterday and it was so powerful, the stories "
        "people shared about their own journeys really moved me. How about you?"
    )
    assert not asks(told, 20) and asks(told, 40)
    assert not asks("At least once a week.", 20)


def test_a_question_passes_its_score_to_its_reply() -> None:
    config = ReplyConfig(depth=3, lift=1.0, keep=0.8)
    score = {"q": 1.0, "a": 0.4, "q2": 0.9, "a2": 0.5, "x": 0.7}
    reply_of = {"q": "a", "q2": "a2", "x": "gone"}
    asking = {"q": True, "q2": True, "x": True}
    lifted = lift_replies(["q", "q2", "x", "a"], reply_of, asking, score, config)
    assert lifted == {"a": 1.0, "q": 0.8, "a2": 0.9, "q2": pytest.approx(0.72)}
    # beyond `depth`, or a reply that is not a candidate ("gone"), changes nothing
    assert lift_replies(["x", "q"], reply_of, asking, score, ReplyConfig(depth=1)) == {}
