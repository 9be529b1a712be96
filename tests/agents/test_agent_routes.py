"""The agent-run path through the Worker's handler: runs, memory across turns, admin reads,
and clear errors that leave nothing behind."""

from __future__ import annotations

import json
from typing import Any

import pytest

from local_runtime.access_dev import DevAccessKeys, access_claims, mint_token
from local_runtime.runtime import LocalRuntime
from tests.agents.conftest import Send, build_request
from tests.fakes.embedder import HashingEmbedder
from worker.app import ROUTES, handle

TENANT = "acme"
RUN = f"/v1/agents/{TENANT}/assistant/run"


async def d1_rows(runtime: LocalRuntime, table: str) -> int:
    row = await runtime.db.prepare(f"SELECT COUNT(*) AS n FROM {table}").first()
    assert row is not None
    return int(row["n"])


async def nothing_written(runtime: LocalRuntime) -> bool:
    await runtime.background.drain()
    kv_keys = (await runtime.kv.list(prefix="agent_working:")).keys
    objects = list(runtime.state.durable_objects.iterdir())
    return (
        await d1_rows(runtime, "agent_runs") == 0
        and await d1_rows(runtime, "memory_episodes") == 0
        and kv_keys == []
        and objects == []
    )


async def run(send: Send, runtime: LocalRuntime, text: str, **body: Any) -> dict[str, Any]:
    response = await send("POST", body.pop("path", RUN), {"input": text, **body})
    assert response.status == 200, response.json()
    await runtime.background.drain()
    result: dict[str, Any] = response.json()
    return result


