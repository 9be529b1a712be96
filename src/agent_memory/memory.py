"""`Memory`: one tenant's memory, and the one way in to it.

Built once per request (or agent turn) for one tenant: the retrieval config, write gate, event
log and personal-data sealing are made once and shared by every tier it hands out. `search`
asks the tiers concurrently and merges them by score; every ranked read is one
`memory_retrieved` event. `listing`, `put` and `delete` are the memory API's verbs
(docs/memory-api.md) and decide what it allows: every refusal (read-only tier, admin-only
delete, bad key, value size, TTL, embedding budget, a missing binding) is a `CodedError`,
raised before anything is written.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_memory.directory import control_db, tenant_bindings
from agent_memory.governance.agent_types import catalog
from agent_memory.governance.feed import ChangeFeed
from agent_memory.governance.personal_data import PersonalData
from agent_memory.governance.writes import (
    EventLog,
    RetrievedItem,
    WriteGate,
    WritePolicy,
    memory_retrieved,
)
from agent_memory.hot_warm_cold import (
    ArchiveColdMemory,
    D1WarmMemory,
    KVHotMemory,
    MemoryBuilder,
    MemoryClient,
    TieredRead,
    open_episode_item,
)
from agent_memory.ids import new_ulid
from agent_memory.lifecycle.brief import TenantBrief, build_brief
from agent_memory.lifecycle.erase import Progress, SubjectEraser
from agent_memory.lifecycle.inspect import MemoryInspector
from agent_memory.lifecycle.portability import (
    EXPORT_STEP_SECONDS,
    Exporter,
    Importer,
    Jobs,
    Personal,
    PortabilityJob,
)
from agent_memory.lifecycle.prune import PruneReport, pruner_for
from agent_memory.lifecycle.reconciler import (
    Adjudicator,
    LlmAdjudicator,
    Reconciler,
    RulesAdjudicator,
)
from agent_memory.lifecycle.retention import (
    LifecycleUpdate,
    TenantLifecycle,
    get_lifecycle,
    set_lifecycle,
)
from agent_memory.namespace import (
    TENANT_RE,
    AgentScope,
    ItemKey,
    NamespaceKey,
    agent_session,
    validate_key,
)
from agent_memory.placement import parse_placement
from agent_memory.retrieval import (
    RankedItem,
    RankItem,
    RetrievalConfig,
    Tier,
    breakdown,
    rank,
)
from agent_memory.tiers.episodic import (
    Episode,
    EpisodicStore,
    Pack,
    RunRecord,
    Workflow,
    WorkflowPacks,
)
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import (
    DEFAULT_AGENT_TYPE,
    Fact,
    FactInput,
    RecallFilters,
    breakdown_view,
)
from agent_memory.tiers.semantic.reconcile import note_writes
from agent_memory.tiers.working import (
    WORKING_MEMORY_TTL_SECONDS,
    NamespaceFlags,
    ReadCounts,
    WorkingMemory,
    flush_counts,
)
from bindings.environment import Bindings
from bindings.ports.d1 import D1Database
from http_messages import ApiError

log = logging.getLogger(__name__)

# How many items of a tier without search channels a query ranks (newest first).
SEARCH_POOL = 200
MAX_VALUE_CHARS = 32_768
PROMOTION_ROUTE = "POST /admin/tenants/{tenant}/agents/{agent_type}/packs"
FACT_DELETE_ROUTE = "DELETE /admin/tenants/{tenant}/facts/{fact_id}"
# The names of `score_parts`' components, in order.
_PARTS = ("score", "relevance", "recency", "confidence", "density")


class MemoryUnavailable(ApiError):
    """A tier needs a binding this deployment lacks: 503 with `code` (`kv_unavailable`,
    `episodic_unavailable`, `semantic_unavailable`, `agent_runtime_unavailable`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(503, code, message)


class ArchivedEpisode(BaseModel):
    item_key: str
    archived_at: int
    episode: Episode


class FailedWriteView(BaseModel):
    op: str
    payload: dict[str, Any]
    error: str
    attempts: int
    created_at: float


class RunDetail(BaseModel):
    run: RunRecord
    episodes: list[Episode]
    run_log: list[Any]
    workflow: dict[str, Any] | None
    failed_writes: list[FailedWriteView]


class MemoryItem(BaseModel):
    """One memory of any tier as the memory API shows it: times in epoch ms; `score` and
    `score_breakdown` when it was ranked for a query."""

    tier: str
    key: str
    value: Any
    metadata: dict[str, Any] = {}
    created_at: int | None = None
    expires_at: int | None = None
    score: float | None = None
    score_breakdown: dict[str, Any] | None = None


def json_text(value: Any) -> str:
    """A value as the text it is ranked and size-checked by (JSON unless it is a string)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def retrieval_config(bindings: Bindings) -> RetrievalConfig:
    """The deployment's retrieval config: the defaults overridden by `MEMORY_RETRIEVAL_CONFIG`
    (validated at startup by `Settings`). A value that fails here anyway gives the defaults:
    a request never fails over its ranking weights."""
    try:
        return RetrievalConfig.from_json(bindings.settings.memory_retrieval_config)
    except ValueError as exc:
        log.warning("MEMORY_RETRIEVAL_CONFIG unusable, using the defaults: %s", exc)
        return RetrievalConfig()


def _check_tenant(tenant: str) -> None:
    if not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant):
        raise ValueError(f"invalid tenant id {tenant!r}")


class Memory:
    """One tenant's memory for one request. See the module docstring."""

    def __init__(
        self,
        bindings: Bindings,
        tenant: str,
        *,
        events_after_response: bool = False,
        read_counts: ReadCounts | None = None,
        admitted: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        _check_tenant(tenant)
        if bindings.shard is None and len(bindings.shards) > 1:
            # Tenant data is on the tenant's shard: `Memory.open` finds it. Built on the
            # primary's bindings, every tier would read and write the wrong database.
            raise RuntimeError("Memory needs the tenant's shard: use `await Memory.open(...)`")
        self.bindings = bindings
        self.tenant = tenant
        self.clock = bindings.clock
        self.config = retrieval_config(bindings)
        self.events = EventLog(tenant, bindings.db) if bindings.db is not None else None
        self.personal = PersonalData.from_bindings(bindings, tenant)
        # Every write is a proposal the policy checks; a committed one is a `memory_written`
        # event — after the response when asked (an agent turn), else before returning.
        # Working-memory writes always record theirs after the response: it cannot share a
        # transaction with KV anyway, and the budget's read and the write are the floor.
        self.agent_types = catalog(bindings.settings.agent_types)
        policy = WritePolicy(agent_types=self.agent_types)
        self.feed = ChangeFeed.of(bindings)

        def gate(after_response: bool) -> WriteGate:
            background = bindings.background if after_response else None
            return WriteGate(
                tenant,
                clock=self.clock,
                events=self.events,
                policy=policy,
                background=background,
                admitted=admitted,
                feed=self.feed,
            )

        self.gate = gate(events_after_response)
        self.working_gate = gate(True)
        # Working-memory reads by key generation, for the daily brief (the namespace
        # migration's progress); flushed by whoever made them.
        self.read_counts = read_counts

    @classmethod
    async def open(
        cls,
        bindings: Bindings,
        tenant: str,
        *,
        events_after_response: bool = False,
        read_counts: ReadCounts | None = None,
        admitted: Callable[[], Awaitable[None]] | None = None,
    ) -> Memory:
        """`tenant`'s memory on its shard: the tenant directory is read once (this isolate's
        cache, else KV, else the primary database, placing a new tenant) and every tier this
        object hands out reaches D1 and Vectorize through that shard only."""
        _check_tenant(tenant)  # before the directory is asked (it could place a bad id)
        home = await tenant_bindings(bindings, tenant)
        return cls(
            home,
            tenant,
            events_after_response=events_after_response,
            read_counts=read_counts,
            admitted=admitted,
        )

    def _require_db(self, code: str = "episodic_unavailable") -> D1Database:
        if self.bindings.db is None:
            raise MemoryUnavailable(code, "the D1 binding is missing")
        return self.bindings.db

    def working(
        self,
        instance_id: str,
        *,
        agent_type: str,
        ttl_seconds: int = WORKING_MEMORY_TTL_SECONDS,
        write_lock: asyncio.Lock | None = None,
        run_id: str | None = None,
    ) -> WorkingMemory:
        """The working memory (KV) of the agent `agent_type` / `instance_id`: its own, not
        shared with another type's instance of the same id."""
        if self.bindings.kv is None:
            raise MemoryUnavailable("kv_unavailable", "the KV binding is missing")
        return WorkingMemory(
            self.bindings.kv,
            self.tenant,
            agent_session(agent_type, instance_id),
            ttl_seconds=ttl_seconds,
            write_lock=write_lock,
            gate=self.working_gate,
            agent_type=agent_type,
            run_id=run_id,
            clock=self.clock,
            namespace=NamespaceFlags.of(self.bindings.settings),
            read_counts=self.read_counts,
        )

    @cached_property
    def episodic(self) -> EpisodicStore:
        """The tenant's runs and episodes (D1)."""
        return EpisodicStore(
            self._require_db(), self.tenant, gate=self.gate, personal=self.personal
        )

    def semantic(
        self, *, agent_type: str = DEFAULT_AGENT_TYPE, run_id: str | None = None
    ) -> SemanticMemory:
        """The tenant's facts (D1 + Vectorize), written as `agent_type` (and `run_id`)."""
        b = self.bindings
        if b.db is None or b.vectors is None:
            raise MemoryUnavailable(
                "semantic_unavailable",
                "the semantic tier needs the D1 database and the Vectorize index bound",
            )
        return SemanticMemory(
            self.tenant,
            db=b.db,
            vectors=b.vectors,
            embedder=b.embedder,
            clock=self.clock,
            config=self.config,
            agent_type=agent_type,
            run_id=run_id,
            gate=self.gate,
            background=b.background,
            personal=self.personal,
            kv=b.kv,
            reranker=b.reranker,
        )

    @property
    def has_semantic(self) -> bool:
        b = self.bindings
        return b.db is not None and b.vectors is not None and b.embedder is not None

    @cached_property
    def packs(self) -> WorkflowPacks:
        """Workflow packs promoted for every instance of an agent type (D1)."""
        return WorkflowPacks(self._require_db(), self.tenant)

    async def workflows(
        self,
        agent_type: str,
        instance_id: str,
        task_type: str | None = None,
        *,
        candidates: tuple[int, float] | None = None,
    ) -> list[dict[str, Any]]:
        """The workflows of `agent_type` as instance `instance_id` sees them (only those
        ready to pack with `candidates`, (min pulls, min posterior mean)): the bandit lives
        in the instance's Durable Object, so this is one RPC."""
        scope = AgentScope(tenant=self.tenant, agent_type=agent_type, instance_id=instance_id)
        payload: dict[str, Any] = {"task_type": task_type}
        if candidates is not None:
            payload |= {"candidates_only": True, "min_pulls": candidates[0]}
            payload["min_mean"] = candidates[1]
        found = await call_agent(self.bindings, scope, "workflows", payload)
        return list(found.get("workflows", []))

    async def promote_pack(
        self,
        name: str,
        agent_type: str,
        instance_id: str,
        workflow_id: str,
        *,
        candidates: tuple[int, float],
        by: str,
    ) -> Pack:
        """The instance's workflow promoted into the next version of pack `name` for every
        instance of the type (ADR-29): only one the instance reports as a pack candidate
        (409 `not_a_pack_candidate`, nothing written)."""
        found = await self.workflows(agent_type, instance_id, candidates=candidates)
        chosen = next((w for w in found if w["workflow_id"] == workflow_id), None)
        if chosen is None:
            raise ApiError(
                409,
                "not_a_pack_candidate",
                f"workflow {workflow_id!r} of instance {instance_id!r} has fewer than "
                f"{candidates[0]} pulls or a posterior mean under {candidates[1]}",
            )
        workflow = Workflow.model_validate({k: chosen[k] for k in Workflow.model_fields})
        now_ms = int(self.clock.now() * 1000)
        return await self.packs.promote(
            name, workflow, instance_id=instance_id, by=by, now_ms=now_ms
        )

    async def run_detail(self, run_id: str) -> RunDetail:
        """A run with its episodes and its instance's run log, workflow and failed writes, or
        404 `run_not_found`."""
        run = await self.episodic.get_run(run_id)
        if run is None:
            raise ApiError(404, "run_not_found", f"tenant {self.tenant!r} has no run {run_id!r}")
        scope = AgentScope(
            tenant=self.tenant, agent_type=run.agent_type, instance_id=run.instance_id
        )
        # Asking the instance's Durable Object also waits (briefly) for its pending episodic
        # writes, so the run and episodes read after it are current.
        detail = await call_agent(self.bindings, scope, "run_log", {"run_id": run_id})
        return RunDetail(
            run=await self.episodic.get_run(run_id) or run,
            episodes=await self.episodic.episodes_for_run(run_id),
            run_log=detail.get("run_log", []),
            workflow=detail.get("workflow"),
            failed_writes=detail.get("failed_writes", []),
        )

    def placement_client(self) -> MemoryClient:
        """The hot/warm/cold `MemoryClient` (KV / D1 / R2) over this deployment's tiers, with
        its placement table (`MEMORY_PLACEMENT`); a tier whose binding is missing is left
        out. A bad `MEMORY_PLACEMENT` raises `PlacementError`."""
        b = self.bindings
        table = parse_placement(b.settings.memory_placement)
        flags, ttl = NamespaceFlags.of(b.settings), table.placement("working").ttl_seconds
        hot = None
        if b.kv is not None:
            hot = KVHotMemory(b.kv, flags=flags, counts=self.read_counts, repair_ttl=ttl)
        return (
            MemoryBuilder()
            .with_hot(hot)
            .with_warm(None if b.db is None else D1WarmMemory(b.db, self.personal))
            .with_cold(None if b.db is None or b.cold is None else self.cold_archive())
            .with_rules(read_fallback=True, promote_on_read=True, placement=table)
            .for_tenant(self.tenant)
            .build()
        )

    def cold_archive(self) -> ArchiveColdMemory:
        """The tenant's archived (cold) items: the prune's index in D1, objects in R2."""
        db = self._require_db()
        if self.bindings.cold is None:
            raise MemoryUnavailable("cold_unavailable", "the R2 binding COLD is missing")
        return ArchiveColdMemory(db, self.bindings.cold, self.clock)

    async def lifecycle(
        self, update: LifecycleUpdate | None = None, *, by: str = ""
    ) -> TenantLifecycle:
        """The tenant's retention and episode limit (its overrides, else the defaults), after
        applying `update`'s fields (None: back to the default) as `by`'s when given."""
        days = self.bindings.settings.episode_retention_days
        db = self._require_db("lifecycle_unavailable")
        if update is None:
            return await get_lifecycle(db, self.tenant, days)
        now_ms = int(self.clock.now() * 1000)
        return await set_lifecycle(
            db, self.tenant, update, default_days=days, now_ms=now_ms, updated_by=by
        )

    async def brief(self) -> TenantBrief:
        """Today's lifecycle brief of the tenant (docs/lifecycle.md)."""
        days, now_ms = self.bindings.settings.episode_retention_days, int(self.clock.now() * 1000)
        found = await build_brief(
            self._require_db("lifecycle_unavailable"),
            now_ms=now_ms,
            default_retention_days=days,
            tenants=[self.tenant],
        )
        return found.tenants[0]

    async def prune(self, *, dry_run: bool = False) -> PruneReport:
        """Prune the tenant now (a `manual-` job), or with `dry_run` count what would go."""
        pruner = pruner_for(self.bindings)
        if pruner is None:
            raise MemoryUnavailable(
                "lifecycle_unavailable", "the prune needs the DB and COLD bindings"
            )
        now_ms = int(self.clock.now() * 1000)
        if dry_run:
            return await pruner.dry_run(now_ms, tenants=[self.tenant])
        return await pruner.run(f"manual-{new_ulid(now_ms / 1000)}", now_ms, tenants=[self.tenant])

    def reconciler(self) -> Reconciler | None:
        """The tenant's reconciler (ADR-0051), or None without D1, Vectorize and an
        embedder. Its updates are decided by `MEMORY_UPDATE_ADJUDICATOR`."""
        b = self.bindings
        if b.db is None or b.vectors is None or b.embedder is None:
            return None
        return Reconciler(
            self.tenant,
            db=b.db,
            vectors=b.vectors,
            memory=self.semantic(agent_type="reconciler"),
            embedding_key=b.embedder.config.key,
            clock=self.clock,
            gate=self.gate,
            adjudicator=self.adjudicator(),
        )

    def adjudicator(self) -> Adjudicator:
        """`MEMORY_UPDATE_ADJUDICATOR`: the LLM one when asked for and an LLM is bound (Workers
        AI on Cloudflare, the configured OpenAI-compatible model locally), else the rules."""
        b = self.bindings
        if b.settings.memory_update_adjudicator == "llm" and b.llm is not None:
            return LlmAdjudicator(b.llm)
        return RulesAdjudicator()

    async def note_new_facts(self, count: int = 1) -> None:
        """Count new facts towards the tenant's next reconcile; every
        `MEMORY_RECONCILE_EVERY_WRITES` of them, reconcile it after the response, so updates
        are resolved without waiting for the daily cron. Never fails the write it follows,
        and counts after the response: the caller's answer does not depend on it."""
        every = self.bindings.settings.memory_reconcile_every_writes
        db = self.bindings.db
        if db is None or every <= 0:
            return

        async def count_then_reconcile() -> None:
            try:
                due = await note_writes(db, self.tenant, count, every)
            except Exception as exc:  # the fact is stored; the daily cron reconciles anyway
                log.warning("reconcile cadence not counted for %s: %s", self.tenant, exc)
                return
            reconciler = self.reconciler() if due else None
            if reconciler is None:
                return
            try:
                report = await reconciler.run()
            except Exception:  # the next writes or the daily cron try again
                log.exception("reconcile after writes: tenant %s failed", self.tenant)
                return
            log.info(
                "reconcile after writes: tenant %s, %d update(s) applied of %d pair(s)",
                self.tenant,
                report.superseded_updates,
                report.update_pairs,
            )

        self.bindings.background.wait_until(count_then_reconcile())

    def eraser(self, progress: Progress | None = None) -> SubjectEraser:
        """Erases one subject from every tier and the archives (docs/lifecycle.md)."""
        b = self.bindings
        return SubjectEraser(
            self.tenant,
            db=self._require_db(),
            clock=self.clock,
            kv=b.kv,
            vectors=b.vectors,
            cold=b.cold,
            purge_residue=b.purge_residue,
            agents=b.agents,
            feed=self.feed,
            progress=progress,
        )

    def exporter(self) -> Exporter:
        """The tenant's exports (docs/portability.md): rows from its shard, jobs in the primary
        database, parts in R2."""
        return Exporter(
            self.tenant,
            db=self._require_db(),
            control=control_db(self.bindings),
            cold=self.bindings.cold,
            personal=self.personal,
            clock=self.clock,
            eraser=self.eraser(),
        )

    async def export(self, by: str, personal: Personal) -> PortabilityJob:
        """Start an export (`by` asked; personal data opened is an event): its first step runs
        after the response, the minute cron runs the rest (docs/portability.md)."""
        exporter = self.exporter()
        job = await exporter.start(by, personal)
        steps = exporter.advance(job.job_id, max_seconds=EXPORT_STEP_SECONDS)
        self.bindings.background.wait_until(steps)
        return job

    def importer(self) -> Importer:
        """Imports into the tenant on its shard, through the write gate (docs/portability.md)."""
        return Importer(
            self.tenant,
            self._require_db(),
            self.gate,
            self.personal,
            self.clock,
            semantic=self.semantic if self.has_semantic else None,
            feed=self.feed,
            jobs=Jobs(control_db(self.bindings), self.tenant),
        )

    def inspector(self) -> MemoryInspector:
        """Read-only views of the tenant's memory for the inspector (docs/inspector.md)."""
        now_ms = int(self.clock.now() * 1000)
        return MemoryInspector(
            self._require_db(), self.tenant, now_ms=now_ms, personal=self.personal
        )

    def rank(
        self,
        tier: Tier,
        query: str,
        items: Sequence[RankItem],
        *,
        pool: int,
        top_k: int | None = None,
        matching_only: bool = False,
        agent_type: str | None = None,
        record: bool = True,
    ) -> list[RankedItem]:
        """`items` of a tier without search channels scored for `query` with the tier's
        weights, best first (cut to `top_k`; only those sharing a word with the query when
        `matching_only`), recorded as one `memory_retrieved` event after the response
        (unless `record` is False: the caller then records what it shows with `record()`)."""
        ranked = rank(query, items, self.config.weights_for(tier), self.clock.now())
        if matching_only:
            ranked = [r for r in ranked if r.parts[1] > 0]
        if top_k is not None:
            ranked = ranked[:top_k]
        if record:
            self.record(tier, query, ranked, pool=pool, agent_type=agent_type)
        return ranked

    def record(
        self,
        tier: Tier,
        query: str,
        ranked: Sequence[RankedItem],
        *,
        pool: int,
        agent_type: str | None = None,
        top_k: int | None = None,
    ) -> None:
        """One `memory_retrieved` event for a ranked read (`top_k`: what was asked for,
        by default as many as `ranked` holds), written after the response (best effort: a
        read never waits for, or fails over, its audit trail)."""
        if self.events is None or not ranked:
            return
        events, now, ranked = self.events, self.clock.now(), list(ranked)

        async def write() -> None:
            # Built here, not before: validating the event is CPU the reader need not wait for.
            try:
                results = [
                    RetrievedItem.model_validate(
                        {
                            "id": r.item.id,
                            **{k: round(p, 6) for k, p in zip(_PARTS, r.parts, strict=True)},
                        }
                    )
                    for r in ranked
                ]
                event = memory_retrieved(
                    tenant_id=self.tenant,
                    tier=tier,
                    now=now,
                    query=query,
                    top_k=len(ranked) if top_k is None else top_k,
                    results=results,
                    candidates={"pool": pool},
                    agent_type=agent_type,
                )
                await events.record(event)
            except Exception as exc:
                log.warning("memory_retrieved (%s) not recorded for %s: %s", tier, self.tenant, exc)

        self.bindings.background.wait_until(write())

    async def search(
        self,
        query: str,
        tiers: Sequence[Tier],
        instance_id: str,
        *,
        agent_type: str,
        limit: int,
        offset: int = 0,
        window: Mapping[str, float | None] | None = None,
    ) -> tuple[list[MemoryItem], bool]:
        """The items ranked `offset` + 1 to `offset` + `limit` of every tier in `tiers` of
        the agent `agent_type` / `instance_id` (semantic: the tenant's) for `query`, merged
        best first, and whether more follow. The tiers are searched concurrently; `window`
        is semantic recall's `valid_from_*`. Each tier's read is recorded (its
        `memory_retrieved` event; the facts' recall statistics) with its items on this page
        only: the audit lists what the caller was given, not the ranks skipped before the
        page nor the one read past it to know whether more follow."""
        if "semantic" in tiers:
            await self._spend_embedding_budget()  # the query is embedded once
        want = offset + limit + 1
        searched = await asyncio.gather(
            *(
                self._search_tier(tier, query, instance_id, want, agent_type, window)
                for tier in tiers
            )
        )
        merged = [(item, n) for n, (items, _) in enumerate(searched) for item in items]
        merged.sort(key=lambda pair: (-(pair[0].score or 0.0), pair[0].tier, pair[0].key))
        page = merged[offset : offset + limit]
        for n, (items, record) in enumerate(searched):
            shown = {id(item) for item, owner in page if owner == n}
            await record([i for i, item in enumerate(items) if id(item) in shown], limit)
        return [item for item, _ in page], len(merged) > offset + limit

    async def _search_tier(
        self,
        tier: Tier,
        query: str,
        instance_id: str,
        limit: int,
        agent_type: str,
        window: Mapping[str, float | None] | None,
    ) -> tuple[list[MemoryItem], Callable[[list[int], int], Awaitable[None]]]:
        """A tier's best `limit` items for `query`, unrecorded, and how to record those of
        them (by position) a caller shows."""
        if tier == "semantic":
            filters = RecallFilters.model_validate({k: v for k, v in (window or {}).items() if v})
            semantic = self.semantic()
            recalled = await semantic.rank(query, min(limit, 1000), filters, record=False)

            async def record_facts(shown: list[int], top_k: int) -> None:
                results = [recalled.results[i] for i in shown]
                await semantic.record(
                    query, top_k, recalled.model_copy(update={"results": results})
                )

            found = [
                _scored(_fact_item(r.fact), r.score, breakdown_view(r.breakdown, r.channels))
                for r in recalled.results
            ]
            return found, record_facts
        # Working memory and workflows are ranked whole; episodes, the newest `SEARCH_POOL`.
        cap = SEARCH_POOL if tier == "episodic" else sys.maxsize
        pool = await self.listing(tier, instance_id, limit=cap, agent_type=agent_type)
        now_ms = self.clock.now() * 1000
        by_key = {item.key: item for item in pool}
        items = [
            RankItem(
                id=item.key,
                text=f"{item.key} {json_text(item.value)}",
                written_at=(item.created_at or now_ms) / 1000,
                confidence=_confidence(item),
            )
            for item in pool
        ]
        weights = self.config.weights_for(tier)
        ranked = self.rank(
            tier, query, items, pool=len(items), top_k=limit, matching_only=True, record=False
        )

        async def record_items(shown: list[int], top_k: int) -> None:
            self.record(tier, query, [ranked[i] for i in shown], pool=len(items), top_k=top_k)

        found = [
            _scored(by_key[r.item.id], r.score, breakdown_view(breakdown(r.parts, weights)))
            for r in ranked
        ]
        return found, record_items

    async def listing(
        self,
        tier: Tier,
        instance_id: str,
        *,
        agent_type: str,
        limit: int,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """A tier's items of the agent `agent_type` / `instance_id` (semantic: the tenant's)
        in listing order: working by key, episodic and semantic newest first, procedural by
        workflow."""
        if tier == "episodic":
            now_ms = int(self.clock.now() * 1000)
            rows = await self.episodic.instance_rows(
                agent_type, instance_id, now_ms=now_ms, limit=limit, offset=offset
            )
            return [_episode_item(row) for row in rows]
        if tier == "semantic":
            facts = await self.semantic().list_active(limit, offset)
            return [_fact_item(fact, confidence=fact.confidence) for fact in facts]
        if tier == "working":
            items = await self._working_items(instance_id, agent_type)
        else:
            items = [
                MemoryItem(
                    tier="procedural",
                    key=str(workflow["workflow_id"]),
                    value=workflow,
                    metadata={"posterior_mean": workflow.get("posterior_mean")},
                    created_at=int(workflow["created_at"] * 1000),  # seconds -> epoch ms
                )
                for workflow in await self.workflows(agent_type, instance_id)
            ]
        return items[offset : offset + limit]

    async def put(
        self,
        tier: Tier,
        instance_id: str,
        key: str,
        value: Any,
        *,
        agent_type: str,
        metadata: Mapping[str, Any],
        ttl: int | None,
    ) -> MemoryItem:
        """Write `value` under `key`: a working key (TTL `ttl`, default and at most an
        hour), a keyed episode (expiring after `ttl`, default and at most the tenant's
        retention), or a fact about `key` learned through the write policy (`ttl` sets its
        `valid_to`). Refuses (module docstring) before writing; then raises what the tier
        raises (`WriteDenied`, the budget, the episode limit), 502 `semantic_write_failed`
        when a semantic write did not store, or a 422 `validation_error` for a value the tier does
        not take."""
        if tier == "procedural":
            raise _read_only(tier)
        key = validate_key(key)
        if tier == "working":
            ttl = ttl or WORKING_MEMORY_TTL_SECONDS
            if ttl > WORKING_MEMORY_TTL_SECONDS:
                raise ApiError(422, "invalid_ttl", "working memory lives at most 3600 seconds")
        elif tier == "episodic":
            self._require_db()  # 503 episodic_unavailable before the lifecycle is read
            retention = (await self.lifecycle()).episode_retention_days * 86_400
            ttl = ttl or retention
            if ttl > retention:
                raise ApiError(422, "invalid_ttl", f"episodes live at most {retention} seconds")
        if len(json_text(value)) > MAX_VALUE_CHARS:
            raise ApiError(413, "value_too_large", f"value is over {MAX_VALUE_CHARS} characters")
        now = self.clock.now()
        if tier == "working":
            assert ttl is not None
            working = self.working(instance_id, agent_type=agent_type, ttl_seconds=ttl)
            await working.set(key, value)
            return MemoryItem(
                tier="working", key=key, value=value, expires_at=int(now * 1000) + ttl * 1000
            )
        if tier == "episodic":
            assert ttl is not None
            return await self._put_episode(agent_type, instance_id, key, value, metadata, ttl)
        await self._spend_embedding_budget()
        if not isinstance(value, str) or not value.strip():
            raise ApiError(422, "validation_error", "semantic values are non-blank plain text")
        try:
            fact = FactInput(
                content=value,
                subject=key,
                metadata=dict(metadata),
                source="memory_api",
                valid_from=now,
                valid_to=None if ttl is None else now + ttl,
            )
        except ValidationError as exc:
            raise ApiError(422, "validation_error", str(exc.errors()[0]["msg"])) from None
        learned = await self.semantic().learn(fact)
        if learned.error is not None:
            raise ApiError(502, "semantic_write_failed", learned.error)
        return MemoryItem(
            tier="semantic",
            key=key,
            value=value,
            metadata={
                **metadata,
                "fact_id": learned.fact_id,
                "status": learned.status,
                "created": learned.created,
            },
        )

    async def delete(self, tier: Tier, instance_id: str, key: str, *, agent_type: str) -> bool:
        """Delete a working key or a keyed episode of the agent; whether there was one. The
        procedural tier and the tenant's shared facts are not deleted here (405)."""
        if tier == "procedural":
            raise _read_only(tier)
        if tier == "semantic":
            raise ApiError(
                405,
                "semantic_delete_admin_only",
                f"semantic facts are shared by the tenant; an operator deletes them with "
                f"{FACT_DELETE_ROUTE}",
                {"allowed": ["GET", "POST"], "admin_route": FACT_DELETE_ROUTE},
                headers={"allow": "GET, POST"},
            )
        key = validate_key(key)
        if tier == "working":
            memory = self.working(instance_id, agent_type=agent_type)
            existed = await memory.get(key) is not None
            await memory.delete(key)
            return existed
        return await self.episodic.delete_keyed(agent_type, instance_id, key) > 0

    async def episode(
        self, agent_type: str, instance_id: str, episode_id: str
    ) -> tuple[ItemKey, TieredRead, Episode]:
        """One episode of the agent through the hot/warm/cold client (hot, else warm, else
        cold, a hit promoted to hot unless personal), its item key and where it was found;
        404 `episode_not_found` when there is none of this agent (its type included)."""
        item = ItemKey.build(self.tenant, instance_id, "episode", episode_id)
        db = self._require_db()
        counts = self.read_counts = self.read_counts or ReadCounts()
        found = await self.placement_client().get(item.key)
        await flush_counts(db, self.tenant, counts, self.clock.now())  # the brief's figures
        episode = None if found is None else await open_episode_item(found.value, self.personal)
        # Episodes are named by instance; another type's instance of the same id is not this one.
        if found is None or episode is None or episode.agent_type != agent_type:
            raise ApiError(404, "episode_not_found", "no episode with this id for this agent")
        return item, found, episode

    async def archived(
        self,
        namespace: NamespaceKey | None,
        subject: str | None,
        *,
        limit: int,
        cursor: str | None,
        agent_type: str | None = None,
    ) -> tuple[list[ArchivedEpisode], str | None]:
        """One page of the cold index (an agent's `namespace`, a `subject`'s, or both) and
        the next page's cursor, each episode read from its object (only `agent_type`'s when
        given: the index names instances, not types, so such a page may hold fewer than
        `limit` items while the cursor goes on)."""
        cold = self.cold_archive()
        page = await cold.history(
            self.tenant, namespace=namespace, subject=subject, limit=limit, cursor=cursor
        )
        items = []
        for entry in page.items:
            text = await cold.download_text(entry.item_key)
            if text is None:  # erased between the index read and the object read
                continue
            episode = await open_episode_item(text, self.personal)
            if agent_type is None or episode.agent_type == agent_type:
                items.append(
                    ArchivedEpisode(
                        item_key=entry.item_key, archived_at=entry.archived_at, episode=episode
                    )
                )
        return items, page.next_cursor

    async def _spend_embedding_budget(self) -> None:
        """Count one embedding call of the tenant (`EMBED_RATE_LIMITER`); 429 when over
        budget, with `Retry-After` the limiter's period (it reports no reset time)."""
        limiter = self.bindings.embed_rate_limiter
        if limiter is not None and not await limiter.limit(f"embed:{self.tenant}"):
            period = limiter.period_seconds
            raise ApiError(
                429,
                "embedding_rate_limited",
                f"tenant {self.tenant!r} used its embedding budget; retry in {period} s",
                {"retry_after": period},
                headers={"retry-after": str(period)},
            )

    async def _working_items(self, instance_id: str, agent_type: str) -> list[MemoryItem]:
        memory = self.working(instance_id, agent_type=agent_type)
        items: list[MemoryItem] = []
        entries = await memory.entries()
        values = await memory.snapshot(entries)
        for entry in entries:
            value = values.get(entry.key)
            if value is None:
                continue  # expired between list and get
            expires = None if entry.expiration is None else entry.expiration * 1000
            items.append(MemoryItem(tier="working", key=entry.key, value=value, expires_at=expires))
        return items

    async def _put_episode(
        self,
        agent_type: str,
        instance_id: str,
        key: str,
        value: Any,
        metadata: Mapping[str, Any],
        ttl: int,
    ) -> MemoryItem:
        """A keyed write is one `observation` episode; its older versions are deleted after
        it is written, so a failed write leaves the old value."""
        now = self.clock.now()
        episode = Episode(
            episode_id=new_ulid(now),
            run_id=new_ulid(now),
            agent_type=agent_type,
            instance_id=instance_id,
            kind="observation",
            content=json_text(value),
            data={
                "memory_key": key,
                "value": value,
                "metadata": dict(metadata),
                "expires_at": int((now + ttl) * 1000),
            },
            created_at=int(now * 1000),
        )
        await self.episodic.append_episode(episode)
        await self.episodic.delete_keyed(agent_type, instance_id, key, keep=episode.episode_id)
        return _episode_item({**episode.model_dump(), "data": json.dumps(episode.data)})


def _read_only(tier: str) -> ApiError:
    return ApiError(
        405,
        "procedural_read_only",
        f"the procedural tier is read-only here; promote a stable workflow with {PROMOTION_ROUTE}",
        {"allowed": ["GET"], "promotion_route": PROMOTION_ROUTE, "tier": tier},
        headers={"allow": "GET"},
    )


async def call_agent(
    bindings: Bindings, scope: AgentScope, method: str, payload: Mapping[str, Any]
) -> dict[str, Any]:
    """One RPC to the scope's AgentRuntime object; an error it answers (`agent_runtime_do.
    protocol`) is raised as an `ApiError` with its status and code."""
    if bindings.agents is None:
        raise MemoryUnavailable("agent_runtime_unavailable", "the AgentRuntime binding is missing")
    stub = bindings.agents.get_by_name(scope.object_name)
    result = await stub.call(method, {**scope.model_dump(), **payload})
    error = result.get("error")
    if isinstance(error, dict):
        raise ApiError(
            int(error.get("status", 500)),
            str(error.get("code", "agent_runtime_error")),
            str(error.get("message", "the agent runtime reported an error")),
        )
    return result


def _fact_item(fact: Fact, **metadata: Any) -> MemoryItem:
    return MemoryItem(
        tier="semantic",
        key=fact.subject,
        value=fact.content,
        metadata={
            **fact.metadata,
            "fact_id": fact.fact_id,
            "valid_from": fact.valid_from,
            **metadata,
        },
        created_at=fact.created_at,
    )


def _scored(item: MemoryItem, score: float, explained: dict[str, Any]) -> MemoryItem:
    return item.model_copy(update={"score": round(score, 6), "score_breakdown": explained})


def _confidence(item: MemoryItem) -> float:
    """A workflow's posterior mean; 0.5 (no opinion) for everything else."""
    value = item.metadata.get("posterior_mean") if item.tier == "procedural" else None
    return float(value) if isinstance(value, int | float) else 0.5


def _episode_item(row: Mapping[str, Any]) -> MemoryItem:
    data = json.loads(row.get("data") or "{}")
    keyed = "memory_key" in data
    return MemoryItem(
        tier="episodic",
        key=data.get("memory_key") or row["episode_id"],
        value=data["value"] if keyed else row["content"],
        metadata=data.get("metadata", {})
        if keyed
        else {"kind": row.get("kind"), "episode_id": row["episode_id"]},
        created_at=int(row["created_at"]),
        expires_at=data.get("expires_at"),
    )
