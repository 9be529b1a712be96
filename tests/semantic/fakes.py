"""Test doubles for semantic memory: spies and failure injection around real adapters."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bindings.ports.d1 import D1Database, D1Error, D1Result
from bindings.ports.embedder import EmbeddingConfig, EmbeddingOverloadedError
from bindings.ports.errors import BindingUnavailableError
from bindings.ports.vectorize import (
    MetadataFilter,
    ReturnMetadata,
    VectorIndex,
    VectorQueryResult,
    VectorRecord,
)
from tests.fakes.embedder import HashingEmbedder


class SpyVectors:
    """A real vector index that records queries and can be told to fail writes/deletes."""

    def __init__(self, inner: VectorIndex) -> None:
        self.inner = inner
        self.queries: list[dict[str, Any]] = []
        self.fail_upserts = False
        self.fail_deletes = False

    async def upsert(self, vectors: Sequence[VectorRecord]) -> None:
        if self.fail_upserts:
            raise BindingUnavailableError("injected: Vectorize is unavailable")
        await self.inner.upsert(vectors)

    async def query(
        self,
        vector: Sequence[float],
        *,
        top_k: int = 5,
        namespace: str | None = None,
        filter: MetadataFilter | None = None,
        return_metadata: ReturnMetadata = "none",
    ) -> VectorQueryResult:
        self.queries.append({"top_k": top_k, "namespace": namespace, "filter": filter})
        return await self.inner.query(
            vector,
            top_k=top_k,
            namespace=namespace,
            filter=filter,
            return_metadata=return_metadata,
        )

    async def get_by_ids(self, ids: Sequence[str]) -> list[VectorRecord]:
        return await self.inner.get_by_ids(ids)

    async def delete_by_ids(self, ids: Sequence[str]) -> None:
        if self.fail_deletes:
            raise BindingUnavailableError("injected: Vectorize is unavailable")
        await self.inner.delete_by_ids(ids)


class _Statement:
    def __init__(self, db: SpyD1, sql: str, inner: Any) -> None:
        self.db, self.sql, self.inner = db, sql, inner

    def bind(self, *params: Any) -> _Statement:
        self.db.bound.append((self.sql, params))
        return _Statement(self.db, self.sql, self.inner.bind(*params))

    def _check(self) -> None:
        if self.db.fail_pattern is not None and re.search(self.db.fail_pattern, self.sql):
            raise D1Error(f"D1_ERROR: injected failure for {self.sql[:40]!r}")

    async def all(self) -> D1Result:
        self._check()
        result: D1Result = await self.inner.all()
        return result

    async def run(self) -> D1Result:
        self._check()
        result: D1Result = await self.inner.run()
        return result

    async def first(self) -> Any:
        self._check()
        return await self.inner.first()

    async def first_value(self, column: str) -> Any:
        self._check()
        return await self.inner.first_value(column)


class SpyD1:
    """A real D1 that records every statement's SQL and can fail statements by regex."""

    def __init__(self, inner: D1Database) -> None:
        self.inner = inner
        self.sql: list[str] = []
        self.bound: list[tuple[str, tuple[Any, ...]]] = []
        self.fail_pattern: str | None = None

    def prepare(self, sql: str) -> _Statement:
        self.sql.append(sql)
        return _Statement(self, sql, self.inner.prepare(sql))

    async def batch(self, statements: Sequence[Any]) -> list[D1Result]:
        for statement in statements:
            statement._check()
        return await self.inner.batch([s.inner for s in statements])


class OtherModelEmbedder(HashingEmbedder):
    """Same vectors as HashingEmbedder, but another embedding config (another model)."""

    @property
    def config(self) -> EmbeddingConfig:
        return EmbeddingConfig(provider="test", model="other-model", dimensions=384)


class FailingEmbedder(HashingEmbedder):
    """An embedder whose provider is overloaded."""

    async def embed(self, texts: Sequence[str]) -> Any:
        raise EmbeddingOverloadedError("injected: 503 from the embedding provider")
