"""Memory that can leave and arrive (issue 45; docs/portability.md describes the format, the
jobs and the imports): the export records (`RECORDS`, published as `json_schema()`), tenant
exports as resumable jobs writing gzip JSON Lines parts to R2 (`Exporter`; a part is written
before the job's progress names it, so a crash repeats it and loses nothing), subject exports,
and imports (`Importer`) that check every line before writing anything, then write through the
write gate, idempotently. Never exported: a key, credential, token, KEK or data key.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agent_memory.governance.feed import ChangeFeed
from agent_memory.governance.personal_data import (
    PersonalData,
    Sealable,
    SealedValue,
)
from agent_memory.governance.writes import (
    EventLog,
    EventTier,
    MemoryEvent,
    WriteDenied,
    WriteGate,
    episode_proposal,
    fact_proposal,
    loaded_payload,
    memory_written,
    personal_marking,
    stored_payload,
)
from agent_memory.ids import IDS_PER_STATEMENT, chunks, content_hash, new_ulid, run_batches
from agent_memory.lifecycle.erase import SubjectEraser, SubjectMatcher
from agent_memory.lifecycle.prune import (
    EXPORT_ROOT,
    decode_archive,
    encode_lines,
    parse_archive_key,
)
from agent_memory.namespace import DEFAULT_SUBJECT, TENANT_PATTERN
from agent_memory.tiers.episodic import Episode, Pack, RunRecord
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import Fact, FactInput
from agent_memory.tiers.semantic.writes import STORED_HASH_CHARS
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database, D1Statement
from bindings.ports.object_store import ObjectStore
from bindings.ports.sql import Row
from http_messages import STORAGE_LIMITS, ApiError, JsonLimitError, loads_bounded

log = logging.getLogger(__name__)

FORMAT = "agent-memory-export"
VERSION = 1
MAX_RECORD_BYTES = 256 * 1024  # one line; the largest record (a 32 KiB episode) fits 8 times
PART_RECORDS = 5_000
PAGE_ROWS = 500
IMPORT_CHUNK = 500
EXPORT_KEPT_DAYS = 7
EXPORT_STEP_SECONDS = 20.0  # one bounded step: after the start's response, or a minute cron's
MAX_REFUSALS_LISTED = 100
Personal = Literal["sealed", "opened"]
ImportFormat = Literal["agent-memory", "mem0", "text"]
Kind = Literal["export", "import"]

# --------------------------------------------------------------------------- the records


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant_id: str = Field(pattern=TENANT_PATTERN)


class HeaderRecord(_Record):
    """The first line: what the file is."""

    record: Literal["header"] = "header"
    format: Literal["agent-memory-export"] = "agent-memory-export"
    version: int = VERSION
    exported_at: int = Field(description="epoch milliseconds")
    counts: dict[str, int] = Field(default_factory=dict, description="records per kind")
    personal: Personal = Field(description="personal fields as stored (sealed) or opened")
    subject: str | None = Field(default=None, description="a subject export's subject")
    job_id: str | None = None


class FactRecord(Fact):
    """A semantic fact with its state and history fields as stored (times in epoch ms).
    `content_hash` and `embedding_*` are the source's; an import recomputes both."""

    model_config = ConfigDict(extra="forbid")
    record: Literal["fact"] = "fact"
    index_terms: Any = Field(default=None, description="its keyword-index entry")
    index_length: int = 0
    context_length: int = 0
    event_in_row: int = Field(default=0, description="1: the row is its own write event")


class EpisodeRecord(Episode):
    model_config = ConfigDict(frozen=True, extra="forbid")
    record: Literal["episode"] = "episode"
    tenant_id: str = Field(pattern=TENANT_PATTERN)
    event_in_row: int = 0
    archived: bool = Field(default=False, description="read from a cold archive")


class RunExport(RunRecord):
    model_config = ConfigDict(frozen=True, extra="forbid")
    record: Literal["run"] = "run"
    tenant_id: str = Field(pattern=TENANT_PATTERN)
    archived: bool = False


