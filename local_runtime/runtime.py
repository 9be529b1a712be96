"""`LocalRuntime`: builds the local bindings once and hands a `Bindings` to each request.

The stores are opened once per process (like bindings existing for the isolate's life);
`bindings()` returns the per-request view, mirroring `build_bindings(env, ctx)` on
Cloudflare.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from agent_memory.governance.feed import FEED_QUEUE
from agent_runtime_do.core import AgentRuntimeCore
from bindings.environment import Bindings, Shard
from bindings.ports.clock import Clock, SystemClock
from bindings.ports.do_sql import AlarmStorage, DurableObjectStorage
from bindings.ports.embedder import Embedder
from bindings.ports.llm import LLM
from bindings.settings import Settings
from local_runtime.access_dev import DEV_AUD, DEV_TEAM_DOMAIN, DevAccessTransport
from local_runtime.adapters.cipher import CryptographyCipher
from local_runtime.adapters.d1 import SqliteD1
from local_runtime.adapters.do_alarms import AlarmTable
from local_runtime.adapters.do_sql import DurableObjectStorageRegistry, LocalDurableObjectStorage
from local_runtime.adapters.kv import SqliteKV
from local_runtime.adapters.object_store import LocalObjectStore
from local_runtime.adapters.queue import LocalQueues, consumer_settings
from local_runtime.adapters.rate_limit import FixedWindowRateLimiter
from local_runtime.adapters.signatures import CryptographySignatures
from local_runtime.adapters.vectorize import LocalVectorIndex
from local_runtime.background import LocalBackgroundTasks
from local_runtime.dev_keks import dev_pii_keks
from local_runtime.durable_objects import LocalDurableObjectNamespace
from local_runtime.memory_tokens_dev import dev_token_keys
from local_runtime.migrations import apply_migrations
from local_runtime.state import StateDir

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS_DIR = PROJECT_ROOT / "migrations"

# What `wrangler dev` would read from wrangler.toml [vars], adjusted for a laptop.
LOCAL_VARS: dict[str, str] = {
    "ENVIRONMENT": "development",
    "EMBEDDING_PROVIDER": "local-minilm",
    "EMBEDDING_MODEL": "sentence-transformers/all-MiniLM-L6-v2-int8",
    "EMBEDDING_DIMENSIONS": "384",
    "LLM_PROVIDER": "scripted",
    "LLM_MODEL": "scripted",
    # A dev Access team whose JWKS DevAccessTransport serves from the state folder.
    "ACCESS_TEAM_DOMAIN": DEV_TEAM_DOMAIN,
    "ACCESS_AUD": DEV_AUD,
    # Tools may call upstreams on this machine (loopback only): the outbound guard refuses
    # loopback unless configured, and a laptop's test upstreams live there. Set the var to
    # "" to check the guard locally.
    "OUTBOUND_ALLOWED_HOSTS": "localhost,127.0.0.0/8,::1",
    # The dev operators (docs/memory-api.md): platform admins on the local runtime only —
    # the identity the `agents` CLI mints by default and the tests' ops@example.com. Any
    # other identity needs `agent-memory operators grant`.
    "PLATFORM_ADMINS": "email:operator@localhost,email:ops@example.com",
    # Two shards, as wrangler.toml declares (docs/placement.md): every request finds its
    # tenant's shard through the directory, here as on Cloudflare.
    "MEMORY_SHARDS": "s2=DB_2:VECTORIZE_2",
}


OAUTH_REGISTRATIONS_PER_MINUTE = 10


async def resolve_host(host: str) -> list[str]:
    """The addresses the system resolver gives for `host` (for the outbound guard)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    return [str(info[4][0]) for info in infos]


# Metadata indexes the semantic tier filters on (README "Deploy" creates the same ones).
VECTOR_METADATA_INDEXES: dict[str, str] = {
    "tenant_id": "string",
    "agent_type": "string",
    "embedding": "string",
}


