"""workerd's own Queues (Miniflare) against the local queue the runtime delivers the change
feed with: the same script of sends and verdicts gives the same deliveries on both — each
message's attempts counting from 1 on the same id, a retried one handed over again, one retried
past `max_retries` handed once to the dead-letter queue (attempts from 1 there), JSON bodies
unchanged, the send time as the message's timestamp."""

from __future__ import annotations

import time
from typing import Any

from bindings.ports.clock import FixedClock
from bindings.ports.queue import QueueMessage
from local_runtime.adapters.queue import ConsumerSettings, LocalQueues
from tests.miniflare.adapters import MiniflareHarness

# fail: how many deliveries of feed the consumer retries before it acks (feed-dlq: none).
BODIES = [{"n": 1, "fail": 0}, {"n": 2, "fail": 1}, {"n": 3, "fail": 9, "nested": {"x": [1]}}]
SETTINGS = {
    "feed": ConsumerSettings(max_batch_size=10, max_retries=2, dead_letter_queue="feed-dlq"),
    "feed-dlq": ConsumerSettings(max_batch_size=10),
}


def shape(log: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    """(queue, body n, attempts) of each delivery, in a stable order."""
    return sorted((d["queue"], d["body"]["n"], d["attempts"]) for d in log)


async def local_deliveries() -> list[dict[str, Any]]:
    queues = LocalQueues(None, FixedClock(1_750_000_000.0))
    log: list[dict[str, Any]] = []

    async def consumer(queue: str, batch: list[QueueMessage]) -> dict[str, int | None]:
        log.extend(
            {
                "queue": queue,
                "id": m.id,
                "body": m.body,
                "attempts": m.attempts,
                "timestamp": m.timestamp_ms,
            }
            for m in batch
        )
        retry = queue == "feed"
        return {m.id: 0 if retry and m.body["fail"] >= m.attempts else None for m in batch}

    await queues.producer("feed").send_batch(BODIES)
    while sum([await queues.deliver(q, s, consumer) for q, s in SETTINGS.items()]):
        pass
    return log


async def test_workerd_and_the_local_queue_deliver_alike(miniflare: MiniflareHarness) -> None:
    sent = time.time() * 1000
    assert miniflare.call("/queue", {"op": "send", "bodies": BODIES}) == {"ok": None}
    # 1 + 2 + 3 deliveries on feed, and message 3 once more on feed-dlq.
    answer = miniflare.call("/queue", {"op": "log", "count": 7})
    workerd = answer["ok"]
    local = await local_deliveries()
    assert (
        shape(workerd)
        == shape(local)
        == [
            ("feed", 1, 1),
            ("feed", 2, 1),
            ("feed", 2, 2),
            ("feed", 3, 1),
            ("feed", 3, 2),
            ("feed", 3, 3),
            ("feed-dlq", 3, 1),
        ]
    )
    for log in (workerd, local):
        ids = {(d["queue"], d["body"]["n"]): set() for d in log}
        for d in log:
            ids[(d["queue"], d["body"]["n"])].add(d["id"])
        assert all(len(found) == 1 for found in ids.values())  # a retry keeps its id
        assert {d["body"]["n"]: d["body"] for d in log}[3] == BODIES[2]
    assert all(abs(d["timestamp"] - sent) < 60_000 for d in workerd)