class PackRecord(Pack):
    """A workflow pack with its bandit statistics (alpha, beta, pulls)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    record: Literal["pack"] = "pack"
    tenant_id: str = Field(pattern=TENANT_PATTERN)


class ProvenanceRecord(_Record):
    record: Literal["provenance"] = "provenance"
    fact_id: str
    source_kind: Literal["episode", "fact", "run"]
    source_id: str
    relation: Literal["promoted_from", "merged_from", "summarised_from"]
    created_at: int


class LinkRecord(_Record):
    record: Literal["link"] = "link"
    from_fact_id: str
    to_fact_id: str
    score: float
    created_at: int


class KeptApartRecord(_Record):
    """A supersession an operator undid: the reconciler leaves the pair apart."""

    record: Literal["kept_apart"] = "kept_apart"
    fact_id: str
    other_id: str
    undone_at: int


class EventRecord(_Record):
    """A memory event (ADR-0051): the audit trail of writes and recalls."""

    record: Literal["event"] = "event"
    event_id: str
    kind: Literal["memory_retrieved", "memory_written"]
    tier: Literal["working", "episodic", "semantic", "procedural"]
    agent_type: str | None = None
    run_id: str | None = None
    content_hash: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    created_at: int
    archived: bool = False


class LifecycleRecord(_Record):
    """The tenant's retention and episode-limit overrides (null: the deployment's default)."""

    record: Literal["lifecycle"] = "lifecycle"
    episode_retention_days: int | None = None
    episode_limit: int | None = None
    updated_at: int
    updated_by: str = ""


class WorkingRecord(_Record):
    """A working-memory (KV) entry naming the subject: subject exports only; never imported."""

    record: Literal["working"] = "working"
    key: str
    value: str | None = None


ExportRecord = Annotated[
    HeaderRecord
    | FactRecord
    | EpisodeRecord
    | RunExport
    | PackRecord
    | ProvenanceRecord
    | LinkRecord
    | KeptApartRecord
    | EventRecord
    | LifecycleRecord
    | WorkingRecord,
    Field(discriminator="record"),
]
RECORDS: TypeAdapter[Any] = TypeAdapter(ExportRecord)


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of one line of the format (docs/export-format.schema.json)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://agent-memory.dev/schemas/export-v1.json",
        "title": f"{FORMAT} v{VERSION}: one JSON Lines record",
        **RECORDS.json_schema(),
    }


@dataclass(frozen=True)
class _Table:
    """A record kind and the table it is read from and written to."""

    record: str
    name: str
    key: tuple[str, ...]
    model: type[BaseModel]
    json: tuple[str, ...] = ()
    tier: EventTier | None = None  # whose `memory_written` event an import of it counts in

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(f for f in self.model.model_fields if f not in _NOT_COLUMNS)


_NOT_COLUMNS = frozenset({"record", "tenant_id", "archived"})
# In the order a file holds them (and an import writes them): what facts name comes first.
TABLES = (
    _Table("lifecycle", "tenant_lifecycle", (), LifecycleRecord),
    _Table(
        "pack", "workflow_packs", ("agent_type", "name", "version"), PackRecord, tier="procedural"
    ),
    _Table("run", "agent_runs", ("run_id",), RunExport, ("input", "output"), "episodic"),
    _Table("episode", "memory_episodes", ("episode_id",), EpisodeRecord, ("data",), "episodic"),
    _Table(
        "fact", "semantic_facts", ("fact_id",), FactRecord, ("metadata", "index_terms"), "semantic"
    ),
    _Table(
        "provenance",
        "fact_provenance",
        ("fact_id", "source_kind", "source_id"),
        ProvenanceRecord,
        tier="semantic",
    ),
    _Table("link", "memory_links", ("from_fact_id", "to_fact_id"), LinkRecord, tier="semantic"),
    _Table(
        "kept_apart", "facts_kept_apart", ("fact_id", "other_id"), KeptApartRecord, tier="semantic"
    ),
    _Table("event", "memory_events", ("event_id",), EventRecord, ("payload",)),
)
TABLE = {t.record: t for t in TABLES}
ARCHIVED = {"episodes": TABLE["episode"], "runs": TABLE["run"], "events": TABLE["event"]}


def _quoted(columns: Iterable[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


async def _rows(
    db: D1Database,
    table: _Table,
    tenant: str,
    *,
    after: list[Any] | None = None,
    limit: int = PAGE_ROWS,
    ids: Sequence[Any] | None = None,
) -> list[Row]:
    """The tenant's rows of `table` in key order: after key `after`, or those whose first key
    column is in `ids`. Every table the format names, read alike (as a move reads them)."""
    where, params = "", []
    if ids is not None:
        where, params = f' AND "{table.key[0]}" IN ({", ".join("?" for _ in ids)})', list(ids)
    elif after is not None and table.key:
        where, params = f" AND ({_quoted(table.key)}) > ({', '.join('?' for _ in after)})", after
    order = f" ORDER BY {_quoted(table.key)}" if table.key else ""
    sql = (
        f'SELECT {_quoted(table.columns)} FROM "{table.name}" WHERE tenant_id = ?{where}'
        f"{order} LIMIT ?"
    )
    return (await db.prepare(sql).bind(tenant, *params, limit).all()).results


def _as_record(table: _Table, tenant: str, row: Row, **extra: Any) -> dict[str, Any]:
    """A stored (or archived) row as its record: JSON columns decoded, the tenant named."""
    out: dict[str, Any] = {"record": table.record, "tenant_id": tenant}
    for column in table.columns:
        value = row.get(column)
        if column in table.json and isinstance(value, str):
            value = loaded_payload(value) if column == "payload" else json.loads(value)
        out[column] = value
    return out | extra


_PERSONAL_FIELDS = (("fact", "metadata", "fact_id"), ("episode", "data", "episode_id"))


async def _open_all(records: list[dict[str, Any]], personal: PersonalData) -> None:
    """Open the sealed personal fields of the fact and episode records in place."""
    for kind, field, id_field in _PERSONAL_FIELDS:
        mine = [r for r in records if r["record"] == kind]
        items = [Sealable(r.get("subject"), str(r[id_field]), r[field] or {}) for r in mine]
        for record, value in zip(mine, await personal.open_many(field, items), strict=True):
            record[field] = value


def sealed_values(value: Any) -> bool:
    """Whether `value` holds a sealed personal field (`pii.1.…`) anywhere."""
    if isinstance(value, dict):
        return any(sealed_values(v) for v in value.values())
    if isinstance(value, list):
        return any(sealed_values(v) for v in value)
    return SealedValue.parse(value) is not None


def _opened_event(tenant: str, now: float, by: str, **what: Any) -> MemoryEvent:
    """The `memory_retrieved` event of an operator asking for personal data opened."""
    return MemoryEvent(
        event_id=new_ulid(now),
        tenant_id=tenant,
        kind="memory_retrieved",
        tier="semantic",
        agent_type="operator",
        created_at_ms=int(now * 1000),
        payload={"op": "personal_data_opened", "by": by, "query": "", "results": [], **what},
    )


# --------------------------------------------------------------------------- exports


class PortabilityJob(BaseModel):
    """An export (or a resumable import) as the operator sees it; times in epoch ms."""

    tenant_id: str
    job_id: str
    kind: Kind
    status: Literal["running", "complete", "failed", "expired"]
    options: dict[str, Any] = {}
    progress: dict[str, Any] = {}
    requested_by: str = ""
    started_at: int
    updated_at: int
    finished_at: int | None = None
    expires_at: int | None = None
    error: str | None = None


@dataclass
class Jobs:
    """`portability_jobs` (control plane): one tenant's export and import jobs."""

    control: D1Database
    tenant: str

    async def save(self, job: PortabilityJob, *, new: bool = False) -> PortabilityJob:
        """Write `job` (`new`: only if no job has its id; the stored one is returned)."""
        row = job.model_dump() | {k: json.dumps(getattr(job, k)) for k in _JSON_FIELDS}
        changed = ", ".join(f"{c} = excluded.{c}" for c in row if c not in _FIXED)
        sql = (
            f"INSERT INTO portability_jobs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
            f" ON CONFLICT (tenant_id, job_id) DO {'NOTHING' if new else 'UPDATE SET ' + changed}"
        )
        await self.control.prepare(sql).bind(*row.values()).run()
        return (await self.listed(job.kind, job_id=job.job_id))[0] if new else job

    async def start(
        self,
        job_id: str,
        kind: Kind,
        options: dict[str, Any],
        by: str,
        now: float,
        progress: dict[str, Any] | None = None,
    ) -> PortabilityJob:
        """A running job, new (or the one with this id already: an import resumed)."""
        ms = int(now * 1000)
        job = PortabilityJob(
            tenant_id=self.tenant,
            job_id=job_id,
            kind=kind,
            status="running",
            options=options,
            progress=progress or {},
            requested_by=by,
            started_at=ms,
            updated_at=ms,
        )
        return await self.save(job, new=True)

    async def get(self, job_id: str) -> PortabilityJob | None:
        found = await self.listed(None, job_id=job_id)
        return found[0] if found else None

    async def listed(
        self, kind: str | None = "export", limit: int = 50, *, job_id: str | None = None
    ) -> list[PortabilityJob]:
        """The tenant's jobs of `kind` (or the one `job_id`), newest first."""
        where, params = ("job_id = ?", [job_id]) if job_id else ("kind = ?", [kind])
        sql = f"SELECT * FROM portability_jobs WHERE tenant_id = ? AND {where} ORDER BY job_id DESC"
        found = await self.control.prepare(sql + " LIMIT ?").bind(self.tenant, *params, limit).all()
        return [
            PortabilityJob.model_validate(r | {k: json.loads(str(r[k])) for k in _JSON_FIELDS})
            for r in found.results
        ]


