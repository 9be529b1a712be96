"""Session-aware results: a result brings the memories next to it in its session (within
the caller's budget), and the top is spread over sessions when asked for several things."""

from __future__ import annotations

from agent_memory.retrieval import RetrievalConfig, asks_for_several
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
