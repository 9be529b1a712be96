"""A fake Queue producer binding and consumer `MessageBatch` on the fake Pyodide runtime,
modelled on queues/configuration/javascript-apis: `sendBatch(messages, options?)` takes an
array of plain objects `{body, contentType?, delaySeconds?}` (a Map or PyProxy of options has
no readable properties, as on workerd) and at most 100 of them; a delivered `Message` has
`id`, `timestamp` (a Date), `body`, `attempts` and `ack()` / `retry({delaySeconds})`."""

from __future__ import annotations

from typing import Any

from tests.fakes.js_runtime import (
    UNDEFINED,
    JSArray,
    JSError,
    JSHost,
    JSPlainObject,
    js_async,
    js_method,
    js_property,
    prop,
)
from tests.fakes.r2 import FakeDate


class FakeQueue(JSHost):
    js_class = "WorkerQueue"

    def __init__(self) -> None:
        self.sent: list[tuple[Any, Any]] = []  # (body as JS gave it, delaySeconds)

    @js_async
    def sendBatch(self, messages: Any = UNDEFINED, options: Any = UNDEFINED) -> Any:
        if not isinstance(messages, JSArray) or len(messages.items) > 100:
            raise JSError("TypeError", "sendBatch: expected an array of at most 100 messages")
        for message in messages.items:
            if type(message) is not JSPlainObject:
                raise JSError("TypeError", "sendBatch: each message must be an object")
            self.sent.append((prop(message, "body"), prop(options, "delaySeconds")))
        return UNDEFINED


class FakeMessage(JSHost):
    js_class = "QueueMessage"

    def __init__(self, message_id: str, body: Any, attempts: int, ms: int) -> None:
        self.values = {"id": message_id, "body": body, "attempts": attempts}
        self.ms = ms
        self.settled: tuple[str, Any] | None = None

    @js_property
    def id(self) -> Any:
        return self.values["id"]

    @js_property
    def body(self) -> Any:
        return self.values["body"]

    @js_property
    def attempts(self) -> Any:
        return self.values["attempts"]

    @js_property
    def timestamp(self) -> Any:
        return FakeDate(self.ms)

    @js_method
    def ack(self) -> Any:
        self.settled = ("ack", None)
        return UNDEFINED

    @js_method
    def retry(self, options: Any = UNDEFINED) -> Any:
        self.settled = ("retry", prop(options, "delaySeconds"))
        return UNDEFINED


class FakeMessageBatch(JSHost):
    js_class = "QueueEvent"

    def __init__(self, queue: str, messages: list[FakeMessage]) -> None:
        self.name = queue
        self.items = messages

    @js_property
    def queue(self) -> Any:
        return self.name

    @js_property
    def messages(self) -> Any:
        return JSArray(self.items)