_FIXED = ("tenant_id", "job_id", "kind", "options", "requested_by", "started_at")
_JSON_FIELDS = ("options", "progress")


async def running_exports(control: D1Database, limit: int = 1) -> list[tuple[str, str]]:
    """(tenant, job) of unfinished exports, the one advanced longest ago first."""
    sql = (
        "SELECT tenant_id, job_id FROM portability_jobs WHERE status = 'running' "
        "AND kind = 'export' ORDER BY updated_at LIMIT ?"
    )
    result = await control.prepare(sql).bind(limit).all()
    return [(str(r["tenant_id"]), str(r["job_id"])) for r in result.results]


async def expire_exports(control: D1Database, cold: ObjectStore, now_ms: int) -> int:
    """Delete the parts of every export past its expiry and mark it `expired`; how many."""
    sql = (
        "SELECT tenant_id, job_id FROM portability_jobs WHERE kind = 'export' "
        "AND status IN ('complete', 'failed') AND expires_at <= ?"
    )
    expired = (
        "UPDATE portability_jobs SET status = 'expired', updated_at = ? "
        "WHERE tenant_id = ? AND job_id = ?"
    )
    result = await control.prepare(sql).bind(now_ms).all()
    for row in result.results:
        tenant, job_id = str(row["tenant_id"]), str(row["job_id"])
        listed = await cold.list(prefix=f"{EXPORT_ROOT}/{tenant}/{job_id}/")
        if listed.objects:
            await cold.delete([o.key for o in listed.objects])
        await control.prepare(expired).bind(now_ms, tenant, job_id).run()
    return len(result.results)


