"""The change feed: memory changes published after the response, delivered to each tenant's
endpoints signed as Standard Webhooks says (verified here by the `standardwebhooks` package,
an implementation independent of ours), retried with backoff, dead-lettered, paused, rotated,
and dropped when they carry a subject erased since."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from agent_memory.directory import place_tenant
from agent_memory.governance.feed import (
    DEAD_LETTER_QUEUE,
    FEED_QUEUE,
    MAX_RETRIES,
    FeedEndpoints,
    backoff,
)
from agent_memory.lifecycle.move import advance, start_move
from agent_memory.memory import Memory
from bindings.ports.clock import FixedClock
from http_messages import Headers, HttpRequest
from local_runtime import cli
from local_runtime.runtime import LocalRuntime
from tests.fakes.embedder import HashingEmbedder
from tests.portability.conftest import Client, Receiver
from tests.portability.seed import seed_tenant
from worker.app import handle
from worker.cron import WEEKLY_PRUNE, run_scheduled

WRITER = {"tiers": ["semantic", "episodic"], "scopes": ["read", "write"]}


async def _endpoint(client: Client, url: str, tenant: str = "acme") -> dict[str, Any]:
    response = await client.send(
        "POST", f"/admin/tenants/{tenant}/webhooks", {"url": url}, access=client.operator
    )
    assert response.status == 201, response.json()
    saved: dict[str, Any] = response.json()
    assert saved["secret"].startswith("whsec_")
    return saved


async def _learn(client: Client, token: str, subject: str, text: str, **body: Any) -> None:
    response = await client.write(token, "a1", tier="semantic", key=subject, value=text, **body)
    assert response.status == 201, response.json()


async def _deliveries(client: Client) -> list[dict[str, Any]]:
    response = await client.send("GET", "/admin/tenants/acme/webhooks", access=client.operator)
    return list(response.json()["deliveries"])


async def test_a_write_is_published_after_its_response_and_delivered_signed(
    client: Client, memory_runtime: LocalRuntime, receiver: Receiver
) -> None:
    saved = await _endpoint(client, receiver.url)
    token = await client.mint("acme", "a1", **WRITER)
    request = HttpRequest(
        "POST",
        "http://127.0.0.1/api/v1/memory/a1",
        Headers({"authorization": f"Bearer {token}", "content-type": "application/json"}),
        json.dumps({"tier": "semantic", "key": "ada", "value": "Ada prefers tea"}).encode(),
    )
    response = await handle(request, memory_runtime.bindings())
    assert response.status == 201
    # Answered, and nothing queued yet: the publish is work after the response.
    assert memory_runtime.queues.pending(FEED_QUEUE) == []
    await memory_runtime.background.drain()
    [queued] = memory_runtime.queues.pending(FEED_QUEUE)
    assert queued.body["change"]["type"] == "memory.written"
    await memory_runtime.deliver_queues()
    [delivered] = receiver.verified(saved["secret"])
    fact_id = response.json()["item"]["metadata"]["fact_id"]
    assert delivered["type"] == "memory.written"
    assert delivered["data"] == {
        "tier": "semantic",
        "id": fact_id,
        "key": "ada|states",
        "source": "memory_api",
        "subject": "ada",
    }
    assert "tea" not in receiver.received[0][1].decode()  # ids and what changed, no value
    [logged] = await _deliveries(client)
    assert (logged["status"], logged["attempts"], logged["http_status"]) == ("delivered", 1, 200)
    assert logged["message_id"] == delivered["id"] == receiver.received[0][0]["webhook-id"]


async def test_a_failing_endpoint_is_retried_with_backoff_then_dead_lettered(
    client: Client, memory_runtime: LocalRuntime, receiver: Receiver, clock: FixedClock
) -> None:
    await _endpoint(client, receiver.url)
    receiver.statuses = [503] * 50
    token = await client.mint("acme", "a1", **WRITER)
    await _learn(client, token, "bo", "Bo drinks coffee")
    waits = []
    for attempt in range(1, MAX_RETRIES + 2):
        await memory_runtime.deliver_queues()
        assert len(receiver.received) == attempt
        # Not due again until its backoff has passed: nothing is handed over early.
        assert await memory_runtime.deliver_queues() == 0
        waits.append(backoff(attempt))
        clock.advance(backoff(attempt))
    assert waits[:4] == [10, 20, 40, 80]
    # Every attempt was the same message: a receiver dedupes by webhook-id.
    assert len({headers["webhook-id"] for headers, _ in receiver.received}) == 1
    assert memory_runtime.queues.pending(FEED_QUEUE) == []
    await memory_runtime.deliver_queues()  # the dead-letter queue's consumer
    assert memory_runtime.queues.pending(DEAD_LETTER_QUEUE) == []
    [logged] = await _deliveries(client)
    assert logged["status"] == "dead" and logged["attempts"] == MAX_RETRIES + 1
    assert len(receiver.received) == MAX_RETRIES + 1


async def test_a_delivery_that_fails_twice_arrives_once_it_is_answered(
    client: Client, memory_runtime: LocalRuntime, receiver: Receiver, clock: FixedClock
) -> None:
    await _endpoint(client, receiver.url)
    receiver.statuses = [500, 502]
    token = await client.mint("acme", "a1", **WRITER)
    await _learn(client, token, "cy", "Cy reads maps")
    for attempt in (1, 2, 3):
        await memory_runtime.deliver_queues()
        clock.advance(backoff(attempt))
    [logged] = await _deliveries(client)
    assert (logged["status"], logged["attempts"]) == ("delivered", 3)
    assert memory_runtime.queues.pending(FEED_QUEUE) == []


async def test_a_consumer_that_dies_after_posting_delivers_again_at_least_once(
    client: Client,
    memory_runtime: LocalRuntime,
    receiver: Receiver,
    clock: FixedClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    saved = await _endpoint(client, receiver.url)
    token = await client.mint("acme", "a1", **WRITER)
    await _learn(client, token, "di", "Di owns a boat")
    record = FeedEndpoints.record
    crashes = ["once"]

    async def crash_once(self: FeedEndpoints, *args: Any, **kwargs: Any) -> None:
        if crashes and args[2] == "delivered":
            crashes.pop()
            raise RuntimeError("the isolate died after the POST")
        await record(self, *args, **kwargs)

    monkeypatch.setattr(FeedEndpoints, "record", crash_once)
    await memory_runtime.deliver_queues()
    assert len(receiver.received) == 1 and memory_runtime.queues.pending(FEED_QUEUE)
    clock.advance(backoff(1))
    await memory_runtime.deliver_queues()
    first, second = receiver.verified(saved["secret"])
    assert first == second  # the same change, twice: at least once, never lost
    [logged] = await _deliveries(client)
    assert (logged["status"], logged["attempts"]) == ("delivered", 2)


async def test_pause_resume_rotate_and_test(
    client: Client, memory_runtime: LocalRuntime, receiver: Receiver
) -> None:
    saved = await _endpoint(client, receiver.url)
    path = f"/admin/tenants/acme/webhooks/{saved['endpoint']['endpoint_id']}"
    token = await client.mint("acme", "a1", **WRITER)
    paused = await client.send("PATCH", path, {"status": "paused"}, access=client.operator)
    assert paused.json()["endpoint"]["status"] == "paused"
    unknown = await client.send(
        "PATCH",
        "/admin/tenants/acme/webhooks/01J00000000000000000000000",
        {},
        access=client.operator,
    )
    assert (unknown.status, unknown.json()["error"]["code"]) == (404, "endpoint_not_found")
    await _learn(client, token, "ed", "Ed flies kites")
    await memory_runtime.deliver_queues()
    assert receiver.received == []  # a paused endpoint gets nothing fanned out to it
    await client.send("PATCH", path, {"status": "active"}, access=client.operator)
    rotated = await client.send("PATCH", path, {"rotate_secret": True}, access=client.operator)
    new_secret = rotated.json()["secret"]
    assert new_secret.startswith("whsec_") and new_secret != saved["secret"]
    tested = await client.send("POST", path + "/test", access=client.operator)
    assert tested.json() == {"delivered": True, "http_status": 200, "error": ""}
    [ping] = receiver.verified(new_secret)
    assert ping["type"] == "memory.test"
    with pytest.raises(Exception, match="No matching signature"):
        receiver.verified(saved["secret"])
    # At rest the secret is sealed: its text is nowhere in the database.
    row = await FeedEndpoints(memory_runtime.db, "acme").get(saved["endpoint"]["endpoint_id"])
    assert row is not None and new_secret not in json.dumps(row)
    assert new_secret.removeprefix("whsec_") not in memory_runtime.state.d1.read_bytes().decode(
        "latin-1"
    )


@pytest.mark.parametrize("where", ["local", "cloudflare"])
async def test_an_erase_deletes_or_drops_the_queued_changes_that_carry_its_subject(
    client: Client, memory_runtime: LocalRuntime, receiver: Receiver, where: str
) -> None:
    saved = await _endpoint(client, receiver.url)
    token = await client.mint("acme", "a1", **WRITER)
    await _learn(client, token, "ada-lovelace", "Ada Lovelace wrote the first program")
    await _learn(client, token, "grace-hopper", "Grace Hopper found a moth")
    assert any(
        "ada-lovelace" in json.dumps(m.body) for m in memory_runtime.queues.pending(FEED_QUEUE)
    )
    # Locally the erase deletes them from the queue's file; a Cloudflare queue cannot delete
    # one, so there its consumer drops each one older than the erase, unsent.
    bindings = memory_runtime.bindings()
    if where == "cloudflare":
        bindings = dataclasses.replace(bindings, purge_residue=None)
    memory = await Memory.open(bindings, "acme")
    assert (await memory.eraser().erase("ada-lovelace")).complete
    await memory_runtime.background.drain()
    queued = json.dumps([m.body for m in memory_runtime.queues.pending(FEED_QUEUE)])
    assert ("ada-lovelace" in queued) is (where == "cloudflare")
    await memory_runtime.deliver_queues()
    assert not any("ada-lovelace" in body.decode() for _, body in receiver.received)
    types = sorted(m["type"] for m in receiver.verified(saved["secret"]))
    assert types == ["memory.erased", "memory.written"]  # grace-hopper's, and the erase
    dropped = [d for d in await _deliveries(client) if d["status"] == "dropped"]
    assert len(dropped) == (1 if where == "cloudflare" else 0)


async def test_a_failed_publish_never_fails_the_write(
    client: Client, memory_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("queue unavailable")

    monkeypatch.setattr(type(memory_runtime.queues.producer(FEED_QUEUE)), "send_batch", down)
    token = await client.mint("acme", "a1", **WRITER)
    await _learn(client, token, "fay", "Fay sails")
    listed = await client.read(token, "a1", tier="semantic")
    assert [item["value"] for item in listed.json()["items"]] == ["Fay sails"]


async def test_an_endpoint_the_outbound_guard_refuses_is_never_registered(
    client: Client, memory_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    guarded = memory_runtime.settings.model_copy(update={"outbound_allowed_hosts": ""})
    monkeypatch.setattr(memory_runtime, "settings", guarded)
    for url in ("http://127.0.0.1:9/hook", "http://169.254.169.254/latest", "http://db.internal/x"):
        refused = await client.send(
            "POST", "/admin/tenants/acme/webhooks", {"url": url}, access=client.operator
        )
        assert (refused.status, refused.json()["error"]["code"]) == (403, "upstream_forbidden")
    listed = await client.send("GET", "/admin/tenants/acme/webhooks", access=client.operator)
    assert listed.json()["endpoints"] == []


async def test_no_change_carries_a_personal_value_sealed_or_not(
    client: Client, memory_runtime: LocalRuntime, receiver: Receiver
) -> None:
    await _endpoint(client, receiver.url)
    token = await client.mint("acme", "a1", **WRITER)
    metadata = {"_personal": ["email"], "email": "ada@example.com"}
    await _learn(client, token, "ada", "Ada's contact details are on file", metadata=metadata)
    await memory_runtime.deliver_queues()
    [(_, body)] = receiver.received
    assert b"ada@example.com" not in body and b"pii.1." not in body


async def test_every_kind_of_change_is_published(
    client: Client, memory_runtime: LocalRuntime, clock: FixedClock
) -> None:
    rt = memory_runtime
    await place_tenant(rt.bindings(), "acme", "primary")
    await seed_tenant(rt, "acme")  # written, then the reconciler's merges and supersessions
    merged = [
        m.body["change"]["data"]
        for m in rt.queues.pending(FEED_QUEUE)
        if m.body["change"]["type"] == "memory.merged"
    ]
    restored = await client.send(
        "POST",
        f"/admin/tenants/acme/facts/{merged[-1]['supersedes']}/restore",
        access=client.operator,
    )
    assert restored.status == 200, restored.json()
    later = clock.now() + 200 * 86_400
    await run_scheduled(WEEKLY_PRUNE, later, rt.bindings())
    await client.send("DELETE", "/admin/tenants/acme/subjects/cyrus", access=client.operator)
    await start_move(rt.bindings(), "acme", "s2")
    for _ in range(20):
        if (await advance(rt.bindings(), "acme")).phase in ("switched", "deleting", "done"):
            break
    await rt.background.drain()
    kinds = {
        m.body["change"]["type"].removeprefix("memory.") for m in rt.queues.pending(FEED_QUEUE)
    }
    assert kinds == {"written", "superseded", "merged", "restored", "pruned", "erased", "moved"}


def test_the_cli_registers_tests_pauses_and_rotates_an_endpoint(
    tmp_path: Path,
    receiver: Receiver,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "local_runtime.commands.portability._open",
        lambda args: LocalRuntime.open(tmp_path / "state", embedder=HashingEmbedder()),
    )

    def run(*args: str) -> dict[str, Any]:
        assert cli.main(["webhooks", "acme", *args]) == 0
        return dict(json.loads(capsys.readouterr().out))

    added = run("--add", receiver.url)
    endpoint_id = added["endpoint"]["endpoint_id"]
    assert run("--test", endpoint_id)["delivered"] is True
    receiver.verified(added["secret"])
    assert run("--pause", endpoint_id)["endpoint"]["status"] == "paused"
    assert run("--rotate", endpoint_id)["secret"] != added["secret"]
    [listed] = run()["endpoints"]
    assert (listed["endpoint_id"], listed["status"]) == (endpoint_id, "paused")