async def test_the_second_turn_receives_the_first_turns_episode(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    first = await run(send, agent_runtime, "Book a table for two at Luigi's")
    assert first["status"] == "completed"
    assert first["context_episode_ids"] == []
    assert first["turn_count"] == 1
    second = await run(send, agent_runtime, "Was it for two?")
    assert second["context_episode_ids"] == [first["episode_id"]]
    assert second["turn_count"] == 2
    # The (scripted) model saw that episode in its context and says so.
    assert "1 earlier episode" in second["output"]
    assert "Book a table for two at Luigi's" in second["output"]
    # And the ids are logged in agent_runs.input, as ADR-043 asks.
    row = (
        await agent_runtime.db.prepare(
            "SELECT input, status FROM agent_runs WHERE tenant_id = ? AND run_id = ?"
        )
        .bind(TENANT, second["run_id"])
        .first()
    )
    assert row is not None and row["status"] == "completed"
    assert f'"context_episode_ids":["{first["episode_id"]}"]' in row["input"]


async def test_only_the_last_ten_episodes_of_the_agent_type_are_given(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    episodes = [(await run(send, agent_runtime, f"task {i}"))["episode_id"] for i in range(12)]
    # Other agent types and other tenants never leak into the context.
    await run(send, agent_runtime, "sdr work", path=f"/v1/agents/{TENANT}/sdr/run")
    await run(send, agent_runtime, "other tenant", path="/v1/agents/globex/assistant/run")
    latest = await run(send, agent_runtime, "what did I do?")
    assert latest["context_episode_ids"] == list(reversed(episodes))[:10]


async def test_instances_have_their_own_turn_state_but_share_episodes(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    a = await run(send, agent_runtime, "hello from a", instance_id="contact-a")
    b = await run(send, agent_runtime, "hello from b", instance_id="contact-b")
    assert (a["turn_count"], b["turn_count"]) == (1, 1)
    assert b["context_episode_ids"] == [a["episode_id"]]  # episodes are per tenant+type
    keys = [k.name for k in (await agent_runtime.kv.list(prefix="agent_working:")).keys]
    assert keys == [
        "agent_working:acme:assistant.contact-a:last_input",
        "agent_working:acme:assistant.contact-b:last_input",
    ]


async def test_two_agent_types_on_one_instance_id_have_two_working_memories(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    """Issue 25: an `assistant` and an `sdr` run on instance `default` no longer overwrite
    each other's working keys; each turn sees only its own type's."""
    await run(send, agent_runtime, "assistant's note")
    await run(send, agent_runtime, "sdr's note", path=f"/v1/agents/{TENANT}/sdr/run")
    kv = agent_runtime.kv
    assert json.loads(await kv.get("agent_working:acme:assistant.default:last_input") or "0") == (
        "assistant's note"
    )
    assert json.loads(await kv.get("agent_working:acme:sdr.default:last_input") or "0") == (
        "sdr's note"
    )
    assert await kv.get("agent_working:acme:default:last_input") is None


async def test_admin_run_view_has_episodes_and_a_row_for_every_step(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    result = await run(send, agent_runtime, "remember the blue folder")
    response = await send("GET", f"/admin/agents/{TENANT}/runs/{result['run_id']}")
    assert response.status == 200
    view = response.json()
    assert view["run"]["status"] == "completed"
    assert view["run"]["steps"] == 2
    assert view["run"]["input"]["text"] == "remember the blue folder"
    assert view["run"]["input"]["requested_by"] == "ops@example.com"
    assert [e["episode_id"] for e in view["episodes"]] == [result["episode_id"]]
    kinds = [row["kind"] for row in view["run_log"]]
    assert kinds == [
        "turn_start",
        "memory_read",  # working-memory snapshot
        "memory_read",  # recent episodes
        "memory_read",  # workflow selection
        "llm_call",
        "memory_write",  # working_memory_set
        "tool_call",
        "llm_call",
        "turn_end",
    ]
    assert [row["step"] for row in view["run_log"]] == list(range(len(kinds)))
    assert view["workflow"]["workflow_id"] == result["workflow_id"]
    assert view["failed_writes"] == []


async def test_turn_state_counts_every_turn(agent_runtime: LocalRuntime, send: Send) -> None:
    for i in range(3):
        await run(send, agent_runtime, f"turn {i}")
    stub = agent_runtime.agents.get_by_name(f"{TENANT}:assistant:default")
    state = (
        await stub.call(
            "state", {"tenant": TENANT, "agent_type": "assistant", "instance_id": "default"}
        )
    )["turn_state"]
    assert (state["turn_count"], state["completed_count"], state["failed_count"]) == (3, 3, 0)
    assert state["last_status"] == "completed"


async def test_runs_are_listed_newest_first_with_cursor_and_filters(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    ids = [(await run(send, agent_runtime, f"task {i}"))["run_id"] for i in range(5)]
    sdr = await run(send, agent_runtime, "outreach", path=f"/v1/agents/{TENANT}/sdr/run")
    seen: list[str] = []
    cursor = None
    while True:
        query = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = (await send("GET", f"/admin/agents/{TENANT}/runs{query}")).json()
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [sdr["run_id"], *reversed(ids)]
    only_sdr = (await send("GET", f"/admin/agents/{TENANT}/runs?agent_type=sdr")).json()
    assert [r["run_id"] for r in only_sdr["runs"]] == [sdr["run_id"]]
    failed = (await send("GET", f"/admin/agents/{TENANT}/runs?status=failed")).json()
    assert failed == {"runs": [], "next_cursor": None}
    other = (await send("GET", "/admin/agents/globex/runs")).json()
    assert other["runs"] == []


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("?cursor=not-a-cursor", "invalid_cursor"),
        ("?status=sleeping", "validation_error"),
        ("?limit=0", "validation_error"),
        ("?limit=1000", "validation_error"),
        ("?colour=blue", "validation_error"),
    ],
)
async def test_bad_list_queries_are_422(send: Send, query: str, code: str) -> None:
    response = await send("GET", f"/admin/agents/{TENANT}/runs{query}")
    assert response.status == 422
    assert response.json()["error"]["code"] == code


async def test_unknown_runs_are_404(agent_runtime: LocalRuntime, send: Send) -> None:
    for run_id in ("01J00000000000000000000000", "nope"):
        response = await send("GET", f"/admin/agents/{TENANT}/runs/{run_id}")
        assert response.status == 404
        assert response.json()["error"]["code"] == "run_not_found"


# --- the gate -------------------------------------------------------------------------


def gated_routes() -> list[tuple[str, str]]:
    routes = [(route.method, route.path) for route in ROUTES]
    return [(m, p) for m, p in routes if p.startswith(("/v1/agents/", "/admin/"))]


def concrete(pattern: str) -> str:
    values = {
        "{tenant}": TENANT,
        "{agent_type}": "assistant",
        "{run_id}": "01J00000000000000000000000",
        "{fact_id}": "01J00000000000000000000000",
        "{event_id}": "01J00000000000000000000000",
        "{jti}": "01J00000000000000000000000",
    }
    for name, value in values.items():
        pattern = pattern.replace(name, value)
    # Any other parameter (other features' admin routes) gets a plausible value.
    while "{" in pattern:
        start = pattern.index("{")
        pattern = pattern[:start] + "x1" + pattern[pattern.index("}") + 1 :]
    return pattern


def test_the_agent_routes_are_registered() -> None:
    assert ("POST", "/v1/agents/{tenant}/{agent_type}/run") in gated_routes()
    assert ("GET", "/admin/agents/{tenant}/runs") in gated_routes()


async def test_every_agent_and_admin_route_needs_an_access_token(
    agent_runtime: LocalRuntime,
) -> None:
    keys = DevAccessKeys.load_or_create(agent_runtime.state.access)
    now = agent_runtime.clock.now()
    bad_tokens = {
        "garbage": "not.a.token",
        "expired": keys.sign(access_claims("ops@example.com", now=now - 7200, ttl=60)),
        "wrong aud": keys.sign(
            {**access_claims("ops@example.com", now=now), "aud": ["another-app"]}
        ),
    }
    for method, pattern in gated_routes():
        path = concrete(pattern)
        body = {"input": "hi", "score": 1.0}
        response = await handle(build_request(method, path, body), agent_runtime.bindings())
        assert response.status == 401, (method, path)
        assert response.json()["error"]["code"] == "access_token_missing"
        for reason, bad in bad_tokens.items():
            request = build_request(method, path, body, token=bad)
            response = await handle(request, agent_runtime.bindings())
            assert response.status == 403, (method, path, reason)
            assert response.json()["error"]["code"] == "access_token_invalid"
    assert await nothing_written(agent_runtime)


# --- bad input: clear errors, nothing written ------------------------------------------


@pytest.mark.parametrize(
    ("path", "raw", "status", "code"),
    [
        (RUN, b"", 400, "invalid_json"),
        (RUN, b"{not json", 400, "invalid_json"),
        (RUN, b"[]", 422, "validation_error"),
        (RUN, b"{}", 422, "validation_error"),
        (RUN, b'{"input": ""}', 422, "validation_error"),
        (RUN, b'{"input": "   "}', 422, "validation_error"),
        (RUN, b'{"input": 42}', 422, "validation_error"),
        (RUN, b'{"input": "hi", "instance_id": "a:b"}', 422, "validation_error"),
        (RUN, b'{"input": "hi", "instance_id": "*"}', 422, "validation_error"),
        (RUN, b'{"input": "hi", "task_type": "Bad Type"}', 422, "validation_error"),
        (RUN, b'{"input": "hi", "surprise": true}', 422, "validation_error"),
        (
            RUN,
            b'{"input": "hi", "metadata": {"blob": "' + b"x" * 5000 + b'"}}',
            422,
            "validation_error",
        ),
        ("/v1/agents/acme/wizard/run", b'{"input": "hi"}', 404, "unknown_agent_type"),
        ("/v1/agents/acme/Assistant/run", b'{"input": "hi"}', 404, "unknown_agent_type"),
        ("/v1/agents/ACME/assistant/run", b'{"input": "hi"}', 422, "invalid_path"),
        ("/v1/agents/ac%3Ame/assistant/run", b'{"input": "hi"}', 422, "invalid_path"),
    ],
)
async def test_bad_requests_get_clear_errors_and_write_nothing(
    agent_runtime: LocalRuntime, send: Send, path: str, raw: bytes, status: int, code: str
) -> None:
    response = await send("POST", path, raw=raw)
    assert response.status == status, response.json()
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    assert await nothing_written(agent_runtime)


async def test_validation_errors_name_the_field(send: Send) -> None:
    response = await send("POST", RUN, {"input": "hi", "instance_id": "a:b"})
    problems = response.json()["error"]["details"]["problems"]
    assert [p["field"] for p in problems] == ["instance_id"]


async def test_unknown_agent_type_lists_the_known_ones(send: Send) -> None:
    response = await send("POST", "/v1/agents/acme/wizard/run", {"input": "hi"})
    assert "assistant" in response.json()["error"]["message"]


async def test_without_a_model_the_run_is_refused_and_nothing_is_written(tmp_path: Any) -> None:
    runtime = LocalRuntime.open(
        tmp_path / "state", embedder=HashingEmbedder(), vars={"LLM_PROVIDER": "workers-ai"}
    )
    await runtime.migrate()
    try:
        token = mint_token(runtime.state.access, "ops@example.com", now=runtime.clock.now())
        request = build_request("POST", RUN, {"input": "hi"}, token=token)
        response = await handle(request, runtime.bindings())
        assert response.status == 503
        assert response.json()["error"]["code"] == "llm_unavailable"
        await runtime.background.drain()
        assert await d1_rows(runtime, "agent_runs") == 0
        assert (await runtime.kv.list(prefix="agent_working:")).keys == []
    finally:
        await runtime.close()


# --- procedural outcomes and pack candidates ------------------------------------------


async def test_outcomes_feed_the_bandit_and_pack_candidates(
    agent_runtime: LocalRuntime, send: Send
) -> None:
    sdr = f"/v1/agents/{TENANT}/sdr"
    result = await run(send, agent_runtime, "Write to Ada at Initech", path=f"{sdr}/run")
    assert result["task_type"] == "outreach"
    assert result["workflow_id"].startswith("sdr.outreach.")
    outcome = await send("POST", f"{sdr}/runs/{result['run_id']}/outcome", {"score": 1.0})
    assert outcome.status == 200, outcome.json()
    assert outcome.json()["workflow"]["alpha"] == 2.0
    again = await send("POST", f"{sdr}/runs/{result['run_id']}/outcome", {"score": 0.0})
    assert again.status == 409
    assert again.json()["error"]["code"] == "outcome_already_recorded"
    bad = await send("POST", f"{sdr}/runs/{result['run_id']}/outcome", {"score": 1.5})
    assert bad.status == 422

    workflows = (await send("GET", f"/admin/agents/{TENANT}/sdr/workflows")).json()
    by_id = {w["workflow_id"]: w for w in workflows["workflows"]}
    assert set(by_id) == {
        "sdr.outreach.direct_roi",
        "sdr.outreach.social_proof",
        "sdr.outreach.question_led",
    }
    assert by_id[result["workflow_id"]]["pulls"] == 1
    candidates = (
        await send("GET", f"/admin/agents/{TENANT}/sdr/pack-candidates?min_pulls=1&min_mean=0.6")
    ).json()
    assert [c["workflow_id"] for c in candidates["candidates"]] == [result["workflow_id"]]
    none_yet = (await send("GET", f"/admin/agents/{TENANT}/sdr/pack-candidates")).json()
    assert none_yet["candidates"] == []
    view = (await send("GET", f"/admin/agents/{TENANT}/runs/{result['run_id']}")).json()
    assert view["workflow"]["outcome_score"] == 1.0
    assert view["run_log"][-1]["kind"] == "memory_write"
    assert view["run_log"][-1]["detail"]["tier"] == "procedural"


async def test_outcome_for_an_unknown_run_is_404(send: Send) -> None:
    response = await send(
        "POST", f"/v1/agents/{TENANT}/sdr/runs/01J00000000000000000000000/outcome", {"score": 1}
    )
    assert response.status == 404
