"""Tiers 2 and 4, what agents did and how they do it (docs/agent-runtime.md, "Memory tiers"):
episodes and runs (D1), and the workflows runs follow (a bandit in the Durable Object's SQLite,
packs in D1).

`EpisodicStore` is bound to one tenant and every statement starts its WHERE clause with
`tenant_id = ?` (DESIGN invariant 2); its writes are idempotent. `EpisodicWriter` runs them off
the response path, in submission order, with retries; one that still fails is logged at ERROR
and handed to `on_failure`. `ProceduralMemory` is Thompson sampling over Beta posteriors,
`record_outcome` one UPDATE; `WorkflowPacks` carries a promoted workflow to every instance of an
agent type (promoting a name again adds the next version and deprecates the one before).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.cursors import decode_pair, encode_cursor_value
from agent_memory.governance.agent_types import WorkflowSpec
from agent_memory.governance.personal_data import PersonalData, Sealable
from agent_memory.governance.writes import EventLog, WriteGate, WriteProposal, episode_proposal
from agent_memory.ids import IDS_PER_STATEMENT, chunks, content_hash, count_then_delete
from bindings.ports.background import BackgroundTasks
from bindings.ports.d1 import D1Database, D1Error, D1Statement
from bindings.ports.do_sql import SqlStorage
from bindings.ports.sql import Row, SqlValue
from http_messages import CodedError

RECENT_EPISODES = 10
MAX_EPISODE_CHARS = 32_768
MAX_PAGE_SIZE = 100
# interrupted: the turn never ended (its Durable Object stopped mid-turn).
RunStatus = Literal["running", "completed", "failed", "interrupted"]
EpisodeKind = Literal["observation", "action", "outcome", "message", "summary"]
WriteOp = Literal["start_run", "append_episode", "complete_run", "fail_run"]
EPISODE_LIMIT_CODE = "episode_limit_reached"


class EpisodeLimitReached(CodedError):
    """The tenant is at its episode limit (100K, the schema's trigger): the episode was
    refused and retrying cannot help (docs/lifecycle.md, "At the limit")."""

    status, code = 409, EPISODE_LIMIT_CODE

    def __init__(self, tenant: str, detail: str) -> None:
        super().__init__(
            f"{EPISODE_LIMIT_CODE}: tenant {tenant!r} is at its episode limit; new episodes "
            f"are refused until the prune or an erase frees room ({detail})"
        )
        self.tenant = tenant


class Episode(BaseModel):
    model_config = ConfigDict(frozen=True)

    episode_id: str
    run_id: str
    agent_type: str
    instance_id: str
    kind: EpisodeKind
    subject: str | None = None
    content: str = Field(min_length=1, max_length=MAX_EPISODE_CHARS)
    data: dict[str, Any] = Field(default_factory=dict)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    created_at: int

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)


class RunRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    agent_type: str
    instance_id: str
    status: RunStatus
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] | None = None
    error: str | None = None
    steps: int = 0
    started_at: int
    finished_at: int | None = None


class RunPage(BaseModel):
    runs: list[RunRecord]
    next_cursor: str | None = None


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def run_from_row(row: Row) -> RunRecord:
    output = json.loads(row["output"]) if row.get("output") else None
    return RunRecord.model_validate(
        {**row, "input": json.loads(row["input"] or "{}"), "output": output}
    )


def episode_from_row(row: Row, data: Mapping[str, Any] | None = None) -> Episode:
    """The episode of `row` as stored; `open_episodes` passes the opened `data`."""
    opened = dict(data) if data is not None else json.loads(row["data"] or "{}")
    return Episode.model_validate({**row, "data": opened})


async def open_episodes(rows: Sequence[Row], personal: PersonalData) -> list[Episode]:
    """The episodes of `rows` with their sealed personal data opened: every read of episode
    rows (warm or archived) goes through here (docs/personal-data.md)."""
    items = [
        Sealable(row.get("subject"), str(row["episode_id"]), json.loads(row["data"] or "{}"))
        for row in rows
    ]
    opened = await personal.open_many("data", items)
    return [episode_from_row(row, data) for row, data in zip(rows, opened, strict=True)]


def encode_cursor(started_at: int, run_id: str) -> str:
    return encode_cursor_value({"s": started_at, "r": run_id})


def decode_cursor(cursor: str) -> tuple[int, str]:
    return decode_pair(cursor, "s", "r")


log = logging.getLogger(__name__)
_EPISODE_COLUMNS = (
    "episode_id, run_id, agent_type, instance_id, kind, subject, content, data, importance, "
    "created_at"
)

_RUN_COLUMNS = (
    "run_id, agent_type, instance_id, status, input, output, error, steps, started_at, finished_at"
)


# A keyed episode (the memory API's) lives until its `data.expires_at` (epoch ms).
_LIVE = "(json_extract(data, '$.expires_at') IS NULL OR json_extract(data, '$.expires_at') > ?)"


def brief_figures(retention_days: str) -> str:
    """The daily brief's figures on this store's tables, as scalar subqueries (?1 tenant, ?2
    now in ms; `lifecycle.brief`): episodes (the trigger-kept counter), those older than
    `retention_days` (an SQL expression), runs."""
    return (
        "(SELECT episodes FROM memory_tenant_stats WHERE tenant_id = ?1) AS episodes, "
        "(SELECT COUNT(*) FROM memory_episodes WHERE tenant_id = ?1 AND created_at < "
        f"?2 - {retention_days} * 86400000) AS episodes_past_retention, "
        "(SELECT COUNT(*) FROM agent_runs WHERE tenant_id = ?1) AS runs"
    )


class EpisodicStore:
    """Episodic reads and writes for one tenant."""

    def __init__(
        self,
        db: D1Database,
        tenant: str,
        *,
        gate: WriteGate | None = None,
        personal: PersonalData | None = None,
    ) -> None:
        self._db = db
        self.tenant = tenant
        self.gate = gate or WriteGate(tenant, events=EventLog(tenant, db))
        # Seals the personal fields of `data` on write and opens them on read; without one,
        # marked personal data is refused (never stored in plaintext).
        self.personal = personal or PersonalData(tenant, None, None)

    def _sql(self, sql: str, params: tuple[SqlValue, ...]) -> D1Statement:
        """`sql` bound to the tenant (always its first parameter), then `params`."""
        return self._db.prepare(sql).bind(self.tenant, *params)

    def proposal(self, episode: Episode) -> WriteProposal:
        """The write proposal of `episode` (what the policy checks and the event hashes). An
        episode without personal data is its own event (`WriteGate.event_in_row`): its row
        says all the compact event would; a sealed one keeps a full event."""
        proposal = episode_proposal(
            dict(episode), agent_type=episode.agent_type, run_id=episode.run_id
        )
        return proposal.model_copy(update={"in_row": proposal.personal_fields() is None})

    async def start_run(
        self,
        *,
        run_id: str,
        agent_type: str,
        instance_id: str,
        input: dict[str, Any],
        started_at: int,
    ) -> None:
        await self._sql(
            "INSERT INTO agent_runs (tenant_id, run_id, agent_type, instance_id, status, "
            "input, steps, started_at) VALUES (?, ?, ?, ?, 'running', ?, 0, ?) "
            "ON CONFLICT (tenant_id, run_id) DO NOTHING",
            (run_id, agent_type, instance_id, to_json(input), started_at),
        ).run()

    async def append_episode(self, episode: Episode) -> None:
        """Insert the episode, which is its own `memory_written` event (migration 0019), or
        then its event (both idempotent: the event id is the episode id, so a retry records
        it once). Raises `WriteDenied` (policy) or `EpisodeLimitReached` (tenant full), and
        then nothing is written."""
        proposal = self.proposal(episode)
        self.gate.check(proposal)
        # Sealed here, once: the row holds only ciphertext of the personal fields.
        data = await self.personal.seal(episode.subject, episode.episode_id, "data", episode.data)
        try:
            await self._sql(
                "INSERT INTO memory_episodes (tenant_id, episode_id, run_id, agent_type, "
                "instance_id, kind, subject, content, data, importance, content_hash, "
                "created_at, event_in_row) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, episode_id) DO NOTHING",
                (
                    episode.episode_id,
                    episode.run_id,
                    episode.agent_type,
                    episode.instance_id,
                    episode.kind,
                    episode.subject,
                    episode.content,
                    to_json(data),
                    episode.importance,
                    episode.content_hash,
                    episode.created_at,
                    int(self.gate.event_in_row(proposal)),
                ),
            ).run()
        except D1Error as exc:
            if EPISODE_LIMIT_CODE in str(exc):
                raise EpisodeLimitReached(self.tenant, str(exc)) from exc
            raise
        event = self.gate.event_statement(proposal, episode.episode_id)
        if event is not None:
            await event.run()
        self.gate.announce([proposal], [episode.episode_id])

    async def finish_run(self, run: RunRecord) -> None:
        """`complete_run` / `fail_run`: upsert the finished row (status from `run`). An
        `interrupted` one changes only a row still `running` (a finish that landed wins)."""
        if run.status == "running" or run.finished_at is None:
            raise ValueError("finish_run needs a finished run (status and finished_at)")
        await self._sql(
            "INSERT INTO agent_runs (tenant_id, run_id, agent_type, instance_id, status, "
            "input, output, error, steps, started_at, finished_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, run_id) DO UPDATE SET status = excluded.status, "
            "output = excluded.output, error = excluded.error, steps = excluded.steps, "
            "finished_at = excluded.finished_at "
            "WHERE excluded.status != 'interrupted' OR agent_runs.status = 'running'",
            (
                run.run_id,
                run.agent_type,
                run.instance_id,
                run.status,
                to_json(run.input),
                None if run.output is None else to_json(run.output),
                run.error,
                run.steps,
                run.started_at,
                run.finished_at,
            ),
        ).run()

    async def recent_episodes(self, agent_type: str, limit: int = RECENT_EPISODES) -> list[Episode]:
        """The newest `limit` episodes of (tenant, agent_type), newest first."""
        result = await self._sql(
            f"SELECT {_EPISODE_COLUMNS} FROM memory_episodes "
            "WHERE tenant_id = ? AND agent_type = ? "
            "ORDER BY created_at DESC, episode_id DESC LIMIT ?",
            (agent_type, limit),
        ).all()
        return await open_episodes(result.results, self.personal)

    async def instance_rows(
        self, agent_type: str, instance_id: str, *, now_ms: int, limit: int, offset: int = 0
    ) -> list[Row]:
        """The agent's live episode rows, newest first (the memory API's listing): keyed
        ones (`data.memory_key`) until their `data.expires_at`, and every run episode."""
        result = await self._sql(
            f"SELECT {_EPISODE_COLUMNS} FROM memory_episodes WHERE tenant_id = ? "
            f"AND agent_type = ? AND instance_id = ? AND {_LIVE} "
            "ORDER BY created_at DESC, episode_id DESC LIMIT ? OFFSET ?",
            (agent_type, instance_id, now_ms, limit, offset),
        ).all()
        return list(result.results)

    async def delete_keyed(
        self, agent_type: str, instance_id: str, key: str, *, keep: str = ""
    ) -> int:
        """Delete the agent's keyed episodes named `key` (but `keep`); how many went."""
        result = await self._sql(
            "DELETE FROM memory_episodes WHERE tenant_id = ? AND agent_type = ? "
            "AND instance_id = ? AND json_extract(data, '$.memory_key') = ? AND episode_id != ?",
            (agent_type, instance_id, key, keep),
        ).run()
        return int(result.meta.changes or 0)

    async def namespaced_row(self, episode_id: str, namespace_key: str) -> Row | None:
        """The row of episode `episode_id` in the namespace `namespace_key` (the hot/warm/cold
        client's warm read: migration 0010's `namespace_key`), or None."""
        return await self._sql(
            f"SELECT tenant_id, {_EPISODE_COLUMNS}, content_hash, namespace_key "
            "FROM memory_episodes WHERE tenant_id = ? AND episode_id = ? AND namespace_key = ?",
            (episode_id, namespace_key),
        ).first()

    async def delete_namespaced(self, episode_id: str, namespace_key: str) -> None:
        await self._sql(
            "DELETE FROM memory_episodes WHERE tenant_id = ? AND episode_id = ? "
            "AND namespace_key = ?",
            (episode_id, namespace_key),
        ).run()

    async def episodes_by_id(self, episode_ids: Sequence[str]) -> list[Episode]:
        """The tenant's episodes among `episode_ids` that still exist, in the order given."""
        wanted = list(dict.fromkeys(episode_ids))
        rows: list[Row] = []
        for chunk in chunks(wanted, IDS_PER_STATEMENT):
            marks = ", ".join("?" for _ in chunk)
            result = await self._sql(
                f"SELECT {_EPISODE_COLUMNS} FROM memory_episodes "
                f"WHERE tenant_id = ? AND episode_id IN ({marks})",
                (*chunk,),
            ).all()
            rows.extend(result.results)
        found = {e.episode_id: e for e in await open_episodes(rows, self.personal)}
        return [found[i] for i in wanted if i in found]

    async def recent_rows(self, limit: int) -> list[Row]:
        """The tenant's newest `limit` episode rows, as stored (the reconciler's promotion
        reads them; sealed fields stay sealed)."""
        result = await self._sql(
            "SELECT episode_id, subject, kind, content, data, importance, created_at "
            "FROM memory_episodes WHERE tenant_id = ? ORDER BY created_at DESC LIMIT ?",
            (limit,),
        ).all()
        return list(result.results)

    async def subject_traces(self, subject: str) -> tuple[list[Row], set[str]]:
        """Traces of `subject` (a subject erase): the episodes about it or naming it
        (`episode_id`, `run_id`, `content_hash`), and the runs whose input, output or error
        names it; both also when their agent instance's id names it."""
        episodes = await self._sql(
            "SELECT episode_id, run_id, content_hash FROM memory_episodes WHERE tenant_id = ? "
            "AND (subject = ? OR instr(content, ?) > 0 OR instr(data, ?) > 0 "
            "OR instr(instance_id, ?) > 0)",
            (subject, subject, subject, subject),
        ).all()
        runs = await self._sql(
            "SELECT run_id FROM agent_runs WHERE tenant_id = ? AND (instr(input, ?) > 0 "
            "OR instr(COALESCE(output, ''), ?) > 0 OR instr(COALESCE(error, ''), ?) > 0 "
            "OR instr(instance_id, ?) > 0)",
            (subject, subject, subject, subject),
        ).all()
        return list(episodes.results), {str(row["run_id"]) for row in runs.results}

    async def delete_episodes(self, episode_ids: Sequence[str]) -> int:
        return await count_then_delete(
            self._db, "memory_episodes", "episode_id", self.tenant, episode_ids
        )

    async def delete_runs(self, run_ids: Sequence[str]) -> int:
        return await count_then_delete(self._db, "agent_runs", "run_id", self.tenant, run_ids)

    async def episodes_for_run(self, run_id: str) -> list[Episode]:
        result = await self._sql(
            f"SELECT {_EPISODE_COLUMNS} FROM memory_episodes "
            "WHERE tenant_id = ? AND run_id = ? ORDER BY created_at, episode_id",
            (run_id,),
        ).all()
        return await open_episodes(result.results, self.personal)

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = await self._sql(
            f"SELECT {_RUN_COLUMNS} FROM agent_runs WHERE tenant_id = ? AND run_id = ?", (run_id,)
        ).first()
        return None if row is None else run_from_row(row)

    async def list_runs(
        self,
        *,
        agent_type: str | None = None,
        status: RunStatus | None = None,
        cursor: str | None = None,
        limit: int = 20,
    ) -> RunPage:
        """Runs newest first, `limit` per page; pass `next_cursor` back for the next page."""
        limit = max(1, min(limit, MAX_PAGE_SIZE))
        clauses = ["tenant_id = ?"]
        params: list[SqlValue] = []
        if agent_type is not None:
            clauses.append("agent_type = ?")
            params.append(agent_type)
        if status is not None:
            clauses.append("status = ?")
            params.append(status)
        if cursor is not None:
            started_at, run_id = decode_cursor(cursor)
            clauses.append("(started_at < ? OR (started_at = ? AND run_id < ?))")
            params.extend([started_at, started_at, run_id])
        result = await self._sql(
            f"SELECT {_RUN_COLUMNS} FROM agent_runs WHERE {' AND '.join(clauses)} "
            "ORDER BY started_at DESC, run_id DESC LIMIT ?",
            (*params, limit + 1),
        ).all()
        runs = [run_from_row(row) for row in result.results]
        next_cursor = None
        if len(runs) > limit:
            runs = runs[:limit]
            next_cursor = encode_cursor(runs[-1].started_at, runs[-1].run_id)
        return RunPage(runs=runs, next_cursor=next_cursor)


