"""Queue port: a Cloudflare Queue's producer (`env.FEED.sendBatch`) and the messages its
consumer is handed (queues/configuration/javascript-apis). Bodies are JSON values; a consumer
settles each message by acking it or asking for it again after a delay. Limits
(queues/platform/limits): 128 KB a message, 100 messages (256 KB) a `sendBatch`; the adapters
check them before sending.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bindings.ports.errors import BindingLimitError

QUEUE_MAX_MESSAGE_BYTES = 128_000 - 100  # ~100 bytes of Cloudflare's own metadata count too
QUEUE_MAX_BATCH_MESSAGES = 100
QUEUE_MAX_BATCH_BYTES = 256_000


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """One delivered message: its id, JSON body, delivery attempt (1 on the first) and the
    time it was sent (epoch ms)."""

    id: str
    body: Any
    attempts: int
    timestamp_ms: int


def check_batch(bodies: Sequence[Any]) -> list[str]:
    """The bodies as JSON text if a `sendBatch` takes them, else `BindingLimitError`."""
    if len(bodies) > QUEUE_MAX_BATCH_MESSAGES:
        raise BindingLimitError(f"sendBatch takes at most {QUEUE_MAX_BATCH_MESSAGES} messages")
    texts = [json.dumps(body, separators=(",", ":"), ensure_ascii=False) for body in bodies]
    sizes = [len(text.encode("utf-8")) for text in texts]
    if any(size > QUEUE_MAX_MESSAGE_BYTES for size in sizes):
        raise BindingLimitError(f"a queue message is at most {QUEUE_MAX_MESSAGE_BYTES} bytes")
    if sum(sizes) > QUEUE_MAX_BATCH_BYTES:
        raise BindingLimitError(f"a sendBatch is at most {QUEUE_MAX_BATCH_BYTES} bytes")
    return texts


class Queue(Protocol):
    async def send_batch(self, bodies: Sequence[Any]) -> None:
        """Enqueue `bodies` (JSON values)."""
