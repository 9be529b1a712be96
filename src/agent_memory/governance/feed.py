"""The change feed (issue 45; docs/portability.md "Change feed" gives the payload, headers,
retries and erasure): `ChangeFeed.publish` sends one `FEED` Queue message per change after the
response (a failed send is logged; the write stands), and `FeedConsumer` fans each change out
to the tenant's active webhook endpoints, signed as Standard Webhooks says. A change carries
ids and counts, never a value. Tables (control plane, migration 0002): `feed_endpoints`,
`feed_deliveries` (no payload), `feed_erasures`.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from agent_memory.directory import primary_db
from agent_memory.ids import chunks, is_ulid, new_ulid, sha256_hex, ulid_time_ms
from bindings.ports.background import BackgroundTasks
from bindings.ports.clock import Clock
from bindings.ports.crypto import Signatures
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.queue import Queue, QueueMessage
from bindings.ports.sql import Row, SqlValue
from http_messages import CodedError

log = logging.getLogger(__name__)

# wrangler.toml's consumer of the feed says the same (tests/test_wrangler_config.py).
FEED_QUEUE = "agent-memory-feed"
DEAD_LETTER_QUEUE = "agent-memory-feed-dlq"
MAX_RETRIES = 8
FIRST_RETRY_SECONDS = 10
MAX_RETRY_SECONDS = 3_600
TEST_TYPE = "memory.test"
EndpointStatus = Literal["active", "paused"]
DeliveryStatus = Literal["delivered", "retrying", "dead", "dropped", "skipped"]
# (url, headers, body) -> the HTTP status, or raises (refused by the guard, unreachable).
Post = Callable[[str, dict[str, str], bytes], Awaitable[int]]
# An endpoint row -> its secret's key bytes (the edge opens the sealed secret).
OpenSecret = Callable[[Row], Awaitable[bytes]]
# (endpoint id, secret) -> the sealed form `feed_endpoints.secret` keeps (the edge seals).
Seal = Callable[[str, str], Awaitable[str]]
SECRET_PREFIX = "whsec_"  # Standard Webhooks' secrets: the prefix, then the key in base64


def backoff(attempts: int) -> int:
    """Seconds before the next attempt after `attempts` failed ones: 10 s doubling, at most
    an hour (8 retries span about 42 minutes)."""
    return int(min(FIRST_RETRY_SECONDS * 2 ** max(attempts - 1, 0), MAX_RETRY_SECONDS))


def change(type_: str, now: float, data: Mapping[str, Any]) -> dict[str, Any]:
    """A change as delivered: `{"id", "type", "timestamp", "data"}`."""
    stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
    return {
        "id": new_ulid(now),
        "type": type_,
        "timestamp": stamp.replace("+00:00", "Z"),
        "data": dict(data),
    }


async def sign(
    signatures: Signatures, secret: bytes, message_id: str, now: float, body: bytes
) -> dict[str, str]:
    """The Standard Webhooks headers of one delivery of `body`."""
    timestamp = int(now)
    signed = f"{message_id}.{timestamp}.".encode() + body  # what Standard Webhooks signs
    mac = await signatures.hmac_sign(secret, signed)
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": "v1," + base64.b64encode(mac).decode("ascii"),
    }


@dataclass
class ChangeFeed:
    """Publishes one tenant's changes to the `FEED` queue after the response."""

    queue: Queue
    background: BackgroundTasks
    clock: Clock
    db: D1Database | None = None  # the primary database: erasures

    @classmethod
    def of(cls, bindings: Any) -> ChangeFeed | None:
        """The deployment's feed (`Bindings.feed`), or None without the Queue binding."""
        if bindings.feed is None:
            return None
        return cls(bindings.feed, bindings.background, bindings.clock, primary_db(bindings))

    def publish(self, tenant: str, changes: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Send `(type, data)` changes of `tenant` after the response (best effort)."""
        if not changes:
            return
        now = self.clock.now()
        bodies = [
            {"kind": "change", "tenant": tenant, "change": change(f"memory.{t}", now, d)}
            for t, d in changes
        ]

        async def send() -> None:
            try:
                for batch in chunks(bodies, 100):
                    await self.queue.send_batch(batch)
            except Exception as exc:  # the change happened; only its notice is lost
                log.error("change feed: %d change(s) of %s not sent: %s", len(bodies), tenant, exc)

        self.background.wait_until(send())

    async def erased(self, tenant: str, subject: str, counts: Mapping[str, Any]) -> None:
        """Record that `subject` was erased (queued deliveries carrying it are dropped), then
        publish `memory.erased` naming its hash."""
        digest = sha256_hex(subject)
        if self.db is not None:
            await (
                self.db.prepare(
                    "INSERT INTO feed_erasures (tenant_id, subject_hash, erased_at) "
                    "VALUES (?, ?, ?) ON CONFLICT (tenant_id, subject_hash) "
                    "DO UPDATE SET erased_at = excluded.erased_at"
                )
                .bind(tenant, digest, int(self.clock.now() * 1000))
                .run()
            )
        self.publish(tenant, [("erased", {"subject_sha256": digest, **counts})])


class FeedEndpoints:
    """One tenant's webhook endpoints and delivery log (primary database)."""

    def __init__(self, db: D1Database, tenant: str) -> None:
        self._db = db
        self.tenant = tenant

    def _sql(self, sql: str, *params: SqlValue) -> D1Statement:
        """`sql` bound to the tenant (always its first parameter), then `params`."""
        return self._db.prepare(sql).bind(self.tenant, *params)

    async def add(
        self, endpoint_id: str, url: str, sealed: str, description: str, now_ms: int
    ) -> Row:
        await self._sql(
            "INSERT INTO feed_endpoints (tenant_id, endpoint_id, url, secret, status, "
            "description, created_at, updated_at) VALUES (?, ?, ?, ?, 'active', ?, ?, ?)",
            endpoint_id,
            url,
            sealed,
            description,
            now_ms,
            now_ms,
        ).run()
        row = await self.get(endpoint_id)
        assert row is not None
        return row

    async def get(self, endpoint_id: str) -> Row | None:
        sql = "SELECT * FROM feed_endpoints WHERE tenant_id = ? AND endpoint_id = ?"
        return await self._sql(sql, endpoint_id).first()

    async def listed(self, *, active_only: bool = False) -> list[Row]:
        where = " AND status = 'active'" if active_only else ""
        sql = f"SELECT * FROM feed_endpoints WHERE tenant_id = ?{where} ORDER BY endpoint_id"
        return list((await self._sql(sql).all()).results)

    async def update(self, endpoint_id: str, now_ms: int, **changes: str) -> Row | None:
        """Set `status` and/or `secret`; the row after, or None for an unknown endpoint."""
        sets = "".join(f"{name} = ?, " for name in changes)
        await (
            self._db.prepare(
                f"UPDATE feed_endpoints SET {sets}updated_at = ? WHERE tenant_id = ? "
                "AND endpoint_id = ?"
            )
            .bind(*changes.values(), now_ms, self.tenant, endpoint_id)
            .run()
        )
        return await self.get(endpoint_id)

    async def record(
        self,
        endpoint_id: str,
        message: Mapping[str, Any],
        status: DeliveryStatus,
        attempts: int,
        now_ms: int,
        http_status: int | None = None,
        error: str | None = None,
    ) -> None:
        """Upsert the delivery of `message` (a change) to `endpoint_id`: its latest outcome."""
        await self._sql(
            "INSERT INTO feed_deliveries (tenant_id, endpoint_id, message_id, type, status, "
            "attempts, http_status, error, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, endpoint_id, message_id) DO UPDATE SET "
            "status = excluded.status, attempts = max(attempts, excluded.attempts), "
            "http_status = excluded.http_status, error = excluded.error, "
            "updated_at = excluded.updated_at",
            endpoint_id,
            str(message["id"]),
            str(message["type"])[:64],
            status,
            attempts,
            http_status,
            None if error is None else error[:500],
            now_ms,
            now_ms,
        ).run()

    async def deliveries(self, limit: int) -> list[Row]:
        """The newest deliveries, newest first."""
        sql = (
            "SELECT * FROM feed_deliveries WHERE tenant_id = ? "
            "ORDER BY updated_at DESC, message_id DESC LIMIT ?"
        )
        return list((await self._sql(sql, limit).all()).results)

    async def erased_after(self, subject: str, since_ms: int) -> bool:
        """Whether `subject` was erased at or after `since_ms`."""
        sql = (
            "SELECT 1 AS hit FROM feed_erasures WHERE tenant_id = ? AND subject_hash = ? "
            "AND erased_at >= ?"
        )
        return await self._sql(sql, sha256_hex(subject), since_ms).first_value("hit") is not None


async def forget_feed_history(db: D1Database, before_ms: int) -> int:
    """Delete delivery records and erasure marks older than `before_ms` (the daily cron:
    nothing queued is older than the queue's retention)."""
    results = await db.batch(
        [
            db.prepare("DELETE FROM feed_deliveries WHERE updated_at < ?").bind(before_ms),
            db.prepare("DELETE FROM feed_erasures WHERE erased_at < ?").bind(before_ms),
        ]
    )
    return sum(r.meta.changes for r in results)


@dataclass
class FeedConsumer:
    """The `FEED` queue's consumer (and its dead-letter queue's): see the module docstring."""

    db: D1Database  # the primary database
    queue: Queue | None  # where fan-out sends deliveries (None: only `attempt` is used)
    signatures: Signatures
    clock: Clock
    post: Post
    open_secret: OpenSecret

    def _now_ms(self) -> int:
        return int(self.clock.now() * 1000)

    async def consume(self, queue: str, messages: Sequence[QueueMessage]) -> dict[str, int | None]:
        """Each message's verdict: None to ack it, else seconds before it is retried."""
        verdicts: dict[str, int | None] = {}
        for message in messages:
            body = message.body if isinstance(message.body, dict) else {}
            try:
                if queue == DEAD_LETTER_QUEUE:
                    await self._dead(body)
                    verdicts[message.id] = None
                elif body.get("kind") == "change":
                    await self._fan_out(body)
                    verdicts[message.id] = None
                elif body.get("kind") == "delivery":
                    verdicts[message.id] = await self._deliver(body, message.attempts)
                else:
                    log.warning(
                        "change feed: message %s is neither change nor delivery", message.id
                    )
                    verdicts[message.id] = None
            except Exception:  # D1 or the queue failed: try the message again later
                log.exception("change feed: message %s failed", message.id)
                verdicts[message.id] = backoff(message.attempts)
        return verdicts

    async def _fan_out(self, body: dict[str, Any]) -> None:
        tenant = str(body["tenant"])
        endpoints = await FeedEndpoints(self.db, tenant).listed(active_only=True)
        deliveries = [
            {
                "kind": "delivery",
                "tenant": tenant,
                "endpoint_id": e["endpoint_id"],
                "change": body["change"],
            }
            for e in endpoints
        ]
        for batch in chunks(deliveries, 100):
            assert self.queue is not None, "fanning out needs the FEED queue"
            await self.queue.send_batch(batch)

    async def _deliver(self, body: dict[str, Any], attempts: int) -> int | None:
        store = FeedEndpoints(self.db, str(body["tenant"]))
        message, endpoint_id = body["change"], str(body["endpoint_id"])
        subject = message.get("data", {}).get("subject")
        erased = isinstance(subject, str) and await store.erased_after(
            subject, ulid_time_ms(str(message["id"]))
        )
        endpoint = None if erased else await store.get(endpoint_id)
        if endpoint is None or endpoint["status"] != "active":
            status: DeliveryStatus = "dropped" if erased else "skipped"
            if not erased and endpoint is None:
                return None  # the endpoint is gone: nothing to record it against
            await store.record(endpoint_id, message, status, attempts, self._now_ms())
            return None
        code, error = await self.attempt(endpoint, message)
        if code is not None and 200 <= code < 300:
            await store.record(endpoint_id, message, "delivered", attempts, self._now_ms(), code)
            return None
        # The last allowed attempt failing goes to the dead-letter queue, recorded there.
        await store.record(endpoint_id, message, "retrying", attempts, self._now_ms(), code, error)
        return backoff(attempts)

    async def attempt(self, endpoint: Row, message: Mapping[str, Any]) -> tuple[int | None, str]:
        """POST `message` to `endpoint`, signed: (HTTP status or None, error text)."""
        payload = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        try:
            secret = await self.open_secret(endpoint)
            headers = await sign(
                self.signatures, secret, str(message["id"]), self.clock.now(), payload
            )
            code = await self.post(str(endpoint["url"]), headers, payload)
        except Exception as exc:  # refused by the outbound guard, unreachable, timed out
            return None, f"{type(exc).__name__}: {exc}"[:500]
        return code, "" if 200 <= code < 300 else f"HTTP {code}"

    async def _dead(self, body: dict[str, Any]) -> None:
        if body.get("kind") == "delivery":
            store = FeedEndpoints(self.db, str(body["tenant"]))
            await store.record(
                str(body["endpoint_id"]),
                body["change"],
                "dead",
                MAX_RETRIES + 1,
                self._now_ms(),
                error="retries exhausted: in the dead-letter queue",
            )


class EndpointNotFound(CodedError):
    status = 404
    code = "endpoint_not_found"


@dataclass
class Webhooks:
    """One tenant's webhook endpoints as an operator manages them: a URL is registered only if
    it passes `check_url` (the edge's outbound guard, as at each delivery); a secret is made
    here, returned once and kept only as `seal` makes it."""

    store: FeedEndpoints
    consumer: FeedConsumer
    seal: Seal
    check_url: Callable[[str], Awaitable[None]]

    async def add(self, url: str, description: str) -> tuple[Row, str]:
        """Register `url` (active); the row and its secret."""
        await self.check_url(url)
        now = self.consumer.clock.now()
        endpoint_id = new_ulid(now)
        secret, sealed = await self._secret(endpoint_id)
        return await self.store.add(endpoint_id, url, sealed, description, int(now * 1000)), secret

    async def change(
        self, endpoint_id: str, status: EndpointStatus | None, rotate: bool
    ) -> tuple[Row | None, str | None]:
        """Pause or resume an endpoint, or rotate its secret: the row, and the new secret."""
        await self.get(endpoint_id)
        changes: dict[str, str] = {} if status is None else {"status": status}
        secret = None
        if rotate:
            secret, changes["secret"] = await self._secret(endpoint_id)
        now_ms = int(self.consumer.clock.now() * 1000)
        return await self.store.update(endpoint_id, now_ms, **changes), secret

    async def test(self, endpoint_id: str) -> tuple[int | None, str]:
        """Deliver a signed `memory.test` change now: (HTTP status or None, error text)."""
        message = change(TEST_TYPE, self.consumer.clock.now(), {"endpoint_id": endpoint_id})
        return await self.consumer.attempt(await self.get(endpoint_id), message)

    async def get(self, endpoint_id: str) -> Row:
        """The endpoint; 404 `endpoint_not_found`."""
        found = await self.store.get(endpoint_id) if is_ulid(endpoint_id) else None
        if found is None:
            raise EndpointNotFound("no such webhook endpoint of this tenant")
        return found

    async def _secret(self, endpoint_id: str) -> tuple[str, str]:
        secret = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")
        return secret, await self.seal(endpoint_id, secret)
