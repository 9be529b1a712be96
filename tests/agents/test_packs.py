"""Workflow packs close the procedural loop (ADR-29): a workflow that proved itself in one
instance's bandit is promoted into a named, versioned pack; every agent of that type in the
tenant is then offered it first; deprecating the pack hands the choice back to the bandit."""

from __future__ import annotations

from typing import Any

from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import Send

PACKS = "/admin/tenants/acme/agents/assistant/packs"
DIRECT = "assistant.general.direct"


async def run_turn(send: Send, instance: str) -> dict[str, Any]:
    response = await send(
        "POST", "/v1/agents/acme/assistant/run", {"input": "hi", "instance_id": instance}
    )
    assert response.status == 200, response.body
    result: dict[str, Any] = response.json()
    return result


async def selection_of(send: Send, run_id: str) -> dict[str, Any]:
    view = (await send("GET", f"/admin/agents/acme/runs/{run_id}")).json()
    (picked,) = [
        row["detail"]
        for row in view["run_log"]
        if row["kind"] == "memory_read" and row["detail"].get("op") == "select_workflow"
    ]
    return dict(picked)


async def train(send: Send, instance: str, turns: int) -> str:
    """Run successful turns on `instance`; returns its best pack candidate. Every outcome
    is 1.0, so with two workflows one of them has at least half the pulls whatever the
    bandit sampled: the test does not depend on the random draws."""
    for _ in range(turns):
        result = await run_turn(send, instance)
        outcome = await send(
            "POST",
            f"/v1/agents/acme/assistant/runs/{result['run_id']}/outcome",
            {"score": 1.0, "instance_id": instance},
        )
        assert outcome.status == 200, outcome.body
    candidates = (
        await send(
            "GET",
            f"/admin/agents/acme/assistant/pack-candidates?instance_id={instance}&min_pulls=2",
        )
    ).json()["candidates"]
    assert candidates, "twelve successful turns make at least one candidate"
    best: str = candidates[0]["workflow_id"]
    return best


async def test_a_promoted_pack_is_offered_first_until_deprecated(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    chosen = await train(send, "teacher", turns=12)
    promote = {"name": "concise", "workflow_id": chosen, "instance_id": "teacher", "min_pulls": 2}

    created = await send("POST", PACKS, promote)
    assert created.status == 201, created.body
    pack = created.json()["pack"]
    assert (pack["name"], pack["version"], pack["workflow_id"]) == ("concise", 1, chosen)

    # A fresh instance has never tried anything: it is offered the pack's workflow.
    for _ in range(3):
        result = await run_turn(send, "newcomer")
        assert result["workflow_id"] == chosen
        assert (await selection_of(send, result["run_id"]))["pack"] == "concise@1"

    again = await send("POST", PACKS, promote)
    assert again.json()["pack"]["version"] == 2
    listed = (await send("GET", PACKS)).json()["packs"]
    assert [(p["version"], p["status"]) for p in listed] == [(2, "active"), (1, "deprecated")]

    gone = await send("DELETE", f"{PACKS}/concise")
    assert gone.status == 200 and gone.json()["deprecated"] == 1
    assert (await send("DELETE", f"{PACKS}/concise")).json()["error"]["code"] == "pack_not_found"
    result = await run_turn(send, "newcomer")
    assert (await selection_of(send, result["run_id"]))["pack"] is None  # the bandit again


async def test_a_workflow_that_has_not_proved_itself_is_refused(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    await run_turn(send, "rookie")  # one pull, no outcome: not a candidate
    refused = await send(
        "POST",
        PACKS,
        {"name": "early", "workflow_id": DIRECT, "instance_id": "rookie", "min_pulls": 5},
    )
    assert refused.status == 409
    assert refused.json()["error"]["code"] == "not_a_pack_candidate"
    assert (await send("GET", PACKS)).json()["packs"] == []
    bad = await send("POST", PACKS, {"name": "Bad Name!", "workflow_id": DIRECT})
    assert bad.status == 422
