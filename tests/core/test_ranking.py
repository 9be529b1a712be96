"""`retrieval.rank_candidates`: the head it ranks is what scoring every candidate fully gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_memory.retrieval import (
    FusedItem,
    RetrievalConfig,
    information_density,
    rank_candidates,
    score_parts,
)

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]
NOW = 1_750_000_000.0

candidate = st.tuples(
    st.floats(0.0, 1.0),  # relevance
    st.floats(0.0, 1.0),  # confidence
    st.integers(0, 400 * 86_400),  # age in seconds
    st.lists(st.sampled_from(WORDS), max_size=12),  # content words (density)
)


@settings(max_examples=200, deadline=None)
@given(st.lists(candidate, min_size=1, max_size=120), st.integers(1, 60))
def test_the_best_need_are_ranked_and_scored_as_if_every_density_were_computed(
    drawn: list[tuple[float, float, int, list[str]]], need: int
) -> None:
    weights = RetrievalConfig().weights_for("semantic")
    fused = [FusedItem(id=f"f{i:03}", relevance=rel) for i, (rel, _, _, _) in enumerate(drawn)]
    rows = {
        f"f{i:03}": {
            "updated_at": int((NOW - age) * 1000),
            "confidence": conf,
            "content": " ".join(words),
        }
        for i, (_, conf, age, words) in enumerate(drawn)
    }
    eager = sorted(
        (
            (
                score_parts(
                    relevance=item.relevance,
                    written_at=int(rows[item.id]["updated_at"]) / 1000.0,
                    confidence=float(rows[item.id]["confidence"]),
                    density=information_density(str(rows[item.id]["content"])),
                    now=NOW,
                    weights=weights,
                ),
                item.id,
            )
            for item in fused
        ),
        key=lambda pair: (-pair[0][0], -pair[0][1], pair[1]),
    )
    lazy = rank_candidates(fused, rows, weights, NOW, need)
    assert len(lazy) == len(fused)
    assert [(parts, item.id) for parts, item in lazy[:need]] == eager[:need]