def build_local_llm(settings: Settings) -> LLM | None:
    """The model `LLM_PROVIDER` names: `scripted` (default, offline) or `openai`."""
    if settings.llm_provider == "scripted":
        from local_runtime.scripted_llm import ScriptedLLM

        return ScriptedLLM()
    if settings.llm_provider == "openai" and settings.openai_api_key:
        from bindings.openai_llm import OpenAICompatibleLLM

        return OpenAICompatibleLLM(
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            model=settings.llm_model,
        )
    log.warning(
        "LLM_PROVIDER=%s is not available locally; agent runs will fail", settings.llm_provider
    )
    return None


class LocalRuntime:
    def __init__(
        self,
        state: StateDir,
        *,
        vars: Mapping[str, str] | None = None,
        clock: Clock | None = None,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
    ) -> None:
        self.state = state
        # Memory tokens are signed with the folder's dev key unless the caller names keys.
        # So is personal data, with the folder's generated dev key-encryption key.
        dev_keys = {
            "MEMORY_TOKEN_KEYS": dev_token_keys(state),
            "MEMORY_PII_KEKS": dev_pii_keks(state),
        }
        self.settings = Settings.from_vars({**LOCAL_VARS, **dev_keys, **(vars or {})})
        self.clock: Clock = clock or SystemClock()
        self.background = LocalBackgroundTasks()
        self.kv = SqliteKV(state.kv, clock=self.clock)
        # One SQLite file per shard's D1 database and Vectorize index; the primary's are
        # `db` and `vectors` (the control plane and the tenants placed there).
        self.shards = tuple(
            Shard(
                name,
                SqliteD1(state.d1_of(name)),
                LocalVectorIndex(
                    state.vectors_of(name),
                    dimensions=self.settings.embedding_dimensions,
                    metadata_indexes=VECTOR_METADATA_INDEXES,
                ),
            )
            for name, _, _ in self.settings.shards
        )
        self.db: SqliteD1 = cast(SqliteD1, self.shards[0].db)
        self.vectors: LocalVectorIndex = cast(LocalVectorIndex, self.shards[0].vectors)
        self.cold = LocalObjectStore(state.cold, clock=self.clock)
        # The change feed's queue and its consumers, as wrangler.toml declares them.
        self.queues = LocalQueues(state.queues, self.clock)
        self.queue_consumers = consumer_settings(
            tomllib.loads((PROJECT_ROOT / "wrangler.toml").read_text("utf-8"))
        )
        self.cipher = CryptographyCipher()
        self.signatures = CryptographySignatures()
        self._embedder = embedder
        self.llm: LLM | None = llm if llm is not None else build_local_llm(self.settings)
        self._do_registry = DurableObjectStorageRegistry(state.durable_objects)
        self.alarm_passes = 0
        self.http_transport = DevAccessTransport(state.access)
        self.agents = LocalDurableObjectNamespace(
            self._do_registry, self._agent_core, AlarmTable(state.alarms)
        )
        # Like wrangler.toml's EMBED_RATE_LIMITER (the numbers come from the settings).
        self.embed_rate_limiter = FixedWindowRateLimiter(
            limit=self.settings.embed_rate_limit,
            period_seconds=self.settings.embed_rate_period,
            clock=self.clock,
        )
        # Like wrangler.toml's OAUTH_RATE_LIMITER: 10 registrations a minute per address.
        self.oauth_rate_limiter = FixedWindowRateLimiter(
            limit=OAUTH_REGISTRATIONS_PER_MINUTE, period_seconds=60, clock=self.clock
        )

    @classmethod
    def open(cls, root: Path | str, **kwargs: Any) -> LocalRuntime:
        return cls(StateDir.create(root), **kwargs)

    async def migrate(self) -> list[str]:
        """Apply pending D1 migrations in order to every shard's database, like
        `wrangler d1 migrations apply` once per database; the primary's are returned."""
        applied: list[str] = []
        for shard in self.shards:
            done = await apply_migrations(self.shard_db(shard.name), MIGRATIONS_DIR)
            for name in done:
                log.info("applied migration %s to shard %s", name, shard.name)
            applied = applied or done
        return applied

    def shard_db(self, name: str) -> SqliteD1:
        """Shard `name`'s database (tests read a tenant's rows where the directory put them)."""
        return cast(SqliteD1, self._shard(name).db)

    def shard_vectors(self, name: str) -> LocalVectorIndex:
        return cast(LocalVectorIndex, self._shard(name).vectors)

    def _shard(self, name: str) -> Shard:
        return {shard.name: shard for shard in self.shards}[name]  # KeyError: no such shard

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from local_runtime.embedder import LocalMiniLMEmbedder

            self._embedder = LocalMiniLMEmbedder()
        return self._embedder

    def bindings(self) -> Bindings:
        """The bindings one request sees (the same stores for every request)."""
        return Bindings(
            settings=self.settings,
            clock=self.clock,
            background=self.background,
            kv=self.kv,
            db=self.db,
            vectors=self.vectors,
            # Un-narrowed, the primary shard is `db` and `vectors` (which a test may have
            # wrapped): `directory.all_shards` reads them from there.
            shards=self.shards,
            embedder=self.embedder,
            llm=self.llm,
            agents=self.agents,
            cold=self.cold,
            feed=self.queues.producer(FEED_QUEUE),
            http_transport=self.http_transport,
            resolve_host=resolve_host,
            embed_rate_limiter=self.embed_rate_limiter,
            oauth_rate_limiter=self.oauth_rate_limiter,
            cipher=self.cipher,
            signatures=self.signatures,
            purge_residue=self.purge_residue,
        )

    async def purge_residue(self, subject: str | None = None) -> None:
        """After an erase: delete the queued messages naming `subject` (Cloudflare's queue
        cannot delete one; its consumer drops them), then checkpoint and truncate every local
        SQLite file's WAL, so the pages an erase overwrote (secure_delete) leave no older copy
        in a -wal file."""
        if subject:
            self.queues.forget(subject)
        for shard in self.shards:
            self.shard_db(shard.name).checkpoint()
            self.shard_vectors(shard.name).checkpoint()
        self.kv.checkpoint()
        self.queues.checkpoint()
        self._do_registry.checkpoint()

    def durable_object_storage(self, name: str) -> LocalDurableObjectStorage:
        """The storage of the Durable Object named `name` (for tests and the CLI)."""
        return self._do_registry.storage(name)

    def evict_durable_objects(self) -> None:
        """Evict every Durable Object: instances are dropped and their SQLite files closed
        (which checkpoints and removes each write-ahead log); the next call reopens them."""
        self.agents.evict_all()
        self._do_registry.close()

    async def fire_due_alarms(self) -> list[str]:
        """Run every Durable Object alarm due now (by this runtime's clock)."""
        return await self.agents.run_due_alarms(self.clock.now())

    async def deliver_queues(self, max_batches: int = 1000) -> int:
        """Hand each consumed queue's due messages to the Worker's consumer until none is due
        (by this runtime's clock; at most `max_batches` batches); how many were handed."""
        from worker.portability_routes import consume

        handed = 0
        for name, settings in self.queue_consumers.items():
            for _ in range(max_batches):
                count = await self.queues.deliver(
                    name, settings, lambda queue, batch: consume(queue, batch, self.bindings())
                )
                handed += count
                if not count:
                    break
        return handed

    async def run_alarms(self) -> None:
        """Fire alarms and deliver queued messages as they fall due, until cancelled (the dev
        server's loop): a pass at once, then every second; `alarm_passes` counts passes."""
        while True:
            try:
                await self.fire_due_alarms()
                await self.deliver_queues()
            except Exception:  # one bad pass must not end the loop
                log.exception("alarm loop pass failed")
            self.alarm_passes += 1
            await asyncio.sleep(1)

    def _agent_core(self, storage: DurableObjectStorage, alarms: AlarmStorage) -> AgentRuntimeCore:
        return AgentRuntimeCore(storage, self.bindings(), alarms=alarms)

    async def close(self) -> None:
        await self.background.drain()
        self.agents.alarms.close()
        self.queues.close()
        self.evict_durable_objects()  # closes the object files: their WALs are checkpointed
        await self.http_transport.close()
