"""`retrieval.fuse`: how channel scores are normalised before they are mixed."""

from __future__ import annotations

from agent_memory.retrieval import ChannelHit, ChannelResult, FusionConfig, fuse

CONFIG = FusionConfig(channel_weights={"vector": 0.6, "keyword": 1.0}, model_weights={})


def _relevance(dense: list[ChannelHit]) -> dict[str, float]:
    keyword = [ChannelHit("d5", 4.0), ChannelHit("dense-best", 1.0)]
    channels = [
        ChannelResult("vector", dense, sigmas=CONFIG.vector_sigmas),
        ChannelResult("keyword", keyword, floor=0.0),
    ]
    return {item.id: item.relevance for item in fuse(channels, CONFIG)}


def test_one_stray_dense_hit_does_not_change_how_the_others_compare() -> None:
    # Min-max pinned the dense channel's low end to its worst hit: one far-off hit at the
    # bottom lifted every other dense score (d5's relevance moved by 0.14 on this case).
    dense = [ChannelHit("dense-best", 0.80)]
    dense += [ChannelHit(f"d{i}", 0.60 - 0.005 * i) for i in range(30)]
    before = _relevance(dense)
    after = _relevance([*dense, ChannelHit("stray", 0.0)])
    assert max(abs(after[k] - before[k]) for k in before) < 0.05
    assert list(after)[:2] == list(before)[:2] == ["d5", "dense-best"]


def test_a_dense_hit_far_above_the_rest_gets_the_full_dense_score() -> None:
    dense = [ChannelHit("dense-best", 0.80)]
    dense += [ChannelHit(f"d{i}", 0.60 - 0.005 * i) for i in range(30)]
    channels = [ChannelResult("vector", dense, sigmas=3.0)]
    fused = {item.id: item for item in fuse(channels, CONFIG)}
    assert fused["dense-best"].channels["vector"].normalized == 1.0
    # the middle of the list sits near the middle of the range, not stretched to the ends
    assert 0.3 < fused["d15"].channels["vector"].normalized < 0.7
