"""`Bindings`: every port a request may use, built once per request; a binding the deployment
lacks is None. `db` and `vectors` are the primary shard's until `directory.on_shard` narrows a
copy to one tenant's shard (`shard` set); the primary database stays `shards[0]` in every copy.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx

from bindings.ports.background import BackgroundTasks
from bindings.ports.clock import Clock
from bindings.ports.crypto import Cipher, Signatures
from bindings.ports.d1 import D1Database
from bindings.ports.durable_objects import DurableObjectNamespace
from bindings.ports.embedder import Embedder
from bindings.ports.kv import KVNamespace
from bindings.ports.llm import LLM
from bindings.ports.object_store import ObjectStore
from bindings.ports.queue import Queue
from bindings.ports.rate_limit import RateLimiter
from bindings.ports.reranker import Reranker
from bindings.ports.vectorize import VectorIndex
from bindings.settings import Settings

# The control plane: tables that live in the primary database (`control_db`) only and never
# move with a tenant (authorization's grants and OAuth rows; export and import jobs, the change
# feed's endpoints, deliveries and erasures: docs/portability.md).
CONTROL_PLANE_TABLES = frozenset(
    {
        "operator_grants",
        "portability_jobs",
        "feed_endpoints",
        "feed_deliveries",
        "feed_erasures",
        "oauth_clients",
        "oauth_codes",
        "oauth_consents",
        "oauth_grants",
        "oauth_access_tokens",
        "oauth_refresh_tokens",
    }
)


@dataclass(frozen=True, slots=True)
class Shard:
    """One D1 database and its Vectorize index, holding the tenants placed on it."""

    name: str
    db: D1Database | None
    vectors: VectorIndex | None


@dataclass(frozen=True)
class Bindings:
    settings: Settings
    clock: Clock
    background: BackgroundTasks
    kv: KVNamespace | None = None
    db: D1Database | None = None
    vectors: VectorIndex | None = None
    embedder: Embedder | None = None
    llm: LLM | None = None
    agents: DurableObjectNamespace | None = None
    cold: ObjectStore | None = None  # R2 `COLD`: archives written by the weekly prune
    feed: Queue | None = None  # Queue `FEED`: the change feed (docs/portability.md)
    http_transport: httpx.AsyncBaseTransport | None = None  # tests and local runtime swap it
    # Resolves a host for the gateway's outbound guard (gateway.outbound); None on Cloudflare,
    # where fetch resolves at the edge.
    resolve_host: Callable[[str], Awaitable[Sequence[str]]] | None = None
    # Memory and Access tokens (worker.identity); None: every token gate fails closed.
    signatures: Signatures | None = None
    # Personal data at rest (docs/personal-data.md); None: marked personal data is refused.
    cipher: Cipher | None = None
    # Local only: after an erase of the subject given, delete the queued messages naming it
    # and overwrite what the erase deleted in the SQLite files (checkpoint the WAL).
    purge_residue: Callable[[str], Awaitable[None]] | None = None
    embed_rate_limiter: RateLimiter | None = None  # EMBED_RATE_LIMITER, ADR-29
    oauth_rate_limiter: RateLimiter | None = None  # OAUTH_RATE_LIMITER: POST /register
    # Recall's optional reranking stage (`rerank` in MEMORY_RETRIEVAL_CONFIG): Workers AI's
    # bge-reranker-base on Cloudflare; locally the embedder's rescoring stands in.
    reranker: Reranker | None = None
    # Every shard, the primary first (MEMORY_SHARDS); empty: the primary alone (db, vectors).
    shards: tuple[Shard, ...] = ()
    # The shard `db` and `vectors` belong to once narrowed by `on_shard`; None: not narrowed.
    shard: str | None = None

    def present(self) -> dict[str, bool]:
        """Which bindings this deployment has (reported by /healthz)."""
        return {
            "kv": self.kv is not None,
            "d1": self.db is not None,
            "vectorize": self.vectors is not None,
            "ai_embedder": self.embedder is not None,
            "llm": self.llm is not None,
            "agent_runtime": self.agents is not None,
            "cold": self.cold is not None,
            "feed": self.feed is not None,
        }

    def http_client(self, timeout: float = 10.0) -> httpx.AsyncClient:
        """A fresh client per use: clients must be created inside handlers on Workers."""
        return httpx.AsyncClient(transport=self.http_transport, timeout=timeout)