class FailedWrite(BaseModel):
    """An episodic write that exhausted its retries: everything needed to replay it."""

    op: WriteOp
    run_id: str
    payload: dict[str, Any]
    error: str
    attempts: int


Sleep = Callable[[float], Awaitable[None]]
FailureSink = Callable[[FailedWrite], None]


class Outbox(Protocol):
    """Writes queued but not yet settled (the Durable Object's SQLite): `add` runs before the
    caller answers, so an acknowledged write survives the process dying; `done` forgets it once
    it landed or went to the failure sink; `EpisodicWriter.replay` re-queues the rest after a
    restart (every write is idempotent, so one that had landed is harmless)."""

    def add(self, op: WriteOp, run_id: str, payload: dict[str, Any]) -> int: ...

    def done(self, seq: int) -> None: ...


class PendingWrite(BaseModel):
    """A write an outbox still holds: its sequence number and what to replay."""

    seq: int
    op: WriteOp
    run_id: str
    payload: dict[str, Any]


DEFAULT_ATTEMPTS = 4
DEFAULT_BASE_DELAY = 0.25  # 0.25 s, 0.5 s, 1 s between attempts: well inside waitUntil's 30 s


class EpisodicWriter:
    """Queues episodic writes off the response path, in order, with retries."""

    def __init__(
        self,
        store: EpisodicStore,
        background: BackgroundTasks,
        *,
        on_failure: FailureSink | None = None,
        sleep: Sleep = asyncio.sleep,
        outbox: Outbox | None = None,
    ) -> None:
        self.store = store
        self._outbox = outbox
        self._background = background
        self._on_failure = on_failure
        self._sleep = sleep
        self._tail: asyncio.Future[None] | None = None

    def start_run(self, run: RunRecord) -> None:
        fields = {"run_id", "agent_type", "instance_id", "input", "started_at"}
        self._submit("start_run", run.run_id, run.model_dump(include=fields))

    def append_episode(self, episode: Episode) -> None:
        """Queue the episode; a proposal the write policy refuses raises `WriteDenied`
        here, to the caller, and nothing is queued."""
        self.store.gate.check(self.store.proposal(episode))
        self._submit("append_episode", episode.run_id, episode.model_dump())

    def complete_run(self, run: RunRecord) -> None:
        self._submit("complete_run", run.run_id, run.model_dump())

    def fail_run(self, run: RunRecord) -> None:
        self._submit("fail_run", run.run_id, run.model_dump())

    def replay(self, pending: list[PendingWrite]) -> None:
        """Queue again, in order, writes an outbox kept across a restart (already checked by
        the write policy when first queued; each keeps its outbox entry until it settles)."""
        for write in pending:
            self._submit(write.op, write.run_id, write.payload, seq=write.seq)

    async def write_now(self, op: WriteOp, payload: dict[str, Any]) -> None:
        """One attempt of a queued op's D1 write, rebuilt from its payload (so a replay is
        the same write as the original), in the caller's task: no retries, no failure sink
        (the Durable Object's alarm retries a write from `failed_writes` so). Raises what
        the store raises."""
        if op == "start_run":
            await self.store.start_run(**payload)
        elif op == "append_episode":
            await self.store.append_episode(Episode.model_validate(payload))
        else:
            await self.store.finish_run(RunRecord.model_validate(payload))

    async def flush(self, wait_seconds: float | None = None) -> bool:
        """Wait until every write submitted so far has finished (or failed for good); False
        if `wait_seconds` passed first (a turn waits so it sees its own previous turn)."""
        tail = self._tail
        if tail is None or tail.done():
            return True
        try:
            await asyncio.wait_for(asyncio.shield(tail), wait_seconds)
        except TimeoutError:
            return False
        return True

    @property
    def pending(self) -> bool:
        return self._tail is not None and not self._tail.done()

    def _submit(
        self, op: WriteOp, run_id: str, payload: dict[str, Any], *, seq: int | None = None
    ) -> None:
        if seq is None and self._outbox is not None:
            seq = self._outbox.add(op, run_id, payload)
        previous = self._tail
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tail = done

        async def work() -> None:
            try:
                if previous is not None:
                    await asyncio.shield(previous)
                settled = await self._with_retries(op, run_id, payload)
                if settled and seq is not None and self._outbox is not None:
                    # Landed in D1, or kept by the failure sink: otherwise the outbox
                    # keeps it for the next replay.
                    self._outbox.done(seq)
            finally:
                if not done.done():
                    done.set_result(None)

        self._background.wait_until(work())

    async def _with_retries(self, op: WriteOp, run_id: str, payload: dict[str, Any]) -> bool:
        error = ""
        for attempt in range(1, DEFAULT_ATTEMPTS + 1):
            try:
                await self.write_now(op, payload)
                return True
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, EpisodeLimitReached):
                    break  # permanent: recorded below with its payload, not retried
                if attempt < DEFAULT_ATTEMPTS:
                    delay = DEFAULT_BASE_DELAY * 2 ** (attempt - 1)
                    log.warning(
                        "episodic %s for run %s failed (attempt %d/%d, retrying in %.2fs): %s",
                        op,
                        run_id,
                        attempt,
                        DEFAULT_ATTEMPTS,
                        delay,
                        type(exc).__name__,  # the message may quote values; it is kept below
                    )
                    await self._sleep(delay)
        # Logs carry ids, sizes and hashes only (never content or subjects); the payload
        # itself is recoverable from the failed_writes record `on_failure` keeps.
        raw = to_json(payload).encode()
        log.error(
            "episodic %s for run %s LOST after %d attempts (%s); tenant=%s episode=%s "
            "payload_bytes=%d payload_sha256=%s (payload kept in failed_writes)",
            op,
            run_id,
            DEFAULT_ATTEMPTS,
            error.split(":", 1)[0],
            self.store.tenant,
            payload.get("episode_id", "-"),
            len(raw),
            hashlib.sha256(raw).hexdigest()[:16],
        )
        if self._on_failure is None:
            return False
        try:
            self._on_failure(
                FailedWrite(
                    op=op, run_id=run_id, payload=payload, error=error, attempts=DEFAULT_ATTEMPTS
                )
            )
        except Exception:
            log.exception("episodic: recording the failed %s for run %s failed", op, run_id)
            return False
        return True