def part_key(tenant: str, job_id: str, part: int) -> str:
    return f"{EXPORT_ROOT}/{tenant}/{job_id}/part-{part:05d}.jsonl.gz"


@dataclass
class Exporter:
    """One tenant's exports: jobs in the primary database (`control`), rows from its shard
    (`db`), parts in R2 (`cold`)."""

    tenant: str
    db: D1Database
    control: D1Database
    cold: ObjectStore | None
    personal: PersonalData
    clock: Clock
    eraser: SubjectEraser

    def __post_init__(self) -> None:
        self.jobs = Jobs(self.control, self.tenant)

    def _now_ms(self) -> int:
        return int(self.clock.now() * 1000)

    def _require_cold(self) -> ObjectStore:
        if self.cold is None:
            raise ApiError(503, "cold_unavailable", "exports are written to the R2 bucket COLD")
        return self.cold

    async def start(self, by: str, personal: Personal = "sealed") -> PortabilityJob:
        """A new export job (not yet run: `advance` runs it). Asking for personal data
        opened is recorded as an event naming `by`."""
        self._require_cold()
        now = self.clock.now()
        job_id = new_ulid(now)
        count = 'SELECT COUNT(*) AS n FROM "{}" WHERE tenant_id = ?'
        counted = await self.db.batch(
            [self.db.prepare(count.format(t.name)).bind(self.tenant) for t in TABLES]
        )
        if personal == "opened":
            event = _opened_event(self.tenant, now, by, export_id=job_id)
            await EventLog(self.tenant, self.db).record(event)
        progress: dict[str, Any] = {"table": 0, "after": None, "part": 1, "records": 0, "bytes": 0}
        progress |= {"counts": {}, "estimate": sum(int(r.results[0]["n"]) for r in counted)}
        return await self.jobs.start(job_id, "export", {"personal": personal}, by, now, progress)

    async def advance(
        self,
        job_id: str,
        *,
        max_seconds: float = 20.0,
        on_part: Callable[[PortabilityJob], None] | None = None,
    ) -> PortabilityJob:
        """Write parts of job `job_id` until it is complete or `max_seconds` have passed
        (at least one part); resumes where its saved progress says."""
        started = time.monotonic()
        job = await self.job(job_id)
        while job.status == "running":
            try:
                job = await self._part(job)
            except Exception as exc:
                log.exception(
                    "export %s/%s: part %s failed", self.tenant, job_id, job.progress.get("part")
                )
                raise ApiError(502, "export_step_failed", f"{type(exc).__name__}: {exc}") from exc
            if on_part is not None:
                on_part(job)
            if time.monotonic() - started >= max_seconds:
                break
        return job

    async def _part(self, job: PortabilityJob) -> PortabilityJob:
        """Write the next part (or, once every table is read, the header) and save."""
        cold, progress = self._require_cold(), dict(job.progress)
        index, after = int(progress["table"]), progress["after"]
        counts: dict[str, int] = dict(progress["counts"])
        if index >= len(TABLES):
            header = HeaderRecord(
                tenant_id=self.tenant,
                exported_at=job.started_at,
                counts=counts,
                personal=job.options.get("personal", "sealed"),
                job_id=job.job_id,
            )
            await cold.put(
                part_key(self.tenant, job.job_id, 0), encode_lines([header.model_dump()])
            )
            now, kept = self._now_ms(), EXPORT_KEPT_DAYS * 86_400_000
            times = {"updated_at": now, "finished_at": now, "expires_at": now + kept}
            return await self.jobs.save(job.model_copy(update={"status": "complete", **times}))
        records: list[dict[str, Any]] = []
        while index < len(TABLES) and len(records) < PART_RECORDS:
            table = TABLES[index]
            want = min(PAGE_ROWS, PART_RECORDS - len(records))
            rows = await _rows(self.db, table, self.tenant, after=after, limit=want)
            records += [_as_record(table, self.tenant, r) for r in rows]
            counts[table.record] = counts.get(table.record, 0) + len(rows)
            if len(rows) < want or not table.key:
                index, after = index + 1, None
            else:
                after = [rows[-1][c] for c in table.key]
        if job.options.get("personal") == "opened":
            await _open_all(records, self.personal)
        data = encode_lines(records) if records else b""
        if records:  # before the progress names it: a crash repeats this part, same key
            await cold.put(part_key(self.tenant, job.job_id, int(progress["part"])), data)
        progress.update(
            table=index,
            after=after,
            counts=counts,
            part=int(progress["part"]) + (1 if records else 0),
            records=int(progress["records"]) + len(records),
            bytes=int(progress["bytes"]) + len(data),
        )
        saved = job.model_copy(update={"progress": progress, "updated_at": self._now_ms()})
        return await self.jobs.save(saved)

    async def job(self, job_id: str) -> PortabilityJob:
        """Export `job_id` of this tenant; 404 `export_not_found`."""
        job = await self.jobs.get(job_id)
        if job is None or job.kind != "export":
            raise ApiError(404, "export_not_found", "no such export of this tenant")
        return job

    async def part(self, job_id: str, part: int) -> bytes:
        """Part `part` of a finished export (gzip JSON Lines; part 0 is the header)."""
        job = await self.job(job_id)
        if job.status == "expired":
            raise ApiError(404, "export_not_found", "the export has expired")
        if job.status != "complete":
            raise ApiError(409, "export_running", "the export is not finished yet")
        body = await self._require_cold().get(part_key(self.tenant, job_id, part))
        if body is None:
            raise ApiError(404, "part_not_found", f"the export has no part {part}")
        return body.data

    async def subject(
        self, subject: str, *, by: str, personal: Personal = "sealed"
    ) -> list[dict[str, Any]]:
        """Everything about `subject` (what its erase would remove: rows in every tier, the
        archived rows, working-memory entries) as records, the header first; 422
        `invalid_path` for a subject no erase takes."""
        eraser = self.eraser
        found = await eraser.find(subject)
        matcher = SubjectMatcher(subject, found)
        records: list[dict[str, Any]] = []
        wanted = {"run": found.runs, "episode": found.episodes, "fact": found.facts}
        for kind, ids in wanted.items():
            for chunk in chunks(sorted(ids)):
                rows = await _rows(self.db, TABLE[kind], self.tenant, ids=chunk, limit=len(chunk))
                records += [_as_record(TABLE[kind], self.tenant, r) for r in rows]
        for kind in ("provenance", "link", "event"):
            after: list[Any] | None = None
            while rows := await _rows(self.db, TABLE[kind], self.tenant, after=after):
                for row in rows:
                    if _names(kind, row, matcher):
                        records.append(_as_record(TABLE[kind], self.tenant, row))
                after = [rows[-1][c] for c in TABLE[kind].key]
        for key in await eraser.archive_keys():
            parsed, body = parse_archive_key(key), await self._require_cold().get(key)
            if parsed is None or body is None:
                continue
            records += [
                _as_record(ARCHIVED[parsed[1]], self.tenant, row, archived=True)
                for row in decode_archive(body.data)
                if matcher.archived(parsed[1], row)
            ]
        records += [
            {"record": "working", "tenant_id": self.tenant, "key": k, "value": v}
            for k, v in (await eraser.working_traces(matcher)).items()
        ]
        if personal == "opened":
            await _open_all(records, self.personal)
            event = _opened_event(self.tenant, self.clock.now(), by, subject_export=True)
            await EventLog(self.tenant, self.db).record(event)
        header = HeaderRecord(
            tenant_id=self.tenant,
            exported_at=self._now_ms(),
            counts=Counter(r["record"] for r in records),
            personal=personal,
            subject=subject,
        )
        return [header.model_dump(), *records]


