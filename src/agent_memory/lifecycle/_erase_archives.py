"""Subject erase in the cold tier (`ArchiveEraser`): every archive object of the tenant is
read; one holding traces is rewritten without them, under the key of its new first row
(so no key names an erased row), or deleted when nothing is left, and the archive ledger
(`lifecycle_archives`) follows.

Write order, so that a failure never loses the trace of an unfinished rewrite: the new
object, then the ledger, then the old object is deleted. A re-run rewrites what is left.

Private to `agent_memory.lifecycle`.
"""

from __future__ import annotations

from typing import Any

from agent_memory.lifecycle._erase_rules import EraseReport, SubjectMatcher
from agent_memory.lifecycle.cold import (
    ArchiveKind,
    archive_key,
    decode_archive,
    encode_lines,
    parse_archive_key,
    tenant_prefixes,
)
from agent_memory.statements import chunks
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.object_store import ObjectStore


class ArchiveEraser:
    """Removes a subject's traces from one tenant's cold-tier archives."""

    def __init__(self, tenant_id: str, *, db: D1Database, cold: ObjectStore, clock: Clock) -> None:
        self.tenant_id = tenant_id
        self._db = db
        self._cold = cold
        self._clock = clock

    async def erase(self, matcher: SubjectMatcher, report: EraseReport) -> None:
        """Rewrite or delete every archive holding traces; each one's counts go into
        `report` as soon as it is done."""
        keys: list[str] = []
        for prefix in tenant_prefixes(self.tenant_id):
            cursor: str | None = None
            while True:
                page = await self._cold.list(prefix=prefix, cursor=cursor)
                keys += [o.key for o in page.objects]
                if not page.truncated or not page.cursor:
                    break
                cursor = page.cursor
        now_ms = int(self._clock.now() * 1000)
        for key in keys:
            parsed = parse_archive_key(key)
            if parsed is None:
                continue
            _, kind, _ = parsed
            body = await self._cold.get(key)
            if body is None:
                continue
            rows = decode_archive(body.data)
            kept: list[dict[str, Any]] = []
            scrubbed = 0
            erased_ids: list[str] = []
            for row in rows:
                if matcher.archived(kind, row):
                    if kind == "episodes":
                        erased_ids.append(str(row.get("episode_id")))
                    continue
                clean = matcher.archived_scrub(kind, row)
                scrubbed += clean is not None
                kept.append(clean if clean is not None else row)
            removed = len(rows) - len(kept)
            if removed == 0 and scrubbed == 0:
                continue
            report.archived_rows[kind] += removed
            # The cold item index (`cold_items`, agent_memory.tiered.cold) follows the
            # archive: erased episodes leave it before their object is rewritten.
            await self._unindex(erased_ids)
            if not kept:
                await self._cold.delete(key)
                await (
                    self._db.prepare(
                        "DELETE FROM lifecycle_archives WHERE tenant_id = ? AND archive_key = ?"
                    )
                    .bind(self.tenant_id, key)
                    .run()
                )
                report.archives_deleted += 1
                continue
            await self._rewrite(key, kind, kept, body.custom_metadata, now_ms)
            report.archives_rewritten += 1

    async def _unindex(self, episode_ids: list[str]) -> None:
        for chunk in chunks(episode_ids):  # D1: at most 100 bound parameters
            marks = ", ".join("?" * len(chunk))
            await (
                self._db.prepare(
                    "DELETE FROM cold_items WHERE tenant_id = ? AND kind = 'episode' "
                    f"AND entity_id IN ({marks})"
                )
                .bind(self.tenant_id, *chunk)
                .run()
            )

    async def _rewrite(
        self,
        key: str,
        kind: ArchiveKind,
        kept: list[dict[str, Any]],
        metadata: dict[str, str],
        now_ms: int,
    ) -> None:
        """Write the archive without the erased rows, under the key of its (new) first row."""
        time_column = "started_at" if kind == "runs" else "created_at"
        id_column = {"episodes": "episode_id", "runs": "run_id", "events": "event_id"}[kind]
        first, last = kept[0], kept[-1]
        new_key = archive_key(self.tenant_id, kind, int(first[time_column]), str(first[id_column]))
        data = encode_lines(kept)
        first_key = f"{first[time_column]}/{first[id_column]}"
        last_key = f"{last[time_column]}/{last[id_column]}"
        meta = {
            **metadata,
            "rows": str(len(kept)),
            "first": first_key,
            "last": last_key,
            "rewritten_ms": str(now_ms),
        }
        # New object first, then the ledger, then the old object: a failure in between
        # leaves the old object, which a re-run rewrites again.
        await self._cold.put(new_key, data, custom_metadata=meta)
        await (
            self._db.prepare(
                "UPDATE lifecycle_archives SET archive_key = ?, rows = ?, matched = ?, "
                "first_key = ?, last_key = ?, bytes = ?, rewritten_at = ? "
                "WHERE tenant_id = ? AND archive_key = ?"
            )
            .bind(
                new_key,
                len(kept),
                len(kept),
                first_key,
                last_key,
                len(data),
                now_ms,
                self.tenant_id,
                key,
            )
            .run()
        )
        if new_key != key:
            await (
                self._db.prepare(
                    "UPDATE cold_items SET archive_key = ? WHERE tenant_id = ? AND archive_key = ?"
                )
                .bind(new_key, self.tenant_id, key)
                .run()
            )
            await self._cold.delete(key)
