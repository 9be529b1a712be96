"""Keyword-index entries for facts written before the index existed (migration 0009).

Migration 0009 adds `semantic_facts.index_terms` NULL to every existing fact, and a fact
whose `index_terms` is NULL has no postings: the keyword channel cannot find it.
`reindex_pending` fills those entries in, a bounded amount per run, so the daily cron (and
`agent-memory reindex` locally) catches a tenant up over as many runs as it takes:

* facts are read oldest first through the partial index `semantic_facts_unindexed` (a seek
  per tenant, empty once everything is indexed), tenants found the same way;
* a pre-0009 fact has no session, so its entry is what the write path gives a fact without
  one: its own words and its date (`_context.index_entry(content, [], valid_from)`);
* the entries go back in one UPDATE per up to `FACTS_PER_STATEMENT` facts, carried as one
  JSON parameter (two bound parameters, whatever the count: D1 counts statements against
  its 1000 queries per invocation), and only where `index_terms IS NULL` still holds, so a
  fact indexed meanwhile by another writer is never overwritten; the `UPDATE OF
  index_terms` trigger then writes the postings and the tenant's statistics;
* every statement names one tenant (`tenant_id = ?` first), so a run for tenant A changes
  no statistic of tenant B.

Idempotent and safe to interrupt: what a stopped run did not reach is still NULL.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from agent_memory.statements import distinct_tenants_sql
from agent_memory.tiers.semantic._context import index_entry
from bindings.ports.d1 import D1Database

log = logging.getLogger(__name__)

# Facts read per page and sent per UPDATE. The UPDATE looks each fact's entry up in the
# JSON parameter (a scan of it per fact), so both its size and the page are kept small.
FACTS_PER_STATEMENT = 100
MAX_STATEMENT_JSON = 64_000  # characters of the JSON parameter before a new statement

StoppedBy = Literal["tenant_budget", "total_budget", "time_budget"]

# One seek per tenant on the partial index `semantic_facts_unindexed`.
_UNINDEXED_TENANTS_SQL = distinct_tenants_sql("semantic_facts", "index_terms IS NULL")
_PAGE_SQL = (
    "SELECT fts_rowid, content, valid_from FROM semantic_facts "
    "WHERE tenant_id = ? AND index_terms IS NULL ORDER BY fts_rowid LIMIT ?"
)
_UPDATE_SQL = (
    "UPDATE semantic_facts SET (index_terms, index_length, context_length) = "
    "(SELECT json_extract(j.value, '$[1]'), json_extract(j.value, '$[2]'), "
    "json_extract(j.value, '$[3]') FROM json_each(?1) AS j "
    "WHERE json_extract(j.value, '$[0]') = semantic_facts.fts_rowid) "
    "WHERE tenant_id = ?2 AND fts_rowid IN (SELECT json_extract(value, '$[0]') "
    "FROM json_each(?1)) AND index_terms IS NULL"
)
_COUNT_SQL = "SELECT COUNT(*) AS n FROM semantic_facts WHERE tenant_id = ? AND index_terms IS NULL"


class ReindexBudget(BaseModel):
    """How much one run may do: facts per tenant, facts in all, and wall time."""

    facts_per_tenant: int = Field(default=5_000, ge=1)
    facts_total: int = Field(default=20_000, ge=1)
    max_seconds: float = Field(default=300.0, ge=0)


class TenantReindex(BaseModel):
    tenant_id: str
    reindexed: int = 0
    # Facts of the tenant still without an entry after this run (0: caught up).
    remaining: int = 0
    error: str | None = None


class ReindexReport(BaseModel):
    reindexed: int = 0
    # The budget that left facts unindexed (None: every tenant reached is caught up).
    stopped_by: StoppedBy | None = None
    tenants: list[TenantReindex] = Field(default_factory=list)


async def unindexed_tenants(db: D1Database) -> list[str]:
    """Every tenant with at least one fact not in the keyword index, sorted."""
    result = await db.prepare(_UNINDEXED_TENANTS_SQL).all()
    return [str(row["tenant_id"]) for row in result.results]


async def unindexed_count(db: D1Database, tenant_id: str) -> int:
    """How many of the tenant's facts have no keyword-index entry."""
    return int(await db.prepare(_COUNT_SQL).bind(tenant_id).first_value("n") or 0)


