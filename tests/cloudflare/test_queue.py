"""`CloudflareQueue` and the consumer's side of a `MessageBatch`, against the fakes, in raw and
wrapped mode (the queue's semantics themselves: tests/miniflare/test_queues_on_workerd.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bindings.ports.errors import BindingLimitError
from tests.fakes.js_runtime import FakeJsRuntime, JSPlainObject, JSValue
from tests.fakes.queue import FakeMessage, FakeMessageBatch, FakeQueue


async def test_bodies_reach_send_batch_as_json_objects(
    bind: Callable[[JSValue], Any],
) -> None:
    from bindings.cloudflare.queue import CloudflareQueue

    fake = FakeQueue()
    queue = CloudflareQueue(bind(fake))
    await queue.send_batch([{"kind": "change", "n": 1}, {"kind": "change", "n": 2}])
    bodies = [b.props if isinstance(b, JSPlainObject) else b for b, _ in fake.sent]
    assert bodies == [{"kind": "change", "n": 1}, {"kind": "change", "n": 2}]
    with pytest.raises(BindingLimitError):
        await queue.send_batch([{}] * 101)
    with pytest.raises(BindingLimitError):
        await queue.send_batch([{"x": "y" * 130_000}])


def test_a_batch_is_read_and_each_message_acked_or_retried(
    js_runtime: FakeJsRuntime, mode: str
) -> None:
    import workers

    from bindings.cloudflare.queue import received, settle

    messages = [
        FakeMessage("m1", JSPlainObject({"kind": "change"}), 1, 1_750_000_000_000),
        FakeMessage("m2", JSPlainObject({"kind": "delivery"}), 3, 1_750_000_000_500),
    ]
    raw = js_runtime.proxy(FakeMessageBatch("agent-memory-feed", messages))
    batch = raw if mode == "raw" else workers.rpc._BindingWrapper(raw)
    got = received(batch)
    assert [(m.id, m.body, m.attempts, m.timestamp_ms) for m, _ in got] == [
        ("m1", {"kind": "change"}, 1, 1_750_000_000_000),
        ("m2", {"kind": "delivery"}, 3, 1_750_000_000_500),
    ]
    settle(got[0][1], None)
    settle(got[1][1], 40)
    assert [m.settled for m in messages] == [("ack", None), ("retry", 40)]