DEFAULT_MIN_PULLS = 20
DEFAULT_MIN_MEAN = 0.7


class UnknownWorkflowError(LookupError):
    """No workflow has this id."""


class Workflow(BaseModel):
    model_config = ConfigDict(frozen=True)

    workflow_id: str
    agent_type: str
    task_type: str
    spec: dict[str, Any]
    alpha: float
    beta: float
    pulls: int
    status: Literal["active", "retired"]
    created_at: float
    updated_at: float

    @property
    def posterior_mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    def summary(self) -> dict[str, Any]:
        """JSON view for admin endpoints, with the posterior mean."""
        return {**self.model_dump(), "posterior_mean": round(self.posterior_mean, 6)}


class Selection(BaseModel):
    workflow: Workflow
    samples: dict[str, float]
    # "name@version" when a workflow pack chose it instead of sampling (`WorkflowPacks`).
    pack: str | None = None


_COLUMNS = (
    "workflow_id, agent_type, task_type, spec, alpha, beta, pulls, status, created_at, updated_at"
)


def _workflow(row: Row) -> Workflow:
    return Workflow.model_validate({**row, "spec": json.loads(row["spec"])})


class ProceduralMemory:
    """The bandit of one Durable Object (synchronous: DO SQL is synchronous)."""

    def __init__(self, sql: SqlStorage) -> None:
        self._sql = sql
        # Writes are proposals checked by the write policy (ADR-0051). This object does not
        # know its tenant, so callers that can record events pass their own gate.
        self._gate = WriteGate("procedural")

    def register(
        self,
        *,
        workflow_id: str,
        agent_type: str,
        task_type: str,
        spec: dict[str, Any],
        now: float,
        gate: WriteGate | None = None,
    ) -> None:
        """Add a workflow with a Beta(1, 1) prior; an existing id is left as it is."""
        gate = gate or self._gate
        proposal = WriteProposal(
            tier="procedural",
            key=workflow_id,
            value={"agent_type": agent_type, "task_type": task_type, "spec": spec},
            source="workflow_registry",
            agent_type=agent_type,
        )
        gate.check(proposal)
        inserted = self._sql.exec(
            f"INSERT INTO procedural_workflows ({_COLUMNS}) "
            "VALUES (?, ?, ?, ?, 1.0, 1.0, 0, 'active', ?, ?) "
            "ON CONFLICT (workflow_id) DO NOTHING RETURNING workflow_id",
            workflow_id,
            agent_type,
            task_type,
            json.dumps(spec, separators=(",", ":"), sort_keys=True),
            now,
            now,
        ).to_array()
        if inserted:
            gate.defer([proposal])

    def register_specs(
        self,
        agent_type: str,
        specs: Iterable[WorkflowSpec],
        now: float,
        gate: WriteGate | None = None,
    ) -> None:
        for spec in specs:
            self.register(
                workflow_id=spec.workflow_id,
                agent_type=agent_type,
                task_type=spec.task_type,
                spec={"instructions": spec.instructions, **spec.spec},
                now=now,
                gate=gate,
            )

    def get(self, workflow_id: str) -> Workflow | None:
        rows = self._sql.exec(
            f"SELECT {_COLUMNS} FROM procedural_workflows WHERE workflow_id = ?", workflow_id
        ).to_array()
        return _workflow(rows[0]) if rows else None

    def workflows(self, agent_type: str, task_type: str | None = None) -> list[Workflow]:
        """The agent type's active workflows (of `task_type`, when given), by id."""
        sql = f"SELECT {_COLUMNS} FROM procedural_workflows WHERE agent_type = ?"
        params: list[str] = [agent_type]
        if task_type is not None:
            sql += " AND task_type = ?"
            params.append(task_type)
        sql += " AND status = 'active' ORDER BY workflow_id"
        rows = self._sql.exec(sql, *params).to_array()
        return [_workflow(row) for row in rows]

    def select_workflow(
        self, agent_type: str, task_type: str, rng: random.Random
    ) -> Selection | None:
        """Thompson sampling: the active workflow with the largest Beta draw (a few draws:
        the stdlib's, so a turn needs no numpy)."""
        candidates = self.workflows(agent_type, task_type)
        if not candidates:
            return None
        draws = [rng.betavariate(w.alpha, w.beta) for w in candidates]
        best = draws.index(max(draws))
        return Selection(
            workflow=candidates[best],
            samples={w.workflow_id: float(d) for w, d in zip(candidates, draws, strict=True)},
        )

    def record_outcome(
        self, workflow_id: str, score: float, now: float, gate: WriteGate | None = None
    ) -> Workflow:
        """Update the posterior with one outcome; returns the updated workflow."""
        if not isinstance(score, int | float) or isinstance(score, bool):
            raise ValueError("score must be a number in [0, 1]")
        value = float(score)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"score must be in [0, 1], got {value}")
        gate = gate or self._gate
        proposal = WriteProposal(
            tier="procedural", key=workflow_id, value={"score": value}, source="outcome"
        )
        gate.check(proposal)
        rows = self._sql.exec(
            "UPDATE procedural_workflows SET alpha = alpha + ?, beta = beta + ?, "
            f"pulls = pulls + 1, updated_at = ? WHERE workflow_id = ? RETURNING {_COLUMNS}",
            value,
            1.0 - value,
            now,
            workflow_id,
        ).to_array()
        if not rows:
            raise UnknownWorkflowError(f"no workflow {workflow_id!r}")
        gate.defer([proposal])
        return _workflow(rows[0])

    def pack_candidates(
        self,
        agent_type: str,
        *,
        min_pulls: int = DEFAULT_MIN_PULLS,
        min_mean: float = DEFAULT_MIN_MEAN,
    ) -> list[Workflow]:
        """Stable, successful workflows (enough pulls, high posterior mean), best first."""
        found = [
            w
            for w in self.workflows(agent_type)
            if w.pulls >= min_pulls and w.posterior_mean >= min_mean
        ]
        return sorted(found, key=lambda w: (-w.posterior_mean, w.workflow_id))


