"""Subject erase (`DELETE /admin/tenants/{tenant}/subjects/{subject}`): remove every trace of
a subject from one tenant's memory, in every tier, and say what was removed where.

What is a trace (docs/lifecycle.md, "Erase semantics") — `subject` is an identifier such
as `contact:hubspot_id:123`, matched exactly as a field and as a substring of text:

* episodes whose `subject` is it, or whose content or data contain it; the runs of those
  episodes, and runs whose input, output or error contain it;
* semantic facts (any status) whose subject or object is it, or whose content or metadata
  contain it, and the facts they superseded (merged duplicates, replaced values: their
  history); their vectors; links from or to them; provenance of or to erased rows;
* memory events that name it (payload text), that describe an erased row (the event id
  is the row id for `memory_written`), that belong to an erased run, or that carry an
  erased content hash; a `memory_retrieved` event that merely listed an erased fact among
  its results is kept with that entry removed (it describes the other facts too);
* working memory (KV) keys of the tenant whose instance or key segment is it, or whose
  value contains it;
* cold-tier archive rows matching the rules above: each archive object is rewritten
  without them (renamed after its new first row, so its key names no erased row) or
  deleted when nothing is left, and the archive ledger is updated.

Order, so that a failure never leaves a trace a re-run cannot find: vectors go first (a
vector is only found through its fact row), then D1 rows in batches, then KV, then the
archives. Every step is idempotent: running the erase again finishes an interrupted one
and reports zeros once nothing is left. Statements are `tenant_id = ?` first, ≤ 100
bound parameters.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from agent_memory.lifecycle.cold import (
    ArchiveKind,
    archive_key,
    decode_archive,
    encode_lines,
    parse_archive_key,
    tenant_prefix,
)
from agent_memory.tiers.semantic import namespace_for_tenant
from agent_memory.tiers.working import WORKING_MEMORY_PREFIX
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.kv import KVNamespace
from bindings.ports.object_store import ObjectStore
from bindings.ports.sql import SqlValue
from bindings.ports.vectorize import VectorIndex

log = logging.getLogger(__name__)

IDS_PER_STATEMENT = 90
EVENTS_PAGE = 500
MIN_SUBJECT_CHARS = 3
MAX_SUBJECT_CHARS = 256

Progress = Callable[[str, int], None]


class EraseReport(BaseModel):
    """What the erase removed, per tier."""

    tenant_id: str
    subject: str
    working_keys: int = 0
    episodes: int = 0
    runs: int = 0
    facts: int = 0
    vectors: int = 0
    links: int = 0
    provenance: int = 0
    events: int = 0
    events_scrubbed: int = 0
    archives_rewritten: int = 0
    archives_deleted: int = 0
    archived_rows: dict[str, int] = Field(
        default_factory=lambda: {"episodes": 0, "runs": 0, "events": 0}
    )
    complete: bool = True
    errors: list[str] = Field(default_factory=list)

    def removed(self) -> int:
        return (
            self.working_keys
            + self.episodes
            + self.runs
            + self.facts
            + self.vectors
            + self.links
            + self.provenance
            + self.events
            + sum(self.archived_rows.values())
        )


class _Found(BaseModel):
    """The D1 rows that are traces, and what identifies them elsewhere."""

    episodes: set[str] = Field(default_factory=set)
    runs: set[str] = Field(default_factory=set)
    facts: set[str] = Field(default_factory=set)
    hashes: set[str] = Field(default_factory=set)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


class SubjectMatcher:
    """The pure rules: is this row (as stored, or as archived) a trace of the subject?"""

    def __init__(self, subject: str, found: _Found | None = None) -> None:
        self.subject = subject
        self.found = found or _Found()

    def mentions(self, *values: Any) -> bool:
        return any(self.subject in _text(v) for v in values)

    def episode(self, row: dict[str, Any]) -> bool:
        return (
            row.get("subject") == self.subject
            or str(row.get("episode_id")) in self.found.episodes
            or self.mentions(row.get("content"), row.get("data"))
        )

    def run(self, row: dict[str, Any]) -> bool:
        return str(row.get("run_id")) in self.found.runs or self.mentions(
            row.get("input"), row.get("output"), row.get("error")
        )

    @staticmethod
    def _payload(row: dict[str, Any]) -> Any:
        payload = row.get("payload")
        if isinstance(payload, str):
            try:
                return json.loads(payload)
            except ValueError:
                return {}
        return payload

    def _erased_ids(self) -> set[str]:
        return self.found.episodes | self.found.facts

    def event(self, row: dict[str, Any]) -> bool:
        """An event to delete: it is about an erased row, run or content, or names the
        subject. (One that only lists an erased fact among its results is scrubbed.)"""
        payload = self._payload(row)
        named: set[str] = set()
        if isinstance(payload, dict):
            for key in ("key", "supersedes"):
                value = payload.get(key)
                if isinstance(value, str):
                    named.add(value)
        run_id = row.get("run_id")
        digest = row.get("content_hash")
        return (
            str(row.get("event_id")) in self._erased_ids()
            or (run_id is not None and str(run_id) in self.found.runs)
            or (digest is not None and digest in self.found.hashes)
            or bool(named & self._erased_ids())
            or self.mentions(payload)
        )

    def scrubbed(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The payload without references to erased facts (a recall that returned one
        among others), or None when the event lists none."""
        payload = self._payload(row)
        if not isinstance(payload, dict):
            return None
        erased = self._erased_ids()
        results = payload.get("results")
        dropped = payload.get("dropped")
        hit = False
        out = dict(payload)
        if isinstance(results, list):
            kept = [r for r in results if not (isinstance(r, dict) and r.get("id") in erased)]
            hit = hit or len(kept) != len(results)
            out["results"] = kept
        if isinstance(dropped, list):
            kept_ids = [d for d in dropped if d not in erased]
            hit = hit or len(kept_ids) != len(dropped)
            out["dropped"] = kept_ids
        return out if hit else None

    def archived(self, kind: ArchiveKind, row: dict[str, Any]) -> bool:
        if kind == "episodes":
            return self.episode(row)
        if kind == "runs":
            return self.run(row)
        return self.event(row)

    def archived_scrub(self, kind: ArchiveKind, row: dict[str, Any]) -> dict[str, Any] | None:
        """An archived row with references to erased facts removed, or None."""
        if kind != "events":
            return None
        payload = self.scrubbed(row)
        return None if payload is None else {**row, "payload": payload}