def _names(kind: str, row: Row, matcher: SubjectMatcher) -> bool:
    """Whether a provenance, link or event row belongs to a subject's export."""
    ids = matcher.found.facts | matcher.found.episodes | matcher.found.runs
    if kind == "provenance":
        return row["fact_id"] in ids or row["source_id"] in ids
    if kind == "link":
        return row["from_fact_id"] in ids or row["to_fact_id"] in ids
    return matcher.event(row)


# --------------------------------------------------------------------------- imports


class Refusal(BaseModel):
    line: int
    record: str
    id: str
    code: str
    reasons: list[str] = []


class _Refused(Exception):
    def __init__(self, code: str, *reasons: str) -> None:
        self.code, self.reasons = code, list(reasons)


class ImportReport(BaseModel):
    """What an import wrote, found already there (`unchanged`), found as the same fact under
    another id (`merged`) or refused, per record kind; `refusals` lists the first ones."""

    tenant_id: str
    format: ImportFormat
    dry_run: bool
    lines: int = 0
    written: dict[str, int] = {}
    unchanged: dict[str, int] = {}
    merged: dict[str, int] = {}
    refused: dict[str, int] = {}
    refusals: list[Refusal] = []
    job_id: str | None = None
    resumed_at_line: int = 0

    def count(self, outcome: str, kind: str, n: int = 1) -> None:
        counts: dict[str, int] = getattr(self, outcome)
        counts[kind] = counts.get(kind, 0) + n

    def refuse(self, line: int, kind: str, item_id: str, refused: _Refused) -> None:
        self.count("refused", kind)
        if len(self.refusals) < MAX_REFUSALS_LISTED:
            self.refusals.append(
                Refusal(
                    line=line, record=kind, id=item_id, code=refused.code, reasons=refused.reasons
                )
            )

    def progress(self) -> dict[str, Any]:
        return self.model_dump(exclude={"tenant_id", "format", "dry_run", "job_id"})


def bad_input(status: int, code: str, line: int, message: str, **details: Any) -> ApiError:
    return ApiError(status, code, f"line {line}: {message}", {"line": line, **details})