def _statement_groups(rows: Sequence[dict[str, object]]) -> list[str]:
    """The page's entries as JSON parameters `[[fts_rowid, index_terms, length,
    context_length], ...]`, each at most `MAX_STATEMENT_JSON` characters (or one fact)."""
    groups: list[str] = []
    current: list[str] = []
    size = 0
    for row in rows:
        valid_from = row["valid_from"]
        entry = index_entry(
            str(row["content"]),
            [],
            None if valid_from is None else int(str(valid_from)) / 1000,
        )
        item = json.dumps(
            [int(str(row["fts_rowid"])), entry.index_terms, entry.length, entry.context_length],
            separators=(",", ":"),
            ensure_ascii=False,
        )
        if current and size + len(item) > MAX_STATEMENT_JSON:
            groups.append(f"[{','.join(current)}]")
            current, size = [], 0
        current.append(item)
        size += len(item) + 1
    if current:
        groups.append(f"[{','.join(current)}]")
    return groups


async def reindex_tenant(
    db: D1Database, tenant_id: str, limit: int, *, deadline: float | None = None
) -> int:
    """Index up to `limit` of the tenant's unindexed facts, oldest first; stops early at
    `deadline` (`time.monotonic()`). Returns how many facts left the unindexed list (a fact
    another writer indexed between the read and the UPDATE keeps that writer's entry)."""
    done = 0
    while done < limit and (deadline is None or time.monotonic() < deadline):
        page = min(FACTS_PER_STATEMENT, limit - done)
        rows = (await db.prepare(_PAGE_SQL).bind(tenant_id, page).all()).results
        for group in _statement_groups(rows):
            await db.prepare(_UPDATE_SQL).bind(group, tenant_id).run()
        done += len(rows)
        if len(rows) < page:
            break
    return done


async def reindex_pending(
    db: D1Database,
    budget: ReindexBudget | None = None,
    *,
    tenants: Sequence[str] | None = None,
    progress: Callable[[TenantReindex], None] | None = None,
) -> ReindexReport:
    """Index the unindexed facts of `tenants` (default: every tenant that has any) within
    `budget`. One tenant's failure is logged and reported; the others still run."""
    budget = budget or ReindexBudget()
    started = time.monotonic()
    deadline = started + budget.max_seconds
    report = ReindexReport()
    names = list(tenants) if tenants is not None else await unindexed_tenants(db)
    for tenant in names:
        left = budget.facts_total - report.reindexed
        if left <= 0:
            report.stopped_by = "total_budget"
            break
        if time.monotonic() >= deadline:
            report.stopped_by = "time_budget"
            break
        item = TenantReindex(tenant_id=tenant)
        cap = min(left, budget.facts_per_tenant)
        try:
            item.reindexed = await reindex_tenant(db, tenant, cap, deadline=deadline)
            item.remaining = await unindexed_count(db, tenant)
        except Exception as exc:
            log.exception("reindex: tenant %s failed", tenant)
            item.error = f"{type(exc).__name__}: {exc}"
        report.reindexed += item.reindexed
        if item.remaining and item.reindexed >= cap and report.stopped_by is None:
            report.stopped_by = (
                "tenant_budget" if cap == budget.facts_per_tenant else "total_budget"
            )
        report.tenants.append(item)
        log.info(
            "reindex: tenant %s: %d fact(s) indexed, %d still unindexed",
            tenant,
            item.reindexed,
            item.remaining,
        )
        if progress is not None:
            progress(item)
    if time.monotonic() >= deadline and any(t.remaining for t in report.tenants):
        report.stopped_by = "time_budget"
    return report