def validate_subject(subject: str) -> str:
    """The subject, or ValueError: 3-256 characters, not blank (a very short string would
    match as a substring of almost everything)."""
    if not isinstance(subject, str) or subject.strip() != subject or not subject:
        raise ValueError("subject must be a non-empty string without surrounding spaces")
    if not MIN_SUBJECT_CHARS <= len(subject) <= MAX_SUBJECT_CHARS:
        raise ValueError(f"subject must be {MIN_SUBJECT_CHARS}-{MAX_SUBJECT_CHARS} characters long")
    return subject


def _chunks(items: Sequence[str], size: int = IDS_PER_STATEMENT) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SubjectEraser:
    """Erases one subject from one tenant's memory (see the module docstring)."""

    def __init__(
        self,
        tenant_id: str,
        *,
        db: D1Database,
        clock: Clock,
        kv: KVNamespace | None = None,
        vectors: VectorIndex | None = None,
        cold: ObjectStore | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self._db = db
        self._clock = clock
        self._kv = kv
        self._vectors = vectors
        self._cold = cold
        self._progress = progress or (lambda step, n: None)

    async def erase(self, subject: str) -> EraseReport:
        subject = validate_subject(subject)
        report = EraseReport(tenant_id=self.tenant_id, subject=subject)
        found = await self._find(subject)
        matcher = SubjectMatcher(subject, found)
        self._progress("found", len(found.episodes) + len(found.facts) + len(found.runs))
        # 1. Vectors first: they are only reachable through their fact rows.
        if found.facts and self._vectors is not None:
            try:
                report.vectors = await self._delete_vectors(sorted(found.facts))
            except Exception as exc:
                report.complete = False
                report.errors.append(f"vectors: {type(exc).__name__}: {exc}")
                log.error(
                    "erase %s/%s: vectors failed, rows kept: %s", self.tenant_id, subject, exc
                )
                return report
        self._progress("vectors", report.vectors)
        # 2. D1 rows.
        await self._delete_rows(found, matcher, report)
        self._progress("d1", report.episodes + report.facts + report.runs + report.events)
        # 3. Working memory.
        if self._kv is not None:
            try:
                report.working_keys = await self._erase_working(matcher)
            except Exception as exc:
                report.complete = False
                report.errors.append(f"working memory: {type(exc).__name__}: {exc}")
        self._progress("working", report.working_keys)
        # 4. Cold archives.
        if self._cold is not None:
            try:
                await self._erase_archives(matcher, report)
            except Exception as exc:
                report.complete = False
                report.errors.append(f"archives: {type(exc).__name__}: {exc}")
        self._progress("archives", report.archives_rewritten + report.archives_deleted)
        log.info("erase %s/%s: %s", self.tenant_id, subject, report.model_dump())
        return report

    # ------------------------------------------------------------------ finding

    async def _find(self, subject: str) -> _Found:
        found = _Found()
        episodes = await (
            self._db.prepare(
                "SELECT episode_id, run_id, content_hash FROM memory_episodes WHERE tenant_id = ? "
                "AND (subject = ? OR instr(content, ?) > 0 OR instr(data, ?) > 0)"
            )
            .bind(self.tenant_id, subject, subject, subject)
            .all()
        )
        for row in episodes.results:
            found.episodes.add(str(row["episode_id"]))
            found.runs.add(str(row["run_id"]))
            found.hashes.add(str(row["content_hash"]))
        facts = await (
            self._db.prepare(
                "SELECT fact_id, content_hash FROM semantic_facts WHERE tenant_id = ? "
                "AND (subject = ? OR object = ? OR instr(content, ?) > 0 "
                "OR instr(metadata, ?) > 0)"
            )
            .bind(self.tenant_id, subject, subject, subject, subject)
            .all()
        )
        for row in facts.results:
            found.facts.add(str(row["fact_id"]))
            found.hashes.add(str(row["content_hash"]))
        # Facts superseded by an erased fact (duplicates merged into it, earlier values it
        # replaced) are its history: they go too, transitively.
        frontier = sorted(found.facts)
        while frontier:
            newer: list[str] = []
            for chunk in _chunks(frontier):
                marks = ", ".join("?" for _ in chunk)
                result = await (
                    self._db.prepare(
                        "SELECT fact_id, content_hash FROM semantic_facts WHERE tenant_id = ? "
                        f"AND superseded_by IN ({marks})"
                    )
                    .bind(self.tenant_id, *chunk)
                    .all()
                )
                for row in result.results:
                    fact_id = str(row["fact_id"])
                    if fact_id not in found.facts:
                        found.facts.add(fact_id)
                        found.hashes.add(str(row["content_hash"]))
                        newer.append(fact_id)
            frontier = newer
        runs = await (
            self._db.prepare(
                "SELECT run_id FROM agent_runs WHERE tenant_id = ? AND (instr(input, ?) > 0 "
                "OR instr(COALESCE(output, ''), ?) > 0 OR instr(COALESCE(error, ''), ?) > 0)"
            )
            .bind(self.tenant_id, subject, subject, subject)
            .all()
        )
        found.runs.update(str(row["run_id"]) for row in runs.results)
        return found

    # ------------------------------------------------------------------ deleting

    async def _delete_vectors(self, fact_ids: Sequence[str]) -> int:
        assert self._vectors is not None
        namespace = namespace_for_tenant(self.tenant_id)
        deleted = 0
        for chunk in _chunks(fact_ids, 100):
            records = await self._vectors.get_by_ids(list(chunk))
            mine = [
                r.id
                for r in records
                if r.namespace == namespace and r.metadata.get("tenant_id") == self.tenant_id
            ]
            if mine:
                await self._vectors.delete_by_ids(mine)
                deleted += len(mine)
        return deleted

    async def _run_deletes(
        self, sql: str, ids: Sequence[str], extra: Sequence[SqlValue] = ()
    ) -> int:
        """`sql` with `{marks}` for a chunk of ids; returns the rows it deleted."""
        total = 0
        statements: list[D1Statement] = []
        for chunk in _chunks(list(ids)):
            marks = ", ".join("?" for _ in chunk)
            statements.append(
                self._db.prepare(sql.format(marks=marks)).bind(self.tenant_id, *extra, *chunk)
            )
        for start in range(0, len(statements), 50):
            results = await self._db.batch(statements[start : start + 50])
            total += sum(r.meta.changes for r in results)
        return total

    async def _count_then_delete(self, table: str, column: str, ids: Sequence[str]) -> int:
        # `meta.changes` may include trigger writes (the episode counter): count first.
        total = 0
        for chunk in _chunks(list(ids)):
            marks = ", ".join("?" for _ in chunk)
            value = await (
                self._db.prepare(
                    f"SELECT COUNT(*) AS n FROM {table} "
                    f"WHERE tenant_id = ? AND {column} IN ({marks})"
                )
                .bind(self.tenant_id, *chunk)
                .first_value("n")
            )
            total += int(value or 0)
        await self._run_deletes(
            f"DELETE FROM {table} WHERE tenant_id = ? AND {column} IN ({{marks}})", ids
        )
        return total

    async def _delete_rows(
        self, found: _Found, matcher: SubjectMatcher, report: EraseReport
    ) -> None:
        facts = sorted(found.facts)
        episodes = sorted(found.episodes)
        runs = sorted(found.runs)
        sources = sorted(found.facts | found.episodes | found.runs)
        report.links = await self._run_deletes(
            "DELETE FROM memory_links WHERE tenant_id = ? AND from_fact_id IN ({marks})", facts
        ) + await self._run_deletes(
            "DELETE FROM memory_links WHERE tenant_id = ? AND to_fact_id IN ({marks})", facts
        )
        report.provenance = await self._run_deletes(
            "DELETE FROM fact_provenance WHERE tenant_id = ? AND fact_id IN ({marks})", facts
        ) + await self._run_deletes(
            "DELETE FROM fact_provenance WHERE tenant_id = ? AND source_id IN ({marks})", sources
        )
        report.events = await self._erase_events(matcher, report)
        report.facts = await self._count_then_delete("semantic_facts", "fact_id", facts)
        report.episodes = await self._count_then_delete("memory_episodes", "episode_id", episodes)
        report.runs = await self._count_then_delete("agent_runs", "run_id", runs)

    async def _erase_events(self, matcher: SubjectMatcher, report: EraseReport) -> int:
        """Page through the tenant's events (by id): delete the ones that are traces, scrub
        erased fact ids out of the others' results."""
        doomed: list[str] = []
        scrubs: list[D1Statement] = []
        after = ""
        while True:
            result = await (
                self._db.prepare(
                    "SELECT event_id, run_id, content_hash, payload FROM memory_events "
                    "WHERE tenant_id = ? AND event_id > ? ORDER BY event_id LIMIT ?"
                )
                .bind(self.tenant_id, after, EVENTS_PAGE)
                .all()
            )
            rows = result.results
            for row in rows:
                if matcher.event(row):
                    doomed.append(str(row["event_id"]))
                    continue
                payload = matcher.scrubbed(row)
                if payload is not None:
                    scrubs.append(
                        self._db.prepare(
                            "UPDATE memory_events SET payload = ? "
                            "WHERE tenant_id = ? AND event_id = ?"
                        ).bind(
                            json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
                            self.tenant_id,
                            str(row["event_id"]),
                        )
                    )
            if len(rows) < EVENTS_PAGE:
                break
            after = str(rows[-1]["event_id"])
        for start in range(0, len(scrubs), 50):
            await self._db.batch(scrubs[start : start + 50])
        report.events_scrubbed = len(scrubs)
        if not doomed:
            return 0
        return await self._run_deletes(
            "DELETE FROM memory_events WHERE tenant_id = ? AND event_id IN ({marks})", doomed
        )

    async def _erase_working(self, matcher: SubjectMatcher) -> int:
        assert self._kv is not None
        prefix = f"{WORKING_MEMORY_PREFIX}:{self.tenant_id}:"
        doomed: list[str] = []
        cursor: str | None = None
        while True:
            page = await self._kv.list(prefix=prefix, cursor=cursor)
            for item in page.keys:
                rest = item.name[len(prefix) :]
                if matcher.subject in rest.split(":") or matcher.subject in rest:
                    doomed.append(item.name)
                    continue
                value = await self._kv.get(item.name)
                if value is not None and matcher.subject in value:
                    doomed.append(item.name)
            if page.list_complete or not page.cursor:
                break
            cursor = page.cursor
        for name in doomed:
            await self._kv.delete(name)
        return len(doomed)

    async def _erase_archives(self, matcher: SubjectMatcher, report: EraseReport) -> None:
        assert self._cold is not None
        keys: list[str] = []
        cursor: str | None = None
        while True:
            page = await self._cold.list(prefix=tenant_prefix(self.tenant_id), cursor=cursor)
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
            for row in rows:
                if matcher.archived(kind, row):
                    continue
                clean = matcher.archived_scrub(kind, row)
                scrubbed += clean is not None
                kept.append(clean if clean is not None else row)
            removed = len(rows) - len(kept)
            if removed == 0 and scrubbed == 0:
                continue
            report.archived_rows[kind] += removed
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

    async def _rewrite(
        self,
        key: str,
        kind: ArchiveKind,
        kept: list[dict[str, Any]],
        metadata: dict[str, str],
        now_ms: int,
    ) -> None:
        """Write the archive without the erased rows, under the key of its (new) first row."""
        assert self._cold is not None
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
            await self._cold.delete(key)