def parse_line(line: bytes | str, number: int, checked: bool = False) -> Any:
    """One line as JSON under the storage limits (`checked`: already was); None if blank."""
    size = len(line.encode("utf-8") if isinstance(line, str) else line)
    if size > MAX_RECORD_BYTES:
        raise bad_input(
            413,
            "record_too_large",
            number,
            f"{size} bytes; a record is at most {MAX_RECORD_BYTES}",
            bytes=size,
            limit=MAX_RECORD_BYTES,
        )
    if not line.strip():
        return None
    try:
        return json.loads(line) if checked else loads_bounded(line, STORAGE_LIMITS)
    except JsonLimitError as exc:
        raise bad_input(exc.status, exc.code, number, exc.message) from None
    except ValueError as exc:
        raise bad_input(422, "malformed_line", number, f"not JSON: {exc}") from None


class Mem0Memory(BaseModel):
    """One memory as mem0 exports it (`get_all`'s results; docs.mem0.ai `get memory`)."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    memory: str = Field(min_length=1)
    user_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    hash: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: datetime | None = None


class TextLine(BaseModel):
    """One line of the plain text format (a JSON string is `{"text": ...}`)."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1)
    subject: str | None = None
    metadata: dict[str, Any] = {}
    valid_from: float | None = Field(default=None, description="epoch seconds")
    session: str | None = None


def mem0_fact(m: Mem0Memory) -> FactInput:
    """mem0's record as a fact (docs/portability.md "From mem0"): the text is the content, the
    user (else agent, else app) the subject, its run the session, its ids kept in metadata."""
    ids = {
        k: v
        for k in ("id", "user_id", "agent_id", "app_id", "run_id", "hash")
        if (v := getattr(m, k))
    }
    return FactInput(
        content=m.memory,
        subject=m.user_id or m.agent_id or m.app_id or DEFAULT_SUBJECT,
        metadata={**(m.metadata or {}), "mem0": ids},
        source="import:mem0",
        session=m.run_id,
        valid_from=m.created_at.timestamp() if m.created_at else None,
    )


def text_fact(t: TextLine) -> FactInput:
    fields = t.model_dump(exclude={"text"}) | {"subject": t.subject or DEFAULT_SUBJECT}
    return FactInput(content=t.text, source="import:text", **fields)


def records(
    lines: Iterable[bytes | str], fmt: ImportFormat, checked: bool = False
) -> Iterator[tuple[int, Any]]:
    """(line number, record) of every line, checked: a `FactInput` for mem0 and text, the
    native record otherwise (the header first). Raises the first bad line's `ApiError`."""
    header: HeaderRecord | None = None
    for number, line in enumerate(lines, start=1):
        data = parse_line(line, number, checked)
        try:
            if data is None:
                continue
            if fmt == "text":
                line_ = TextLine.model_validate({"text": data} if isinstance(data, str) else data)
                yield number, text_fact(line_)
                continue
            if fmt == "mem0":
                found = data.get("results", data) if isinstance(data, dict) else data
                for item in found if isinstance(found, list) else [found]:
                    yield number, mem0_fact(Mem0Memory.model_validate(item))
                continue
            if not isinstance(data, dict):
                raise bad_input(422, "malformed_line", number, "a record is a JSON object")
            if header is None and data.get("record") != "header":
                raise bad_input(422, "missing_header", number, "the first record is a header")
            if header is None and data.get("version") != VERSION:
                raise bad_input(
                    422,
                    "unsupported_format_version",
                    number,
                    f"format version {data.get('version')!r} is not one this deployment reads",
                    supported=[VERSION],
                )
            record = RECORDS.validate_python(data)
        except ValidationError as exc:
            problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()][:10]
            raise bad_input(
                422,
                "invalid_record",
                number,
                "the record does not match the format",
                problems=problems,
            ) from None
        if isinstance(record, HeaderRecord) and header is not None:
            raise bad_input(422, "invalid_record", number, "a second header")
        header = header or record
        if record.tenant_id != header.tenant_id:
            raise bad_input(
                422,
                "record_tenant_mismatch",
                number,
                f"a record of tenant {record.tenant_id!r} in an export of {header.tenant_id!r}",
                tenant=record.tenant_id,
            )
        yield number, record


SEALED_ELSEWHERE = (
    "personal fields sealed under the source tenant's keys open nowhere else: export them "
    "opened (an operator's event) to import them here"
)


