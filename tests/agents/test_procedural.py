"""Tier 4 procedural memory: Thompson sampling over workflows in DO SQLite."""

from __future__ import annotations

import random

import pytest

from agent_memory.tiers.episodic import ProceduralMemory, UnknownWorkflowError
from agent_runtime_do.storage import create_schema
from local_runtime.adapters.do_sql import LocalDurableObjectStorage

NOW = 1_750_000_000.0


@pytest.fixture
def memory() -> ProceduralMemory:
    storage = LocalDurableObjectStorage(":memory:")
    create_schema(storage.sql)
    return ProceduralMemory(storage.sql)


def add(memory: ProceduralMemory, *ids: str, task_type: str = "outreach") -> None:
    for workflow_id in ids:
        memory.register(
            workflow_id=workflow_id,
            agent_type="sdr",
            task_type=task_type,
            spec={"name": workflow_id},
            now=NOW,
        )


def test_outcomes_update_the_beta_posterior(memory: ProceduralMemory) -> None:
    add(memory, "w1")
    updated = memory.record_outcome("w1", 1.0, NOW)
    assert (updated.alpha, updated.beta, updated.pulls) == (2.0, 1.0, 1)
    updated = memory.record_outcome("w1", 0.25, NOW)
    assert (updated.alpha, updated.beta, updated.pulls) == (2.25, 1.75, 2)
    assert updated.posterior_mean == pytest.approx(2.25 / 4.0)


@pytest.mark.parametrize("score", [-0.01, 1.01, float("nan"), True])
def test_scores_outside_zero_one_are_refused(memory: ProceduralMemory, score: float) -> None:
    add(memory, "w1")
    with pytest.raises(ValueError):
        memory.record_outcome("w1", score, NOW)
    workflow = memory.get("w1")
    assert workflow is not None and (workflow.alpha, workflow.beta, workflow.pulls) == (1, 1, 0)


def test_unknown_workflows_are_an_error(memory: ProceduralMemory) -> None:
    with pytest.raises(UnknownWorkflowError):
        memory.record_outcome("nope", 0.5, NOW)


def test_registering_twice_keeps_the_learned_posterior(memory: ProceduralMemory) -> None:
    add(memory, "w1")
    memory.record_outcome("w1", 1.0, NOW)
    add(memory, "w1")
    workflow = memory.get("w1")
    assert workflow is not None and workflow.alpha == 2.0


def test_selection_is_reproducible_with_a_seeded_generator(memory: ProceduralMemory) -> None:
    add(memory, "a", "b", "c")
    first = memory.select_workflow("sdr", "outreach", random.Random(3))
    again = memory.select_workflow("sdr", "outreach", random.Random(3))
    assert first is not None and again is not None
    assert first.workflow.workflow_id == again.workflow.workflow_id
    assert first.samples == again.samples
    assert max(first.samples.values()) == first.samples[first.workflow.workflow_id]


def test_selection_is_scoped_by_agent_type_and_task_type(
    memory: ProceduralMemory,
) -> None:
    add(memory, "outreach-1")
    add(memory, "follow-up-1", task_type="follow_up")
    rng = random.Random(0)
    picked = memory.select_workflow("sdr", "follow_up", rng)
    assert picked is not None and picked.workflow.workflow_id == "follow-up-1"
    assert memory.select_workflow("assistant", "outreach", rng) is None


def test_seeded_simulation_converges_on_the_best_of_three(memory: ProceduralMemory) -> None:
    """Bernoulli rewards with success rates 0.3, 0.5 and 0.8: Thompson sampling should
    spend most pulls, and nearly all late pulls, on the 0.8 workflow."""
    true_rates = {"cold_open": 0.3, "social_proof": 0.5, "direct_roi": 0.8}
    add(memory, *true_rates)
    rng = random.Random(20260501)
    picks: list[str] = []
    for _ in range(600):
        selection = memory.select_workflow("sdr", "outreach", rng)
        assert selection is not None
        chosen = selection.workflow.workflow_id
        picks.append(chosen)
        reward = float(rng.random() < true_rates[chosen])
        memory.record_outcome(chosen, reward, NOW)
    late = picks[-200:]
    assert picks.count("direct_roi") / len(picks) > 0.75
    assert late.count("direct_roi") / len(late) > 0.9
    best = memory.get("direct_roi")
    assert best is not None and best.posterior_mean == pytest.approx(0.8, abs=0.06)
    # Only the best one is stable and good enough to become a pack.
    candidates = memory.pack_candidates("sdr", min_pulls=50, min_mean=0.7)
    assert [w.workflow_id for w in candidates] == ["direct_roi"]


def test_pack_candidates_need_both_pulls_and_a_high_mean(memory: ProceduralMemory) -> None:
    add(memory, "lucky", "proven", "weak")
    for _ in range(3):
        memory.record_outcome("lucky", 1.0, NOW)  # mean 0.8 but only 3 pulls
    for _ in range(30):
        memory.record_outcome("proven", 0.9, NOW)
        memory.record_outcome("weak", 0.4, NOW)
    assert [w.workflow_id for w in memory.pack_candidates("sdr", min_pulls=20)] == ["proven"]
    assert [w.workflow_id for w in memory.pack_candidates("sdr", min_pulls=3)] == [
        "proven",
        "lucky",
    ]
