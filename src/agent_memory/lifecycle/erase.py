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
  value contains it, and recall records waiting in KV to be written to D1
  (`recall_record`) that name it (written back later, they would bring it back);
* the AgentRuntime Durable Objects of the tenant (`_erase_instances`): their run logs,
  turn state, failed and pending episodic writes that match, or belong to an erased run;
* cold-tier archive rows matching the rules above: each archive object is rewritten
  without them (renamed after its new first row, so its key names no erased row) or
  deleted when nothing is left, and the archive ledger is updated.

Personal fields are sealed under per-subject data keys (`governance.personal_data`): the
erase destroys the subject's keys (crypto-shredding), so every copy of its sealed values in
cold archives is unreadable without rewriting it; a D1 Time Travel copy holds the wrapped key
too, and becomes unreadable when the KEK that wrapped it is retired (docs/personal-data.md).
The keyword index's term statistics that no remaining fact holds are deleted afterwards
(postings go with their facts, by trigger), so no index row keeps an erased fact's words.

A recall's statistics and event are written after its response; one in flight while the
erase runs is in neither D1 nor KV. So the erase first writes a start mark (migration 0013,
tenant and time only), and a recall record committed after it stores its event without the
query text (`recall_record`), whatever the query named.

Order, so that a failure never leaves a trace a re-run cannot find: the mark, then the
Durable Objects (found through the D1 runs rows; each settles its queued writes into D1 before it
erases, so the D1 rows are found again after this step), then vectors (a vector is only
found through its fact row), then D1 rows in batches (data keys first, the keyword index
merge last), then KV, then the archives, then (locally) the SQLite WALs. A failed Durable
Object or vector step stops the erase before any D1 row is deleted. Every step is
idempotent: running the erase again finishes an interrupted one and reports zeros once
nothing is left. Statements are `tenant_id = ?` first, ≤ 100 bound parameters.

Where the parts live (this module re-exports their public names):

* `_erase_rules`: the subject's validation, the matching rules, the report (no I/O);
* `_erase_rows`: finding and deleting the D1 rows (`RowEraser`);
* `_erase_archives`: rewriting the cold-tier archives (`ArchiveEraser`);
* `_erase_instances`: the `erase_subject` RPC on every agent instance (`InstanceEraser`);
* here: `SubjectEraser`, which runs the steps in that order, with the vector and working
  memory (KV) steps, small enough to stay inline.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from agent_memory.lifecycle._erase_archives import ArchiveEraser
from agent_memory.lifecycle._erase_instances import InstanceEraser
from agent_memory.lifecycle._erase_rows import (
    EVENTS_PAGE,
    RowEraser,
)
from agent_memory.lifecycle._erase_rules import (
    MAX_SUBJECT_CHARS,
    MIN_SUBJECT_CHARS,
    EraseReport,
    Found,
    SubjectMatcher,
    validate_subject,
)
from agent_memory.namespace import SERVICE
from agent_memory.statements import IDS_PER_STATEMENT
from agent_memory.tiers.semantic.models import delete_own_vectors
from agent_memory.tiers.semantic.recall import carry_prefix
from agent_memory.tiers.working import WORKING_MEMORY_PREFIX
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.durable_objects import DurableObjectNamespace
from bindings.ports.kv import KVNamespace
from bindings.ports.object_store import ObjectStore
from bindings.ports.vectorize import VectorIndex

__all__ = [
    "EVENTS_PAGE",
    "IDS_PER_STATEMENT",
    "MAX_SUBJECT_CHARS",
    "MIN_SUBJECT_CHARS",
    "EraseReport",
    "Progress",
    "SubjectEraser",
    "SubjectMatcher",
    "validate_subject",
]

log = logging.getLogger(__name__)


def subject_digest(subject: str) -> str:
    """How logs name a subject: a short SHA-256, never the subject (often a person)."""
    return "sha256:" + hashlib.sha256(subject.encode()).hexdigest()[:16]


