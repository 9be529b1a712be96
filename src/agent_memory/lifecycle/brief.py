"""The daily brief (cron `0 6 * * *`): how full each tenant's memory is.

Per tenant: episodes (the trigger-maintained counter), the limit and its warning threshold,
facts by status and those not yet in the keyword index, runs, episodes past retention, the
cold tier's holdings, namespace-migration read counters, and its AgentRuntime objects as they
last reported. Levels: `ok`; `warning` at 80 % of the episode limit (logged at WARNING);
`at_limit`, where new episodes are refused (docs/lifecycle.md, "At the limit"; logged at
ERROR). Two statements per tenant (scalar subqueries declared by the stores that own the
tables, each `tenant_id = ?` first), batched: 100 tenants cost 4 round trips.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.governance import events
from agent_memory.lifecycle import prune, retention
from agent_memory.lifecycle.retention import (
    DEFAULT_EPISODE_LIMIT,
    INSTANCE_FIGURES_SQL,
    instance_figures,
    known_tenants,
    warn_threshold,
)
from agent_memory.statements import STATEMENTS_PER_BATCH
from agent_memory.tiers import episodic, working
from agent_memory.tiers.semantic import memory as semantic
from bindings.ports.d1 import D1Database

log = logging.getLogger(__name__)

Level = Literal["ok", "warning", "at_limit"]


class TenantBrief(BaseModel):
    tenant_id: str
    level: Level
    episodes: int
    episode_limit: int
    episode_warn_at: int
    retention_days: int
    episodes_past_retention: int
    runs: int
    facts_active: int
    facts_pending_vector: int
    facts_superseded: int
    # Facts (any status) with no keyword-index entry yet: written before migration 0009 and
    # not reached by the reindex job (`tiers.semantic.reindex`); the keyword channel cannot
    # find them until it does. A warning while above 0.
    facts_unindexed: int = 0
    links: int
    archives: int
    archived_rows: int
    # Update pairs the reconciler's adjudicator was `unsure` about in the last 24 hours
    # (`memory_written` events with `decision: unsure`): for a person to look at.
    updates_unsure: int = 0
    # The tenant's AgentRuntime Durable Objects, as each last reported from its alarm
    # (`agent_instances`, `agent_memory.lifecycle.instances`): per-object storage, and
    # episodic writes still held (failed = retries exhausted; their payloads stay in the
    # object's failed_writes, shown by the admin run view).
    agent_instances: int = 0
    agent_storage_bytes_total: int = 0
    agent_storage_bytes_max: int = 0
    agent_run_log_rows_max: int = 0
    agent_pending_writes: int = 0
    agent_failed_writes: int = 0
    agent_failed_oldest_age_ms: int | None = None
    # Namespace migration (docs/tiered-memory.md): reads of hot keys under compat read since
    # the start of the previous UTC day: found under the canonical key, found only under a
    # legacy key (each one read-repaired), or in neither.
    namespace_canonical_hits: int = 0
    namespace_legacy_hits: int = 0
    namespace_misses: int = 0


class Brief(BaseModel):
    generated_at_ms: int
    tenants: list[TenantBrief] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def totals(self) -> dict[str, int]:
        return {
            "tenants": len(self.tenants),
            "episodes": sum(t.episodes for t in self.tenants),
            "facts_active": sum(t.facts_active for t in self.tenants),
            "facts_pending_vector": sum(t.facts_pending_vector for t in self.tenants),
            "facts_unindexed": sum(t.facts_unindexed for t in self.tenants),
            "tenants_warning": sum(t.level == "warning" for t in self.tenants),
            "tenants_at_limit": sum(t.level == "at_limit" for t in self.tenants),
            "agent_failed_writes": sum(t.agent_failed_writes for t in self.tenants),
            "namespace_canonical_hits": sum(t.namespace_canonical_hits for t in self.tenants),
            "namespace_legacy_hits": sum(t.namespace_legacy_hits for t in self.tenants),
            "namespace_misses": sum(t.namespace_misses for t in self.tenants),
        }

    def summary(self) -> dict[str, Any]:
        return {"generated_at_ms": self.generated_at_ms, **self.totals(), "warnings": self.warnings}


# One statement per tenant, each owner's figures on its own tables side by side.
_TENANT_SQL = "SELECT " + ", ".join(
    (
        episodic.brief_figures(retention.RETENTION_DAYS),
        retention.BRIEF_FIGURES,
        semantic.BRIEF_FIGURES,
        prune.BRIEF_FIGURES,
        events.BRIEF_FIGURES,
        working.BRIEF_FIGURES,
    )
)


def _level(episodes: int, limit: int) -> Level:
    if episodes >= limit:
        return "at_limit"
    if episodes >= warn_threshold(limit):
        return "warning"
    return "ok"


async def build_brief(
    db: D1Database,
    *,
    now_ms: int,
    default_retention_days: int,
    tenants: Sequence[str] | None = None,
    progress: Callable[[TenantBrief], None] | None = None,
) -> Brief:
    """The brief for `tenants` (default: every tenant with episodes, runs, facts or
    namespace reads)."""
    names = (
        list(tenants)
        if tenants is not None
        else await known_tenants(
            db,
            (
                "memory_episodes",
                "agent_runs",
                "semantic_facts",
                "agent_instances",
                "namespace_reads",
            ),
        )
    )
    brief = Brief(generated_at_ms=now_ms)
    per_batch = STATEMENTS_PER_BATCH // 2  # two statements per tenant
    for start in range(0, len(names), per_batch):
        chunk = names[start : start + per_batch]
        results = await db.batch(
            [db.prepare(_TENANT_SQL).bind(t, now_ms, default_retention_days) for t in chunk]
            + [db.prepare(INSTANCE_FIGURES_SQL).bind(t) for t in chunk]
        )
        for index, tenant in enumerate(chunk):
            row = results[index].results[0]
            agents = instance_figures(results[len(chunk) + index].results[0])
            limit = int(row["episode_limit"] or DEFAULT_EPISODE_LIMIT)
            episodes = int(row["episodes"] or 0)
            item = TenantBrief(
                tenant_id=tenant,
                level=_level(episodes, limit),
                episodes=episodes,
                episode_limit=limit,
                episode_warn_at=warn_threshold(limit),
                retention_days=int(row["days"] or default_retention_days),
                episodes_past_retention=int(row["past_retention"] or 0),
                runs=int(row["runs"] or 0),
                facts_active=int(row["facts_active"] or 0),
                facts_pending_vector=int(row["facts_pending"] or 0),
                facts_superseded=int(row["facts_superseded"] or 0),
                facts_unindexed=int(row["facts_unindexed"] or 0),
                links=int(row["links"] or 0),
                archives=int(row["archives"] or 0),
                archived_rows=int(row["archived"] or 0),
                updates_unsure=int(row["unsure"] or 0),
                agent_instances=agents.instances,
                agent_storage_bytes_total=agents.storage_bytes_total,
                agent_storage_bytes_max=agents.storage_bytes_max,
                agent_run_log_rows_max=agents.run_log_rows_max,
                agent_pending_writes=agents.pending_writes,
                agent_failed_writes=agents.failed_writes,
                agent_failed_oldest_age_ms=(
                    None
                    if agents.failed_oldest_at is None
                    else max(0, now_ms - agents.failed_oldest_at)
                ),
                namespace_canonical_hits=int(row["ns_canonical"] or 0),
                namespace_legacy_hits=int(row["ns_legacy"] or 0),
                namespace_misses=int(row["ns_misses"] or 0),
            )
            brief.tenants.append(item)
            _report(brief, item)
            if progress is not None:
                progress(item)
    log.info("daily brief: %s", brief.totals())
    return brief


def _report(brief: Brief, item: TenantBrief) -> None:
    if item.agent_failed_writes:
        hours = (item.agent_failed_oldest_age_ms or 0) / 3_600_000
        failed = (
            f"tenant {item.tenant_id}: {item.agent_failed_writes} episodic write(s) failed "
            f"for good in its agent instances (oldest {hours:.1f} h old); each payload is kept "
            "in its instance's failed_writes (GET /admin/agents/{tenant}/runs/{run_id})."
        )
        log.warning("daily brief: %s", failed)
        brief.warnings.append(failed)
    if item.facts_unindexed:
        unindexed = (
            f"tenant {item.tenant_id}: {item.facts_unindexed} fact(s) are not in the keyword "
            "index yet (written before migration 0009), so keyword recall misses them; the "
            "daily cron's reindex job adds a bounded number each run (`agent-memory reindex` "
            "locally)."
        )
        log.warning("daily brief: %s", unindexed)
        brief.warnings.append(unindexed)
    if item.namespace_legacy_hits:
        legacy = (
            f"tenant {item.tenant_id}: {item.namespace_legacy_hits} hot read(s) found only "
            f"under a legacy key since yesterday ({item.namespace_canonical_hits} canonical); "
            "each was read-repaired. Keep MEMORY_NAMESPACE_COMPAT_READ on (run the namespace "
            "backfill) until this stays at 0."
        )
        log.info("daily brief: %s", legacy)
        brief.warnings.append(legacy)
    if item.updates_unsure:
        unsure = (
            f"tenant {item.tenant_id}: {item.updates_unsure} pair(s) of facts the update "
            "adjudicator was unsure about in the last day (memory_written events with "
            "decision 'unsure'); both facts stay live until someone decides."
        )
        log.warning("daily brief: %s", unsure)
        brief.warnings.append(unsure)
    if item.level == "at_limit":
        message = (
            f"tenant {item.tenant_id} is AT its episode limit ({item.episodes}/"
            f"{item.episode_limit}): new episodes are being refused. Lower its retention "
            f"(PUT /admin/tenants/{item.tenant_id}/lifecycle) and prune, or erase subjects."
        )
        log.error("daily brief: %s", message)
    elif item.level == "warning":
        message = (
            f"tenant {item.tenant_id} has {item.episodes} episodes, over the warning "
            f"threshold {item.episode_warn_at} of its limit {item.episode_limit}; "
            f"{item.episodes_past_retention} are past its {item.retention_days}-day "
            "retention and go at the next prune."
        )
        log.warning("daily brief: %s", message)
    else:
        return
    brief.warnings.append(message)
