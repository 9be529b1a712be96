"""The cold tier over R2 (`ColdMemory`): episodes the prune archived, each readable by its
item key, plus a subject's (or a session's) archived history.

Storage stays the prune's weekly archives (`agent_memory.lifecycle.cold`: gzip NDJSON per
tenant, kind and ISO week, one R2 PUT per batch of up to 500 rows); D1 `cold_items`
(migration 0010) indexes every archived episode by its item key — written by the prune in
the transaction that deletes the row from `memory_episodes` — so one item read is one
indexed D1 lookup plus one R2 GET of its archive object (objects already fetched are kept
for the instance's lifetime: a listing reads each object once). Per-item objects would cost
an R2 PUT per episode (a 1M-episode backlog is 1M class-A operations and ~1100 prune
invocations instead of ~12), so the archive object stays the unit of storage and the index
makes its rows addressable.

* `download_text(key)`: the archived row as item text, or None (not archived, or erased).
* `upload_text(key, text)`: archives one episode as its own one-row archive object (the same
  format and layout, so the erase, the listing and the ledger treat it like any archive).
* `delete(key)`: rewrites the episode's archive object without it (deleted when empty),
  then drops its index row; the ledger follows.
Only the `episode` kind is held here; other kinds read as a miss and are refused for writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_memory.cursors import InvalidCursorError, decode_cursor_value, encode_cursor_value
from agent_memory.lifecycle.prune import (
    archive_key,
    decode_archive,
    encode_archive,
    encode_lines,
    iso_week,
)
from agent_memory.namespace import InvalidNamespaceKey, ItemKey, NamespaceForbidden, NamespaceKey
from agent_memory.tiered.episodes import EPISODE_KIND, item_row, item_text
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.object_store import ObjectStore
from bindings.ports.sql import SqlValue

CLIENT_PRUNE_ID = "memory-client"
MAX_HISTORY_PAGE = 100


@dataclass(frozen=True, slots=True)
class ArchivedItem:
    """One entry of the cold index."""

    item_key: str
    namespace_key: str
    entity_id: str
    created_at: int
    archived_at: int


@dataclass(frozen=True, slots=True)
class ArchivedPage:
    items: list[ArchivedItem]
    next_cursor: str | None = None


class ArchiveColdMemory:
    """`ColdMemory` over the cold bucket and its D1 index."""

    def __init__(self, db: D1Database, store: ObjectStore, clock: Clock) -> None:
        self._db = db
        self._store = store
        self._clock = clock
        self._objects: dict[str, list[dict[str, Any]]] = {}

    async def _index(self, item: ItemKey) -> str | None:
        value = await (
            self._db.prepare(
                "SELECT archive_key FROM cold_items WHERE tenant_id = ? AND namespace_key = ? "
                "AND kind = ? AND entity_id = ?"
            )
            .bind(item.tenant, item.namespace_key, item.kind, item.entity)
            .first_value("archive_key")
        )
        return None if value is None else str(value)

    async def _rows(self, object_key: str) -> list[dict[str, Any]] | None:
        if object_key not in self._objects:
            body = await self._store.get(object_key)
            if body is None:
                return None
            self._objects[object_key] = decode_archive(body.data)
        return self._objects[object_key]

    async def download_text(self, key: str) -> str | None:
        item = ItemKey.parse(key)
        if item.kind != EPISODE_KIND:
            return None
        object_key = await self._index(item)
        if object_key is None:
            return None
        for row in await self._rows(object_key) or []:
            if row.get("episode_id") == item.entity and row.get("tenant_id") == item.tenant:
                return item_text(row)
        return None

    async def upload_text(self, key: str, value: str) -> None:
        item = ItemKey.parse(key)
        if item.kind != EPISODE_KIND:
            raise InvalidNamespaceKey(f"the cold tier holds episodes, not {item.kind!r} items")
        row = item_row(value)
        if (row.get("tenant_id"), row.get("instance_id"), row.get("episode_id")) != (
            item.tenant,
            item.session,
            item.entity,
        ):
            raise InvalidNamespaceKey("the episode does not belong to this item key")
        created = int(row["created_at"])
        object_key = archive_key(item.tenant, "episodes", created, item.entity)
        data = encode_archive([row], "episodes")
        now_ms = int(self._clock.now() * 1000)
        first = f"{created}/{item.entity}"
        await self._store.put(
            object_key,
            data,
            custom_metadata={
                "tenant": item.tenant,
                "kind": "episodes",
                "rows": "1",
                "first": first,
                "last": first,
                "prune_id": CLIENT_PRUNE_ID,
            },
        )
        self._objects.pop(object_key, None)
        await self._db.batch(
            [
                self._db.prepare(
                    "INSERT INTO lifecycle_archives (tenant_id, archive_key, kind, iso_week, "
                    "rows, matched, first_key, last_key, bytes, prune_id, created_at) "
                    "VALUES (?, ?, 'episodes', ?, 1, 1, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (tenant_id, archive_key) DO UPDATE SET bytes = excluded.bytes"
                ).bind(
                    item.tenant,
                    object_key,
                    iso_week(created),
                    first,
                    first,
                    len(data),
                    CLIENT_PRUNE_ID,
                    now_ms,
                ),
                self._index_statement(item, object_key, row, now_ms),
            ]
        )

    def _index_statement(
        self, item: ItemKey, object_key: str, row: dict[str, Any], now_ms: int
    ) -> Any:
        return self._db.prepare(
            "INSERT INTO cold_items (tenant_id, namespace_key, kind, entity_id, archive_key, "
            "subject, created_at, archived_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, namespace_key, kind, entity_id) DO UPDATE SET "
            "archive_key = excluded.archive_key, archived_at = excluded.archived_at"
        ).bind(
            item.tenant,
            item.namespace_key,
            item.kind,
            item.entity,
            object_key,
            row.get("subject"),
            int(row["created_at"]),
            now_ms,
        )

    async def delete(self, key: str) -> None:
        item = ItemKey.parse(key)
        if item.kind != EPISODE_KIND:
            return
        object_key = await self._index(item)
        if object_key is None:
            return
        rows = await self._rows(object_key)
        if rows is not None:
            kept = [r for r in rows if r.get("episode_id") != item.entity]
            await self._rewrite(item.tenant, object_key, kept, len(rows) - len(kept))
        await (
            self._db.prepare(
                "DELETE FROM cold_items WHERE tenant_id = ? AND namespace_key = ? AND kind = ? "
                "AND entity_id = ?"
            )
            .bind(item.tenant, item.namespace_key, item.kind, item.entity)
            .run()
        )

    async def _rewrite(
        self, tenant: str, object_key: str, kept: list[dict[str, Any]], removed: int
    ) -> None:
        self._objects.pop(object_key, None)
        if removed == 0:
            return
        if not kept:
            await self._store.delete(object_key)
            await (
                self._db.prepare(
                    "DELETE FROM lifecycle_archives WHERE tenant_id = ? AND archive_key = ?"
                )
                .bind(tenant, object_key)
                .run()
            )
            return
        body = await self._store.get(object_key)
        metadata = dict(body.custom_metadata) if body is not None else {}
        data = encode_lines(kept)
        await self._store.put(
            object_key, data, custom_metadata={**metadata, "rows": str(len(kept))}
        )
        await (
            self._db.prepare(
                "UPDATE lifecycle_archives SET rows = ?, matched = ?, bytes = ?, rewritten_at = ? "
                "WHERE tenant_id = ? AND archive_key = ?"
            )
            .bind(
                len(kept),
                len(kept),
                len(data),
                int(self._clock.now() * 1000),
                tenant,
                object_key,
            )
            .run()
        )

    async def history(
        self,
        tenant: str,
        *,
        namespace: NamespaceKey | None = None,
        subject: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
    ) -> ArchivedPage:
        """The tenant's archived episodes — of one namespace (session) and/or one subject
        when given — newest first, `limit` per page; `next_cursor` continues. Raises
        `InvalidCursorError` for a cursor this method did not return."""
        limit = max(1, min(limit, MAX_HISTORY_PAGE))
        clauses = ["tenant_id = ?", "kind = ?"]
        params: list[SqlValue] = [tenant, EPISODE_KIND]
        if namespace is not None:
            if namespace.tenant != tenant:
                raise NamespaceForbidden("this namespace is another tenant's")
            clauses.append("namespace_key = ?")
            params.append(namespace.key)
        if subject is not None:
            clauses.append("subject = ?")
            params.append(subject)
        if cursor is not None:
            created, entity = _decode(cursor)
            clauses.append("(created_at < ? OR (created_at = ? AND entity_id < ?))")
            params += [created, created, entity]
        result = await (
            self._db.prepare(
                "SELECT namespace_key, entity_id, created_at, archived_at FROM cold_items "
                f"WHERE {' AND '.join(clauses)} ORDER BY created_at DESC, entity_id DESC LIMIT ?"
            )
            .bind(*params, limit + 1)
            .all()
        )
        items = [
            ArchivedItem(
                item_key=f"{r['namespace_key']}:{EPISODE_KIND}:{r['entity_id']}",
                namespace_key=str(r["namespace_key"]),
                entity_id=str(r["entity_id"]),
                created_at=int(r["created_at"]),
                archived_at=int(r["archived_at"]),
            )
            for r in result.results
        ]
        more = len(items) > limit
        items = items[:limit]
        next_cursor = None
        if more:
            last = items[-1]
            next_cursor = encode_cursor_value({"c": last.created_at, "e": last.entity_id})
        return ArchivedPage(items=items, next_cursor=next_cursor)


def _decode(cursor: str) -> tuple[int, str]:
    value = decode_cursor_value(cursor)
    created, entity = (value.get("c"), value.get("e")) if isinstance(value, dict) else (0, 0)
    if isinstance(created, bool):
        created = None
    if not isinstance(created, int) or not isinstance(entity, str):
        raise InvalidCursorError("cursor is not one this API returned")
    return created, entity


__all__ = ["ArchiveColdMemory", "ArchivedItem", "ArchivedPage"]
