"""Tier 1, working memory in KV: item `agent-memory:{tenant}:{instance}:working:{key}` → JSON,
1 h TTL (the ADR-043 key `agent_working:{tenant}:{instance}:{key}` until the namespace
migration moves it: `agent_memory.tiers.namespaced_kv`, flags `namespace`).

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
from agent_memory.namespace import SERVICE, NamespaceKey
from agent_memory.scope import INSTANCE_RE, TENANT_RE
from agent_memory.tiers.namespaced_kv import NamespacedKV, NamespaceFlags, ReadCounts
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
        namespace: NamespaceFlags | None = None,
        read_counts: ReadCounts | None = None,
    ) -> None:
        if not TENANT_RE.fullmatch(tenant or ""):
            raise InvalidWorkingMemoryKey(f"invalid tenant segment {tenant!r}")
        if not INSTANCE_RE.fullmatch(instance_id or ""):
            raise InvalidWorkingMemoryKey(f"invalid instance segment {instance_id!r}")
        # Which key (legacy or canonical) is read and written follows the namespace flags.
        self._keys = NamespacedKV(
            kv,
            NamespaceKey(SERVICE, tenant, instance_id),
            "working",
            flags=namespace,
            counts=read_counts,
            repair_ttl=ttl_seconds,
        )
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

    async def get(self, key: str) -> Any | None:
        """The stored JSON value, or None when missing or expired."""
        raw = await self._keys.get(validate_key(key))
        return None if raw is None else json.loads(raw)

    async def read(self, key: str) -> WorkingRead | None:
        """The value under `key` with its write time (epoch seconds; None for an entry
        written before write times were recorded), or None when missing or expired."""
        found = await self._keys.get_with_metadata(validate_key(key))
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
        for item in await self._keys.entries():
            size = (item.metadata or {}).get("bytes")
            if not isinstance(size, int):
                size = 0  # written by something else: counted by key bytes only
            found.append(
                WorkingEntry(
                    key=item.entity,
                    bytes=len(item.entity.encode("utf-8")) + size,
                    expiration=item.expiration,
                )
            )
        return found

    async def usage(self) -> int:
        return sum(entry.bytes for entry in await self.entries())

    async def set(self, key: str, value: Any) -> WorkingWrite:
        """Write `value` under `key` with a fresh TTL, or raise without writing anything."""
        validate_key(key)
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
            await self._keys.put(key, encoded, expiration_ttl=self.ttl_seconds, metadata=metadata)
        await self._gate.committed([proposal])
        return WorkingWrite(
            key=key, bytes=needed, used_after=used + needed, budget=self.budget_bytes
        )

    async def delete(self, key: str) -> None:
        await self._keys.delete(validate_key(key))

    async def snapshot(self) -> dict[str, Any]:
        """Every live key with its value (what a turn sees at its start)."""
        values: dict[str, Any] = {}
        for entry in await self.entries():
            raw = await self._keys.get(entry.key)
            if raw is not None:  # expired between list and get
                values[entry.key] = json.loads(raw)
        return values