@dataclass
class Importer:
    """Imports into one tenant (see the module docstring)."""

    tenant: str
    db: D1Database
    gate: WriteGate
    personal: PersonalData
    clock: Clock
    jobs: Jobs
    semantic: Callable[[], SemanticMemory] | None = None
    feed: ChangeFeed | None = None

    async def run(
        self,
        lines: Callable[[], Iterable[bytes | str]],
        fmt: ImportFormat = "agent-memory",
        *,
        dry_run: bool = False,
        by: str = "",
        job_id: str | None = None,
    ) -> ImportReport:
        """Check every line of `lines()`, then write (unless `dry_run`) chunk by chunk. With a
        `job_id`, progress is saved after each chunk and a repeat resumes after it."""
        for _ in records(lines(), fmt):  # every line checked before anything is written
            pass
        report = ImportReport(tenant_id=self.tenant, format=fmt, dry_run=dry_run, job_id=job_id)
        job = None
        if job_id and not dry_run:
            job = await self.jobs.start(job_id, "import", {"format": fmt}, by, self.clock.now())
            report = report.model_copy(update={**job.progress, "resumed_at_line": 0})
            if job.status == "complete":
                return report
            report.resumed_at_line = report.lines
        header: Any = None
        chunk: list[tuple[int, Any]] = []
        for number, record in records(lines(), fmt, checked=True):
            if isinstance(record, HeaderRecord):
                header = record
            elif number > report.resumed_at_line:
                chunk.append((number, record))
            if len(chunk) >= IMPORT_CHUNK:
                await self._chunk(chunk, header, report, job)
                chunk = []
        await self._chunk(chunk, header, report, job)
        if not dry_run:
            await self._finish(report, by, job)
        return report

    async def _chunk(
        self,
        chunk: list[tuple[int, Any]],
        header: HeaderRecord,
        report: ImportReport,
        job: PortabilityJob | None,
    ) -> None:
        if chunk:
            if report.format == "agent-memory":
                await self._native(chunk, header, report)
            else:
                await self._facts(chunk, report)
            report.lines = chunk[-1][0]
        await self._save(job, report)

    async def _save(
        self, job: PortabilityJob | None, report: ImportReport, end: bool = False
    ) -> None:
        """The job's progress after a chunk (`end`: the import is complete)."""
        if job is not None:
            now = int(self.clock.now() * 1000)
            update = {"progress": report.progress(), "updated_at": now}
            if end:
                update |= {"status": "complete", "finished_at": now}
            await self.jobs.save(job.model_copy(update=update))

    def _check(self, proposal: Any) -> None:
        """Raise `_Refused` with the policy's reasons when `proposal` may not be written."""
        try:
            self.gate.check(proposal)
        except WriteDenied as exc:
            reasons = [f"{v.code}: {v.message}" for v in exc.violations]
            raise _Refused("memory_write_denied", *reasons) from None

    async def _existing(self, table: _Table, keys: Sequence[tuple[Any, ...]]) -> set[Any]:
        """Which of `keys` the tenant's rows of `table` already have."""
        if not table.key:  # one row per tenant
            return {(self.tenant,)} if await _rows(self.db, table, self.tenant, limit=1) else set()
        found: set[tuple[Any, ...]] = set()
        width = len(table.key)
        for part in chunks(list(keys), IDS_PER_STATEMENT // width):
            values = ", ".join(f"({', '.join('?' * width)})" for _ in part)
            sql = (
                f'SELECT {_quoted(table.key)} FROM "{table.name}" WHERE tenant_id = ? '
                f"AND ({_quoted(table.key)}) IN (VALUES {values})"
            )
            rows = await self.db.prepare(sql).bind(self.tenant, *(v for k in part for v in k)).all()
            found |= {tuple(r[c] for c in table.key) for r in rows.results}
        return found

    async def _same_facts(self, facts: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which (subject, full content hash) pairs the tenant's facts already have (rows hold
        the hash cut to `STORED_HASH_CHARS`)."""
        found: set[tuple[str, str]] = set()
        sql = (
            "SELECT subject, content_hash FROM semantic_facts WHERE tenant_id = ? AND "
            "content_hash IN (SELECT value FROM json_each(?))"
        )
        for part in chunks(list(facts)):
            cut = json.dumps([h[:STORED_HASH_CHARS] for _, h in part])
            rows = await self.db.prepare(sql).bind(self.tenant, cut).all()
            stored = {(str(r["subject"]), str(r["content_hash"])) for r in rows.results}
            found |= {(s, d) for s, d in part if (s, d[:STORED_HASH_CHARS]) in stored}
        return found

    async def _native(
        self, chunk: list[tuple[int, Any]], header: HeaderRecord, report: ImportReport
    ) -> None:
        statements: list[D1Statement] = []
        written: dict[str, list[str]] = {}
        for table in TABLES:
            mine = [(n, r) for n, r in chunk if r.record == table.record]
            keys = [tuple(getattr(r, c) for c in table.key) or (self.tenant,) for _, r in mine]
            there = await self._existing(table, keys) if mine else set()
            fact = table.record == "fact"
            hashes = [(r.subject, content_hash(r.content)) if fact else None for _, r in mine]
            same = await self._same_facts([h for h in hashes if h]) if fact else set()
            for (number, record), key, digest in zip(mine, keys, hashes, strict=True):
                if key in there or digest in same:
                    report.count("unchanged" if key in there else "merged", table.record)
                    continue
                try:
                    row = await self._row(table, record, str(key[0]), header, report.dry_run)
                except _Refused as refused:
                    report.refuse(number, table.record, str(key[0]), refused)
                    continue
                report.count("written", table.record)
                statements.append(self._insert(table, row))
                if table.record in ("fact", "episode") and table.tier:
                    written.setdefault(table.tier, []).append(str(key[0]))
        not_imported = _Refused("not_importable", "working memory is not imported: it expires")
        for number, record in chunk:
            if record.record == "working":
                report.refuse(number, "working", record.key, not_imported)
        if report.dry_run:
            return
        await run_batches(self.db, statements)
        if self.semantic is not None and written.get("semantic"):
            semantic = self.semantic()
            while await semantic.complete_pending(1000) > 0:  # vectors for the facts now
                pass
            # Activation stamps its own time: the facts keep the one they were exported with.
            new = set(written["semantic"])
            kept = {
                r.fact_id: r.updated_at for _, r in chunk if r.record == "fact" and r.fact_id in new
            }
            sql = (
                "UPDATE semantic_facts SET updated_at = json_extract(?2, '$.' || fact_id) "
                "WHERE tenant_id = ?1 AND fact_id IN (SELECT key FROM json_each(?2))"
            )
            await self.db.prepare(sql).bind(self.tenant, json.dumps(kept)).run()
        if self.feed is not None:
            changes = [
                ("written", {"tier": t, "ids": ids, "op": "imported"}) for t, ids in written.items()
            ]
            self.feed.publish(self.tenant, changes)

    async def _row(
        self, table: _Table, record: Any, item_id: str, header: HeaderRecord, dry_run: bool
    ) -> dict[str, Any]:
        """The row to insert for `record`; raises `_Refused` (the policy, personal data)."""
        row = record.model_dump(include=set(table.columns))
        field = {"fact": "metadata", "episode": "data"}.get(table.record)
        if field is not None:
            self._check(fact_proposal(row) if field == "metadata" else episode_proposal(row))
            value = row[field]
            if sealed_values(value):  # its own tenant's keys still open it; no other's do
                if header.tenant_id != self.tenant:
                    raise _Refused("sealed_for_another_tenant", SEALED_ELSEWHERE)
            elif personal_marking(value) is not None and not self.personal.can_seal:
                raise _Refused(
                    "personal_data_unavailable", "no key-encryption key is set (MEMORY_PII_KEKS)"
                )
            elif not dry_run:
                row[field] = await self.personal.seal(record.subject, item_id, field, value)
        for column in table.json:
            if column == "payload":
                row[column] = stored_payload(row["kind"], row[column])
            elif row.get(column) is not None:
                row[column] = json.dumps(row[column], separators=(",", ":"), ensure_ascii=False)
        if field is not None:  # a fact's row keeps its hash cut, as the semantic tier writes it
            digest = content_hash(record.content)
            row["content_hash"] = digest[:STORED_HASH_CHARS] if field == "metadata" else digest
        if field == "metadata" and row["status"] == "active":  # active once its vector is here
            row["status"] = "pending_vector"
        return {"tenant_id": self.tenant, **row}

    def _insert(self, table: _Table, row: dict[str, Any]) -> D1Statement:
        marks = ", ".join("?" * len(row))
        return self.db.prepare(
            f'INSERT INTO "{table.name}" ({_quoted(row)}) VALUES ({marks}) ON CONFLICT DO NOTHING'
        ).bind(*row.values())

    async def _facts(self, chunk: list[tuple[int, Any]], report: ImportReport) -> None:
        """mem0 and text lines: facts learned through the semantic tier's write path."""
        same = await self._same_facts([(f.subject, content_hash(f.content)) for _, f in chunk])
        todo: list[FactInput] = []
        for number, fact in chunk:
            try:
                self._check(fact_proposal(fact.model_dump()))
            except _Refused as refused:
                report.refuse(number, "fact", fact.subject, refused)
                continue
            if (fact.subject, content_hash(fact.content)) in same:
                report.count("merged", "fact")
            elif report.dry_run:
                report.count("written", "fact")
            else:
                todo.append(fact)
        if todo and self.semantic is None:
            raise ApiError(503, "semantic_unavailable", "importing facts needs the semantic tier")
        for batch in chunks(todo, 100):
            assert self.semantic is not None
            for learned in await self.semantic().learn_many(list(batch)):
                report.count("written" if learned.created else "merged", "fact")

    async def _finish(self, report: ImportReport, by: str, job: PortabilityJob | None) -> None:
        """One `memory_written` event per tier the import wrote (`op: imported`)."""
        now = self.clock.now()
        tiers: dict[EventTier, int] = {}
        for kind, n in report.written.items():
            if tier := TABLE[kind].tier:
                tiers[tier] = tiers.get(tier, 0) + n
        payload = {"op": "imported", "format": report.format, "by": by, "job_id": report.job_id}
        await EventLog(self.tenant, self.db).record_many(
            [
                memory_written(
                    tenant_id=self.tenant,
                    tier=tier,
                    now=now,
                    content_hash=None,
                    agent_type="operator",
                    payload={**payload, "records": n},
                )
                for tier, n in tiers.items()
            ]
        )
        await self._save(job, report, end=True)
