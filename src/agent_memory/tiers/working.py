"""Tier 1, working memory in KV: `agent_working:{tenant}:{instance}:{key}` → JSON, 1 h TTL.

Contract:

* Keys are validated before any KV call: tenant and instance are single segments (see
  `agent_memory.scope`); the key is one or more `:`-separated segments of
  `[A-Za-z0-9._@+-]`, none empty and none a wildcard (`*`, `?`, `%` and friends are not in
  the alphabet), ≤ 128 bytes. A bad key raises `InvalidWorkingMemoryKey`.
* Every write refreshes the entry's 1 h TTL (`expiration_ttl=3600`).
* An instance may hold at most `WORKING_MEMORY_BUDGET_BYTES` (128 KiB) across all its
  keys, counting key and JSON value bytes. The budget is checked *before* the write: a
  write that would exceed it raises `WorkingMemoryBudgetExceeded` and writes nothing.
  Replacing a key counts the new value instead of the old one.
* Values are JSON (no NaN/Infinity); anything else raises `WorkingMemoryError`.

Usage is computed from the instance's key listing, where each entry carries its size in
KV metadata (`{"bytes": n, "written_at": epoch_s}`), so no second copy of the accounting
can drift; the write time lets a single `read` be scored for recency. KV listings
are eventually consistent on Cloudflare (up to ~60 s across locations); an instance's
writes all come from its one Durable Object, in one location, which is what keeps the
check meaningful. The check spans awaits (list, then put), so concurrent turns of one
object share a `write_lock` (an `asyncio.Lock` the Durable Object owns): otherwise two
interleaved writes could each pass the check and together exceed the budget.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from agent_memory.governance.policy import WriteDenied, WriteGate, WriteProposal
from agent_memory.scope import INSTANCE_RE, TENANT_RE
from bindings.ports.clock import Clock, SystemClock
from bindings.ports.kv import KVNamespace

WORKING_MEMORY_PREFIX = "agent_working"
WORKING_MEMORY_TTL_SECONDS = 3600
WORKING_MEMORY_BUDGET_BYTES = 128 * 1024
MAX_KEY_BYTES = 128
_KEY_SEGMENT = re.compile(r"^[A-Za-z0-9._@+-]+$")


class WorkingMemoryError(ValueError):
    """A working-memory operation was refused; nothing was written."""


class InvalidWorkingMemoryKey(WorkingMemoryError):
    """The key (or its tenant / instance segment) is empty, a wildcard or malformed."""


class WorkingMemoryWriteDenied(WorkingMemoryError):
    """The write policy refused the write (`agent_memory.governance.policy`); `denied` says why."""

    def __init__(self, denied: WriteDenied) -> None:
        super().__init__(str(denied))
        self.denied = denied


class WorkingMemoryBudgetExceeded(WorkingMemoryError):
    """The write would take the instance past its byte budget."""

    def __init__(self, *, key: str, needed: int, used: int, budget: int) -> None:
        super().__init__(
            f"working memory budget exceeded: writing {key!r} needs {needed} bytes, "
            f"the instance already uses {used} of {budget}; delete keys or store less"
        )
        self.key = key
        self.needed = needed
        self.used = used
        self.budget = budget


class WorkingRead(BaseModel):
    """One key read with its value and, when recorded, its write time (epoch seconds)."""

    model_config = ConfigDict(frozen=True)

    key: str
    value: Any
    written_at: float | None = None


class WorkingEntry(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    bytes: int
    expiration: int | None = None


class WorkingWrite(BaseModel):
    """What a successful `set` did, for the run log."""

    model_config = ConfigDict(frozen=True)

    key: str
    bytes: int
    used_after: int
    budget: int


def validate_key(key: str) -> str:
    """Return `key` if it is a valid working-memory key, else raise `InvalidWorkingMemoryKey`."""
    if not isinstance(key, str) or not key:
        raise InvalidWorkingMemoryKey("working memory key must be a non-empty string")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise InvalidWorkingMemoryKey(f"working memory key is longer than {MAX_KEY_BYTES} bytes")
    for segment in key.split(":"):
        if not segment:
            raise InvalidWorkingMemoryKey(f"working memory key {key!r} has an empty segment")
        if not _KEY_SEGMENT.match(segment):
            raise InvalidWorkingMemoryKey(
                f"working memory key {key!r} has a segment with characters outside "
                "letters, digits and . _ @ + - (wildcards are not allowed)"
            )
    return key


def encode_value(value: Any) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise WorkingMemoryError(f"working memory values must be JSON: {exc}") from None


class WorkingMemory:
    """The working memory of one agent instance."""

    def __init__(
        self,
        kv: KVNamespace,
        tenant: str,
        instance_id: str,
        *,
        budget_bytes: int = WORKING_MEMORY_BUDGET_BYTES,
        ttl_seconds: int = WORKING_MEMORY_TTL_SECONDS,
        write_lock: asyncio.Lock | None = None,
        gate: WriteGate | None = None,
        agent_type: str | None = None,
        run_id: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        if not TENANT_RE.fullmatch(tenant or ""):
            raise InvalidWorkingMemoryKey(f"invalid tenant segment {tenant!r}")
        if not INSTANCE_RE.fullmatch(instance_id or ""):
            raise InvalidWorkingMemoryKey(f"invalid instance segment {instance_id!r}")
        self._kv = kv
        self.prefix = f"{WORKING_MEMORY_PREFIX}:{tenant}:{instance_id}:"
        self.budget_bytes = budget_bytes
        self.ttl_seconds = ttl_seconds
        self._lock = write_lock or asyncio.Lock()
        # Every write is a proposal checked by the write policy (ADR-0051); the gate also
        # records `memory_written` events when it has an event log.
        self._gate = gate or WriteGate(tenant)
        self._instance_id = instance_id
        self._agent_type = agent_type
        self._run_id = run_id
        self._clock: Clock = clock or SystemClock()

    def kv_key(self, key: str) -> str:
        return self.prefix + validate_key(key)

    async def get(self, key: str) -> Any | None:
        """The stored JSON value, or None when missing or expired."""
        raw = await self._kv.get(self.kv_key(key))
        return None if raw is None else json.loads(raw)

    async def read(self, key: str) -> WorkingRead | None:
        """The value under `key` with its write time (epoch seconds; None for an entry
        written before write times were recorded), or None when missing or expired."""
        found = await self._kv.get_with_metadata(self.kv_key(key))
        if found.value is None:
            return None
        written = (found.metadata or {}).get("written_at")
        return WorkingRead(
            key=key,
            value=json.loads(found.value),
            written_at=float(written) if isinstance(written, int | float) else None,
        )

    async def entries(self) -> list[WorkingEntry]:
        """Every live key of the instance with its accounted size, in key order."""
        found: list[WorkingEntry] = []
        cursor: str | None = None
        while True:
            page = await self._kv.list(prefix=self.prefix, cursor=cursor)
            for item in page.keys:
                name = item.name[len(self.prefix) :]
                size = (item.metadata or {}).get("bytes")
                if not isinstance(size, int):
                    size = 0  # written by something else: counted by key bytes only
                found.append(
                    WorkingEntry(
                        key=name,
                        bytes=len(name.encode("utf-8")) + size,
                        expiration=item.expiration,
                    )
                )
            if page.list_complete or not page.cursor:
                return found
            cursor = page.cursor

    async def usage(self) -> int:
        return sum(entry.bytes for entry in await self.entries())

    async def set(self, key: str, value: Any) -> WorkingWrite:
        """Write `value` under `key` with a fresh TTL, or raise without writing anything."""
        kv_key = self.kv_key(key)
        encoded = encode_value(value)
        proposal = WriteProposal(
            tier="working",
            key=f"{self._instance_id}:{key}",
            value=value,
            source="working_memory",
            agent_type=self._agent_type,
            run_id=self._run_id,
        )
        try:
            self._gate.check(proposal)
        except WriteDenied as denied:
            raise WorkingMemoryWriteDenied(denied) from None
        value_bytes = len(encoded.encode("utf-8"))
        needed = len(key.encode("utf-8")) + value_bytes
        async with self._lock:
            used = sum(entry.bytes for entry in await self.entries() if entry.key != key)
            if used + needed > self.budget_bytes:
                raise WorkingMemoryBudgetExceeded(
                    key=key, needed=needed, used=used, budget=self.budget_bytes
                )
            # The write time rides in the metadata so a single read can be scored for
            # recency without listing the instance (`read`).
            metadata = {"bytes": value_bytes, "written_at": round(self._clock.now(), 3)}
            await self._kv.put(kv_key, encoded, expiration_ttl=self.ttl_seconds, metadata=metadata)
        await self._gate.committed([proposal])
        return WorkingWrite(
            key=key, bytes=needed, used_after=used + needed, budget=self.budget_bytes
        )

    async def delete(self, key: str) -> None:
        await self._kv.delete(self.kv_key(key))

    async def snapshot(self) -> dict[str, Any]:
        """Every live key with its value (what a turn sees at its start)."""
        values: dict[str, Any] = {}
        for entry in await self.entries():
            raw = await self._kv.get(self.prefix + entry.key)
            if raw is not None:  # expired between list and get
                values[entry.key] = json.loads(raw)
        return values