Progress = Callable[[str, int], None]
# How long an erase's start mark is kept: far longer than any recall record stays in flight.
MARK_KEPT_MS = 86_400_000


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
        agents: DurableObjectNamespace | None = None,
        progress: Progress | None = None,
        purge_residue: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self._db = db
        self._clock = clock
        self._purge_residue = purge_residue
        self._kv = kv
        self._vectors = vectors
        self._progress = progress or (lambda step, n: None)
        self._rows = RowEraser(tenant_id, db)
        self._instances = (
            None if agents is None else InstanceEraser(tenant_id, db=db, agents=agents, clock=clock)
        )
        self._archives = (
            None if cold is None else ArchiveEraser(tenant_id, db=db, cold=cold, clock=clock)
        )

    async def erase(self, subject: str) -> EraseReport:
        subject = validate_subject(subject)
        report = EraseReport(tenant_id=self.tenant_id, subject=subject)
        # 0. The mark: a recall record still in flight (written after its response) that
        # commits from now on stores its event without the query text (migration 0013).
        await self._mark_start()
        found = await self._rows.find(subject)
        # 1. The agent instances: before the D1 rows that list them, and before the rows
        # are read for good, since an object flushes (or replays) its queued writes into
        # D1 before it erases: the rows are found again afterwards.
        if self._instances is not None:
            try:
                await self._instances.erase(subject, sorted(found.runs), report)
                again = await self._rows.find(subject)
            except Exception as exc:
                return self._stopped(report, "agent instances", exc)
            found = Found(
                episodes=found.episodes | again.episodes,
                runs=found.runs | again.runs,
                facts=found.facts | again.facts,
                hashes=found.hashes | again.hashes,
            )
        self._progress("agent_state", sum(report.agent_state.values()))
        matcher = SubjectMatcher(subject, found)
        self._progress("found", len(found.episodes) + len(found.facts) + len(found.runs))
        # 2. Vectors: they are only reachable through their fact rows.
        if found.facts and self._vectors is not None:
            try:
                report.vectors = await self._delete_vectors(sorted(found.facts))
            except Exception as exc:
                return self._stopped(report, "vectors", exc)
        self._progress("vectors", report.vectors)
        # 3. D1 rows.
        await self._rows.delete(found, matcher, report)
        self._progress("d1", report.episodes + report.facts + report.runs + report.events)
        # 4. Working memory.
        if self._kv is not None:
            try:
                report.working_keys = await self._erase_working(matcher)
            except Exception as exc:
                report.complete = False
                report.errors.append(f"working memory: {type(exc).__name__}: {exc}")
        self._progress("working", report.working_keys)
        # 5. Cold archives.
        if self._archives is not None:
            try:
                await self._archives.erase(matcher, report)
            except Exception as exc:
                report.complete = False
                report.errors.append(f"archives: {type(exc).__name__}: {exc}")
        self._progress("archives", report.archives_rewritten + report.archives_deleted)
        # 6. Locally: checkpoint the SQLite WALs, so no page from before the erase is left
        #    in a -wal file (the stores already zero what they delete).
        if self._purge_residue is not None:
            try:
                await self._purge_residue()
            except Exception as exc:
                report.complete = False
                report.errors.append(f"residue: {type(exc).__name__}: {exc}")
        counts = report.model_dump(exclude={"subject", "errors", "tenant_id"})
        log.info("erase %s/%s: %s", self.tenant_id, subject_digest(subject), counts)
        return report

    async def _mark_start(self) -> None:
        now = round(self._clock.now() * 1000)
        await self._db.batch(
            [
                self._db.prepare(
                    "INSERT INTO erasure_marks (tenant_id, started_at) VALUES (?, ?) "
                    "ON CONFLICT (tenant_id, started_at) DO NOTHING"
                ).bind(self.tenant_id, now),
                self._db.prepare(
                    "DELETE FROM erasure_marks WHERE tenant_id = ? AND started_at < ?"
                ).bind(self.tenant_id, now - MARK_KEPT_MS),
            ]
        )

    def _stopped(self, report: EraseReport, step: str, exc: Exception) -> EraseReport:
        """End the erase before any D1 row is deleted: a repeat finds everything again."""
        report.complete = False
        report.errors.append(f"{step}: {type(exc).__name__}: {exc}")
        log.error(
            "erase %s/%s: %s failed, rows kept: %s",
            self.tenant_id,
            subject_digest(report.subject),
            step,
            type(exc).__name__,
        )
        return report

    # ------------------------------------------------------------------ vectors and KV

    async def _delete_vectors(self, fact_ids: Sequence[str]) -> int:
        assert self._vectors is not None
        return len(await delete_own_vectors(self._vectors, self.tenant_id, fact_ids))

    async def _erase_working(self, matcher: SubjectMatcher) -> int:
        assert self._kv is not None
        # Legacy working-memory keys and every canonical hot item of the tenant (working
        # memory after the namespace migration, and copies promoted by the MemoryClient).
        doomed: list[str] = []
        for prefix in (
            f"{WORKING_MEMORY_PREFIX}:{self.tenant_id}:",
            f"{SERVICE}:{self.tenant_id}:",
            carry_prefix(self.tenant_id),
        ):
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
