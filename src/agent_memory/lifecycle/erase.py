"""Subject erase (`DELETE /admin/tenants/{tenant}/subjects/{subject}`): remove every trace of
a subject from one tenant's memory, in every tier, and say what was removed where.

A trace names the subject exactly as a field or holds it as a substring of its text; what that
means per tier, and the order of the steps, is docs/lifecycle.md, "Erase semantics". The order
is the contract that a failure never leaves a trace a re-run cannot find: a failed Durable
Object or vector step stops the erase before any D1 row is deleted; every step is idempotent.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, get_args

from pydantic import BaseModel, Field

from agent_memory.governance.feed import ChangeFeed
from agent_memory.governance.personal_data import destroy_statement
from agent_memory.governance.writes import EventLog
from agent_memory.ids import chunks, run_batches, sha256_hex
from agent_memory.lifecycle.prune import (
    EXPORT_ROOT,
    TABLE_OF,
    ArchiveKind,
    ArchiveLedger,
    archive_key,
    decode_archive,
    encode_lines,
    parse_archive_key,
    tenant_prefixes,
)
from agent_memory.lifecycle.retention import forget_instances, register_instances, tenant_instances
from agent_memory.namespace import SERVICE, AgentScope
from agent_memory.tiers.episodic import EpisodicStore, forget_pack_sources
from agent_memory.tiers.semantic.memory import FactHistory
from agent_memory.tiers.semantic.models import delete_own_vectors
from agent_memory.tiers.semantic.recall import carry_prefix
from agent_memory.tiers.working import WORKING_MEMORY_PREFIX
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.durable_objects import DurableObjectNamespace
from bindings.ports.kv import KVNamespace
from bindings.ports.object_store import ObjectStore
from bindings.ports.vectorize import VectorIndex
from http_messages import CodedError

MIN_SUBJECT_CHARS = 3
AGENT_STATE_STORES = ("run_log", "turn_state", "failed_writes", "pending_writes")
MAX_SUBJECT_CHARS = 256


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
    exports_deleted: int = 0  # export jobs whose parts named it (docs/portability.md)
    data_keys: int = 0  # destroyed: the subject's sealed values have no key any more
    keyword_index_optimized: bool = False
    archived_rows: dict[str, int] = Field(
        default_factory=lambda: dict.fromkeys(get_args(ArchiveKind), 0)
    )
    # Instances reached and wiped, rows removed per store (turn_state: rows scrubbed).
    agent_state: dict[str, int] = Field(
        default_factory=lambda: dict.fromkeys(("instances", "wiped", *AGENT_STATE_STORES), 0)
    )
    complete: bool = True
    errors: list[str] = Field(default_factory=list)


class Found(BaseModel):
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

    def __init__(self, subject: str, found: Found | None = None) -> None:
        self.subject = subject
        self.found = found or Found()

    def mentions(self, *values: Any) -> bool:
        return any(self.subject in _text(v) for v in values)

    def episode(self, row: dict[str, Any]) -> bool:
        return (
            row.get("subject") == self.subject
            or str(row.get("episode_id")) in self.found.episodes
            or self.mentions(row.get("content"), row.get("data"), row.get("instance_id"))
        )

    def run(self, row: dict[str, Any]) -> bool:
        return str(row.get("run_id")) in self.found.runs or self.mentions(
            row.get("input"), row.get("output"), row.get("error"), row.get("instance_id")
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
        named = (
            {v for k in ("key", "supersedes") if isinstance(v := payload.get(k), str)}
            if isinstance(payload, dict)
            else set()
        )
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
        out = dict(payload)
        if isinstance(results := payload.get("results"), list):
            out["results"] = [r for r in results if r[0] not in erased]
        if isinstance(dropped := payload.get("dropped"), list):
            out["dropped"] = [d for d in dropped if d not in erased]
        return out if out != payload else None

    def archived(self, kind: ArchiveKind, row: dict[str, Any]) -> bool:
        return {"episodes": self.episode, "runs": self.run, "events": self.event}[kind](row)


class InvalidSubject(CodedError, ValueError):
    """A subject no erase or subject export takes (it comes in the path): 422."""

    status = 422
    code = "invalid_path"


def validate_subject(subject: str) -> str:
    """The subject, or `InvalidSubject`: 3-256 characters, not blank (a very short string
    would match as a substring of almost everything)."""
    if not isinstance(subject, str) or subject.strip() != subject or not subject:
        raise InvalidSubject("subject must be a non-empty string without surrounding spaces")
    if not MIN_SUBJECT_CHARS <= len(subject) <= MAX_SUBJECT_CHARS:
        raise InvalidSubject(
            f"subject must be {MIN_SUBJECT_CHARS}-{MAX_SUBJECT_CHARS} characters long"
        )
    return subject


EVENTS_PAGE = 500
RUN_IDS_PER_CALL = 1000  # agent_runtime_do.protocol.MAX_ERASE_RUN_IDS
# How long an erase's start mark is kept: far longer than any recall record stays in flight.
MARK_KEPT_MS = 86_400_000

log = logging.getLogger(__name__)

Progress = Callable[[str, int], None]


class InstanceEraseError(RuntimeError):
    """An instance refused or failed the erase (its answer's code is in the message)."""


def subject_digest(subject: str) -> str:
    """How logs name a subject: a short SHA-256, never the subject (often a person)."""
    return "sha256:" + sha256_hex(subject)[:16]


@dataclass
class SubjectEraser:
    """Erases one subject from one tenant's memory (see the module docstring); the bindings
    left None are steps it skips."""

    tenant_id: str
    _: KW_ONLY
    db: D1Database
    clock: Clock
    kv: KVNamespace | None = None
    vectors: VectorIndex | None = None
    cold: ObjectStore | None = None
    agents: DurableObjectNamespace | None = None
    progress: Progress | None = None
    purge_residue: Callable[[str], Awaitable[None]] | None = None
    feed: ChangeFeed | None = None

    def __post_init__(self) -> None:
        self._episodes = EpisodicStore(self.db, self.tenant_id)
        self._facts = FactHistory(self.db, self.tenant_id)
        self._ledger = ArchiveLedger(self.db, self.tenant_id)
        self._progress = self.progress or (lambda step, n: None)

    async def erase(self, subject: str) -> EraseReport:
        subject = validate_subject(subject)
        report = EraseReport(tenant_id=self.tenant_id, subject=subject)
        # 0. The mark: a recall record still in flight (written after its response) that
        # commits from now on stores its event without the query text (migration 0013).
        now = round(self.clock.now() * 1000)
        await EventLog(self.tenant_id, self.db).mark_erase_start(now, MARK_KEPT_MS)
        found = await self._find(subject, Found())
        # 1. The agent instances: before the D1 rows that list them, and before the rows
        # are read for good, since an object flushes (or replays) its queued writes into
        # D1 before it erases: the rows are found again afterwards.
        if self.agents is not None:
            try:
                await self._erase_instances(subject, sorted(found.runs), report)
                await self._find(subject, found)
            except Exception as exc:
                return self._stopped(report, "agent instances", exc)
        self._progress("agent_state", sum(report.agent_state.values()))
        matcher = SubjectMatcher(subject, found)
        self._progress("found", len(found.episodes) + len(found.facts) + len(found.runs))
        # 2. Vectors: they are only reachable through their fact rows.
        if found.facts and self.vectors is not None:
            try:
                deleted = await delete_own_vectors(
                    self.vectors, self.tenant_id, sorted(found.facts)
                )
                report.vectors = len(deleted)
            except Exception as exc:
                return self._stopped(report, "vectors", exc)
        self._progress("vectors", report.vectors)
        # 3. D1 rows.
        await self._delete_rows(found, matcher, report)
        self._progress("d1", report.episodes + report.facts + report.runs + report.events)
        # 4. Working memory; 5. cold archives; 6. locally, checkpoint the SQLite WALs, so no
        # page from before the erase is left in a -wal file (the stores zero what they
        # delete). A failure here is reported; the D1 rows are already gone.
        if self.kv is not None:
            await self._step(report, "working memory", self._erase_working(matcher, report))
        self._progress("working", report.working_keys)
        if self.cold is not None:
            await self._step(report, "archives", self._erase_archives(matcher, report))
            await self._step(report, "exports", self._erase_exports(matcher, report))
        self._progress("archives", report.archives_rewritten + report.archives_deleted)
        if self.purge_residue is not None:
            await self._step(report, "residue", self.purge_residue(subject))
        counts = report.model_dump(exclude={"subject", "errors", "tenant_id"})
        log.info("erase %s/%s: %s", self.tenant_id, subject_digest(subject), counts)
        if self.feed is not None:  # queued changes carrying the subject are dropped from now
            numbers = {k: v for k, v in counts.items() if type(v) is int}  # not the flags
            erased = self.feed.erased(self.tenant_id, subject, numbers)
            await self._step(report, "change feed", erased)
        return report

    @staticmethod
    def _failed(report: EraseReport, step: str, exc: Exception) -> None:
        report.complete = False
        report.errors.append(f"{step}: {type(exc).__name__}: {exc}")

    async def _step(self, report: EraseReport, step: str, work: Awaitable[None]) -> None:
        """A step after the D1 rows are gone: a failure is reported and the rest go on."""
        try:
            await work
        except Exception as exc:
            self._failed(report, step, exc)

    def _stopped(self, report: EraseReport, step: str, exc: Exception) -> EraseReport:
        """End the erase before any D1 row is deleted: a repeat finds everything again."""
        self._failed(report, step, exc)
        log.error(
            "erase %s/%s: %s failed, rows kept: %s",
            self.tenant_id,
            subject_digest(report.subject),
            step,
            type(exc).__name__,
        )
        return report

    async def find(self, subject: str) -> Found:
        """The D1 rows that are traces of `subject` (what an erase would delete there)."""
        return await self._find(validate_subject(subject), Found())

    async def _find(self, subject: str, found: Found) -> Found:
        """Add to `found` the episodes, facts (with the history they superseded) and runs
        that are traces."""
        episodes, runs = await self._episodes.subject_traces(subject)
        for row in episodes:
            found.episodes.add(str(row["episode_id"]))
            found.runs.add(str(row["run_id"]))
            found.hashes.add(str(row["content_hash"]))
        facts = await self._facts.subject_facts(subject)
        found.facts.update(facts)
        found.hashes.update(facts.values())
        found.runs.update(runs)
        return found

    async def _delete_rows(
        self, found: Found, matcher: SubjectMatcher, report: EraseReport
    ) -> None:
        """Delete what `_find` found: links and provenance, events, then the rows. Every
        statement is batched by `IDS_PER_STATEMENT` ids; deleting what is gone deletes
        nothing, so a re-run finishes an interrupted erase."""
        # Crypto-shredding first: from here on, whatever is left of the subject's sealed
        # personal fields (here, in archives, in backups) has no key.
        destroyed = await destroy_statement(self.db, self.tenant_id, matcher.subject).run()
        report.data_keys = destroyed.meta.changes
        # A workflow pack promoted from an instance named after the subject keeps its
        # workflow (it is the tenant's now) but not that instance id.
        await forget_pack_sources(self.db, self.tenant_id, matcher.subject)
        facts = sorted(found.facts)
        sources = sorted(found.facts | found.episodes | found.runs)
        report.links = await self._facts.delete_links(facts)
        report.provenance = await self._facts.delete_provenance(facts, sources)
        report.events = await self._erase_events(matcher, report)
        report.facts = await self._facts.delete_facts(facts)
        report.episodes = await self._episodes.delete_episodes(sorted(found.episodes))
        report.runs = await self._episodes.delete_runs(sorted(found.runs))
        # Postings go with their facts (the delete trigger); term statistics no fact has any
        # more are dropped here. Always run, so a re-run finishes an interrupted erase.
        report.keyword_index_optimized = await self._facts.tidy_keyword_index()

    async def _erase_events(self, matcher: SubjectMatcher, report: EraseReport) -> int:
        """Page through the tenant's events (by id): delete the ones that are traces, scrub
        erased fact ids out of the others' results."""
        events = EventLog(self.tenant_id, self.db)
        doomed: list[str] = []
        scrubs: list[D1Statement] = []
        after = ""
        while True:
            rows = await events.page_after(after, EVENTS_PAGE)
            for row in rows:
                if matcher.event(row):
                    doomed.append(str(row["event_id"]))
                    continue
                payload = matcher.scrubbed(row)
                if payload is not None:
                    scrubs.append(events.scrub_statement(str(row["event_id"]), payload))
            if len(rows) < EVENTS_PAGE:
                break
            after = str(rows[-1]["event_id"])
        await run_batches(self.db, scrubs)
        report.events_scrubbed = len(scrubs)
        return await events.delete(doomed) if doomed else 0

    async def _erase_exports(self, matcher: SubjectMatcher, report: EraseReport) -> None:
        """Delete every export holding a trace (all its parts: an export is a copy)."""
        assert self.cold is not None
        keys = await self.archive_keys((f"{EXPORT_ROOT}/{self.tenant_id}/",))
        doomed: set[str] = set()
        for key in keys:
            job = key.rsplit("/", 1)[0]
            body = None if job in doomed else await self.cold.get(key)
            if body is not None and matcher.subject in gzip.decompress(body.data).decode():
                doomed.add(job)
        for job in sorted(doomed):
            await self.cold.delete([k for k in keys if k.startswith(job + "/")])
        report.exports_deleted = len(doomed)

    async def archive_keys(self, prefixes: Sequence[str] | None = None) -> list[str]:
        """Every object under `prefixes` (default: the tenant's archives), none without the
        cold tier."""
        keys: list[str] = []
        if self.cold is None:
            return keys
        for prefix in prefixes or tenant_prefixes(self.tenant_id):
            cursor: str | None = None
            while True:
                page = await self.cold.list(prefix=prefix, cursor=cursor)
                keys += [o.key for o in page.objects]
                if not page.truncated or not page.cursor:
                    break
                cursor = page.cursor
        return keys

    async def _erase_archives(self, matcher: SubjectMatcher, report: EraseReport) -> None:
        """Rewrite or delete every archive holding traces; each one's counts go into
        `report` as soon as it is done."""
        cold = self.cold
        assert cold is not None
        now_ms = int(self.clock.now() * 1000)
        for key in await self.archive_keys():
            parsed = parse_archive_key(key)
            if parsed is None:
                continue
            _, kind, _ = parsed
            body = await cold.get(key)
            if body is None:
                continue
            rows = decode_archive(body.data)
            kept: list[dict[str, Any]] = []
            erased_ids: list[str] = []
            for row in rows:
                if not matcher.archived(kind, row):
                    # An archived event keeps no reference to an erased fact either.
                    payload = matcher.scrubbed(row) if kind == "events" else None
                    kept.append(row if payload is None else {**row, "payload": payload})
                elif kind == "episodes":
                    erased_ids.append(str(row.get("episode_id")))
            if kept == rows:  # nothing erased or scrubbed
                continue
            report.archived_rows[kind] += len(rows) - len(kept)
            # The cold item index (`cold_items`, agent_memory.hot_warm_cold) follows the
            # archive: erased episodes leave it before their object is rewritten.
            await self._ledger.unindex_episodes(erased_ids)
            if not kept:
                await cold.delete(key)
                await self._ledger.forget(key)
                report.archives_deleted += 1
                continue
            # Rewritten under the key of its (new) first row: new object first, then the
            # ledger, then the old object, so a failure in between leaves the old object,
            # which a re-run rewrites again.
            table, first = TABLE_OF[kind], kept[0]
            ends = {"first_key": table.row_key(first), "last_key": table.row_key(kept[-1])}
            new_key = archive_key(
                self.tenant_id, kind, int(first[table.time_column]), str(first[table.id_column])
            )
            data = encode_lines(kept)
            meta = {"rows": str(len(kept)), "first": ends["first_key"], "last": ends["last_key"]}
            meta |= {"rewritten_ms": str(now_ms)}
            await cold.put(new_key, data, custom_metadata={**body.custom_metadata, **meta})
            await self._ledger.rewritten(
                key, new_key, rows=len(kept), size=len(data), now_ms=now_ms, **ends
            )
            if new_key != key:
                await cold.delete(key)
            report.archives_rewritten += 1

    async def _erase_instances(
        self, subject: str, run_ids: Sequence[str], report: EraseReport
    ) -> None:
        assert self.agents is not None
        slices = list(chunks(sorted(run_ids), RUN_IDS_PER_CALL))
        instances = await tenant_instances(self.db, self.tenant_id)
        # Registered first: once the runs rows that name an instance are erased, this row
        # is how a repeat (or the next erase) still finds it.
        await register_instances(self.db, self.tenant_id, instances, int(self.clock.now() * 1000))
        wiped: list[tuple[str, str]] = []
        for agent_type, instance_id in instances:
            # An instance named after the subject (issue 26) loses everything: its storage
            # and alarm (`wipe`), then its D1 row.
            wipe = subject in instance_id
            scope = AgentScope(
                tenant=self.tenant_id, agent_type=agent_type, instance_id=instance_id
            )
            stub = self.agents.get_by_name(scope.object_name)
            for run_slice in slices or [()]:
                payload = {"subject": subject, "run_ids": list(run_slice), "wipe": wipe}
                answer = await stub.call("erase_subject", {**scope.model_dump(), **payload})
                error = answer.get("error")
                if isinstance(error, dict):
                    raise InstanceEraseError(
                        f"instance {agent_type}/{subject_digest(instance_id)}: "
                        f"{error.get('code', 'error')}"
                    )
                erased = answer.get("erased", {})
                for store in AGENT_STATE_STORES:
                    report.agent_state[store] += int(erased.get(store, 0))
                if wipe:
                    wiped.append((agent_type, instance_id))
                    break  # one wipe takes every run
            report.agent_state["instances"] += 1
        await forget_instances(self.db, self.tenant_id, wiped)
        report.agent_state["wiped"] = len(wiped)

    async def _erase_working(self, matcher: SubjectMatcher, report: EraseReport) -> None:
        assert self.kv is not None
        doomed = list(await self.working_traces(matcher))
        for name in doomed:
            await self.kv.delete(name)
        report.working_keys = len(doomed)

    async def working_traces(self, matcher: SubjectMatcher) -> dict[str, str | None]:
        """The tenant's KV keys that are traces (name -> value when the value was read)."""
        if self.kv is None:
            return {}
        # Legacy working-memory keys and every canonical hot item of the tenant (working
        # memory after the namespace migration, and copies promoted by the MemoryClient).
        doomed: dict[str, str | None] = {}
        for prefix in (
            f"{WORKING_MEMORY_PREFIX}:{self.tenant_id}:",
            f"{SERVICE}:{self.tenant_id}:",
            carry_prefix(self.tenant_id),
        ):
            cursor: str | None = None
            while True:
                page = await self.kv.list(prefix=prefix, cursor=cursor)
                for item in page.keys:
                    # The key (after the tenant) names it, or else the value holds it.
                    if matcher.subject in item.name[len(prefix) :]:
                        doomed[item.name] = None
                    elif matcher.subject in (value := await self.kv.get(item.name) or ""):
                        doomed[item.name] = value
                if page.list_complete or not page.cursor:
                    break
                cursor = page.cursor
        return doomed