_PACK_COLS = (
    "name, version, agent_type, workflow_id, task_type, source_instance_id, alpha, beta, "
    "pulls, status, promoted_by, created_at, deprecated_at"
)


class Pack(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    version: int
    agent_type: str
    workflow_id: str
    task_type: str
    source_instance_id: str
    alpha: float
    beta: float
    pulls: int
    status: Literal["active", "deprecated"]
    promoted_by: str
    created_at: int
    deprecated_at: int | None = None


def _pack(row: Row) -> Pack:
    return Pack.model_validate({**row, "version": int(row["version"]), "pulls": int(row["pulls"])})


class WorkflowPacks:
    """One tenant's workflow packs."""

    def __init__(self, db: D1Database, tenant: str) -> None:
        self._db = db
        self.tenant = tenant

    def _sql(self, sql: str, params: tuple[SqlValue, ...]) -> D1Statement:
        """`sql` bound to the tenant (always its first parameter), then `params`."""
        return self._db.prepare(sql).bind(self.tenant, *params)

    async def promote(
        self, name: str, workflow: Workflow, *, instance_id: str, by: str, now_ms: int
    ) -> Pack:
        """Add the next version of `name` for the workflow's agent type and deprecate the
        versions before it, in one batch (one transaction)."""
        # The next version is computed inside the INSERT, so two promotions of one name
        # cannot pick the same number; the batch is one transaction.
        results = await self._db.batch(
            [
                self._deprecate(workflow.agent_type, name, now_ms),
                self._sql(
                    f"INSERT INTO workflow_packs (tenant_id, {_PACK_COLS}) "
                    "SELECT ?1, ?2, COALESCE(MAX(version), 0) + 1, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                    "'active', ?10, ?11, NULL FROM workflow_packs "
                    "WHERE tenant_id = ?1 AND agent_type = ?3 AND name = ?2 "
                    f"RETURNING {_PACK_COLS}",
                    (
                        name,
                        workflow.agent_type,
                        workflow.workflow_id,
                        workflow.task_type,
                        instance_id,
                        float(workflow.alpha),
                        float(workflow.beta),
                        int(workflow.pulls),
                        by,
                        now_ms,
                    ),
                ),
            ]
        )
        return _pack(results[1].results[0])

    async def list(self, agent_type: str) -> list[Pack]:
        """Every version of every pack of the agent type, newest first."""
        result = await self._sql(
            f"SELECT {_PACK_COLS} FROM workflow_packs WHERE tenant_id = ? AND agent_type = ? "
            "ORDER BY created_at DESC, name, version DESC",
            (agent_type,),
        ).all()
        return [_pack(row) for row in result.results]

    def _deprecate(self, agent_type: str, name: str, now_ms: int) -> D1Statement:
        return self._sql(
            "UPDATE workflow_packs SET status = 'deprecated', deprecated_at = ?4 "
            "WHERE tenant_id = ?1 AND agent_type = ?2 AND name = ?3 AND status = 'active'",
            (agent_type, name, now_ms),
        )

    async def deprecate(self, agent_type: str, name: str, now_ms: int) -> int:
        """Deprecate the active version of `name`; returns how many were (0 or 1)."""
        return int((await self._deprecate(agent_type, name, now_ms).run()).meta.changes)

    async def offered(self, agent_type: str, task_type: str) -> Pack | None:
        """The newest active pack of the agent type for the task type, if any."""
        row = await self._sql(
            f"SELECT {_PACK_COLS} FROM workflow_packs WHERE tenant_id = ? AND agent_type = ? "
            "AND task_type = ? AND status = 'active' ORDER BY created_at DESC, name LIMIT 1",
            (agent_type, task_type),
        ).first()
        return _pack(row) if row is not None else None


ERASED_SOURCE = "erased"


async def forget_pack_sources(db: D1Database, tenant: str, subject: str) -> int:
    """A subject erase: packs promoted from an instance whose id names `subject` keep their
    workflow but not that id (`ERASED_SOURCE` instead); how many changed."""
    result = await (
        db.prepare(
            "UPDATE workflow_packs SET source_instance_id = ? "
            "WHERE tenant_id = ? AND instr(source_instance_id, ?) > 0"
        )
        .bind(ERASED_SOURCE, tenant, subject)
        .run()
    )
    return int(result.meta.changes)
