"""`Queue` over a Queue producer binding (`env.FEED`), and the consumer's side of a
`MessageBatch` (queues/configuration/javascript-apis): `sendBatch([{body, contentType:
"json"}])`; each delivered `Message` has `id`, `body`, `attempts` and
`timestamp` (a Date), and is settled with `ack()` or `retry({delaySeconds})`. Limits are checked
before the call; JS errors become `BindingUnavailableError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bindings.cloudflare import ffi
from bindings.ports.errors import BindingUnavailableError
from bindings.ports.queue import QueueMessage, check_batch


class CloudflareQueue:
    def __init__(self, binding: Any) -> None:
        self._queue = binding
        self._raw = ffi.is_raw(binding)

    async def send_batch(self, bodies: Sequence[Any]) -> None:
        check_batch(bodies)
        messages = ffi.to_js_arg([{"body": b, "contentType": "json"} for b in bodies], self._raw)
        try:
            await self._queue.sendBatch(messages)
        except ffi.JsException as exc:
            raise BindingUnavailableError(f"queue sendBatch: {ffi.error_message(exc)}") from exc


def received(batch: Any) -> list[tuple[QueueMessage, Any]]:
    """Each message of a `MessageBatch` as the port's value, with the JS message to settle."""
    out = []
    for message in batch.messages:
        ms = ffi.epoch_ms(message.timestamp) or 0
        body = ffi.to_py(message.body)
        out.append((QueueMessage(str(message.id), body, int(message.attempts), ms), message))
    return out


def settle(message: Any, delay_seconds: int | None) -> None:
    """Ack `message` (None) or ask for it again after `delay_seconds`."""
    if delay_seconds is None:
        message.ack()
    else:
        message.retry(ffi.to_js_options(ffi.is_raw(message), delaySeconds=delay_seconds))
