"""The daily brief (cron `0 6 * * *`; docs/lifecycle.md, "Daily brief"): how full each
tenant's memory is, with a level (`ok`; `warning` at 80 % of the episode limit; `at_limit`,
where new episodes are refused) and warnings. Two statements per tenant (scalar subqueries
declared by the stores that own the tables), batched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent_memory.governance import writes as events
from agent_memory.ids import STATEMENTS_PER_BATCH, chunks
from agent_memory.lifecycle import prune, retention
from agent_memory.lifecycle.retention import (
    DEFAULT_EPISODE_LIMIT,
    TenantTable,
    known_tenants,
    warn_threshold,
)
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
    links: int
    archives: int
    archived_rows: int
    updates_unsure: int = 0  # pairs the adjudicator was `unsure` about in the last 24 h
    # The tenant's AgentRuntime objects as each last reported (`retention.report_instance`).
    agent_instances: int = 0
    agent_storage_bytes_total: int = 0
    agent_storage_bytes_max: int = 0
    agent_run_log_rows_max: int = 0
    agent_pending_writes: int = 0
    agent_failed_writes: int = 0
    agent_failed_oldest_age_ms: int | None = None
    # Hot reads under compat read since the previous UTC day (docs/tiered-memory.md).
    namespace_canonical_hits: int = 0
    namespace_legacy_hits: int = 0
    namespace_misses: int = 0


_FACTS = ("episodes", "facts_active", "facts_pending_vector")
_NAMESPACE_READS = ("namespace_canonical_hits", "namespace_legacy_hits", "namespace_misses")


class Brief(BaseModel):
    generated_at_ms: int
    tenants: list[TenantBrief] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def totals(self) -> dict[str, int]:
        def total(name: str) -> int:
            return sum(getattr(t, name) for t in self.tenants)

        return {
            "tenants": len(self.tenants),
            **{n: total(n) for n in _FACTS},
            "tenants_warning": sum(t.level == "warning" for t in self.tenants),
            "tenants_at_limit": sum(t.level == "at_limit" for t in self.tenants),
            **{n: total(n) for n in ("agent_failed_writes", *_NAMESPACE_READS)},
        }

    def summary(self) -> dict[str, Any]:
        return {"generated_at_ms": self.generated_at_ms, **self.totals(), "warnings": self.warnings}


# One statement per tenant (?1 tenant, ?2 now in ms, ?3 default retention days), each owner's
# scalar subqueries on its own tables side by side, named as the `TenantBrief` fields they fill
# (but the limit's and retention's inputs).
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


_BRIEF_TABLES: tuple[TenantTable, ...] = (
    "memory_episodes",
    "agent_runs",
    "semantic_facts",
    "agent_instances",
    "namespace_reads",
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
) -> Brief:
    """The brief for `tenants` (default: every tenant with episodes, runs, facts or
    namespace reads)."""
    names = list(tenants) if tenants is not None else await known_tenants(db, _BRIEF_TABLES)
    brief = Brief(generated_at_ms=now_ms)
    for chunk in chunks(names, STATEMENTS_PER_BATCH // 2):  # two statements per tenant
        results = await db.batch(
            [db.prepare(_TENANT_SQL).bind(t, now_ms, default_retention_days) for t in chunk]
            + [db.prepare(retention.INSTANCES_SQL).bind(t) for t in chunk]
        )
        for index, tenant in enumerate(chunk):
            row = dict(results[index].results[0])
            agents = dict(results[len(chunk) + index].results[0])
            oldest = agents.pop("failed_oldest")
            limit = int(row.pop("episode_limit") or DEFAULT_EPISODE_LIMIT)
            episodes = int(row.pop("episodes") or 0)
            days = int(row.pop("days") or default_retention_days)  # the rest are fields
            item = TenantBrief(
                tenant_id=tenant,
                level=_level(episodes, limit),
                episodes=episodes,
                episode_limit=limit,
                episode_warn_at=warn_threshold(limit),
                retention_days=days,
                agent_failed_oldest_age_ms=None if oldest is None else max(0, now_ms - int(oldest)),
                **{field: int(value or 0) for field, value in row.items()},
                **{field: int(value or 0) for field, value in agents.items()},
            )
            brief.tenants.append(item)
            _report(brief, item)
    log.info("daily brief: %s", brief.totals())
    return brief


def _report(brief: Brief, item: TenantBrief) -> None:
    t = item.tenant_id
    hours = (item.agent_failed_oldest_age_ms or 0) / 3_600_000
    warnings = (
        (
            item.agent_failed_writes,
            logging.WARNING,
            f"tenant {t}: {item.agent_failed_writes} episodic write(s) failed "
            f"for good in its agent instances (oldest {hours:.1f} h old); each payload is kept "
            "in its instance's failed_writes (GET /admin/agents/{tenant}/runs/{run_id}).",
        ),
        (
            item.namespace_legacy_hits,
            logging.INFO,
            f"tenant {t}: {item.namespace_legacy_hits} hot read(s) found only "
            f"under a legacy key since yesterday ({item.namespace_canonical_hits} canonical); "
            "each was read-repaired. Keep MEMORY_NAMESPACE_COMPAT_READ on (run the namespace "
            "backfill) until this stays at 0.",
        ),
        (
            item.updates_unsure,
            logging.WARNING,
            f"tenant {t}: {item.updates_unsure} pair(s) of facts the update "
            "adjudicator was unsure about in the last day (memory_written events with "
            "decision 'unsure'); both facts stay live until someone decides.",
        ),
        (
            item.level == "at_limit",
            logging.ERROR,
            f"tenant {t} is AT its episode limit ({item.episodes}/"
            f"{item.episode_limit}): new episodes are being refused. Lower its retention "
            f"(PUT /admin/tenants/{t}/lifecycle) and prune, or erase subjects.",
        ),
        (
            item.level == "warning",
            logging.WARNING,
            f"tenant {t} has {item.episodes} episodes, over the warning "
            f"threshold {item.episode_warn_at} of its limit {item.episode_limit}; "
            f"{item.episodes_past_retention} are past its {item.retention_days}-day "
            "retention and go at the next prune.",
        ),
    )
    for due, level, text in warnings:
        if due:
            log.log(level, "daily brief: %s", text)
            brief.warnings.append(text)
