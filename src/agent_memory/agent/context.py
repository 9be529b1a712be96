"""Context assembly: what an agent is given at the start of a turn (`TurnContext`), and
`render_context`, its text as one system message.

Working memory and the newest `EPISODE_POOL_FACTOR` times `recent_episodes` episodes are scored
like semantic recall, with their tier's weights (ADR-0051, `MEMORY_RETRIEVAL_CONFIG`); each
read emits a `memory_retrieved` event in the background. Semantic prefetch (agent types
with `semantic_prefetch`) is best effort: a failure gives no facts, since the agent can
still call `recall_memory` itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from pydantic import BaseModel, Field

from agent_memory.governance.agent_types import AgentType, WorkflowSpec
from agent_memory.memory import Memory
from agent_memory.retrieval.scoring import RankItem
from agent_memory.tiers.episodic import Episode
from agent_memory.tiers.semantic.models import MAX_QUERY_CHARS, MAX_TOP_K
from agent_memory.tiers.working import WorkingMemory

EPISODE_PREVIEW_CHARS = 400
WORKING_PREVIEW_CHARS = 2_000
CONTEXT_HEADER = "# Context for this turn"
EPISODES_HEADER = "## Recent episodes (newest first)"
EPISODE_LINE_PREFIX = "- [episode "
# Episodes scored at turn start: this many times the agent type's `recent_episodes`.
EPISODE_POOL_FACTOR = 4
MAX_EPISODE_POOL = 100

log = logging.getLogger(__name__)


class TurnContext(BaseModel):
    turn_state: dict[str, Any] = Field(default_factory=dict)
    working_memory: dict[str, Any] = Field(default_factory=dict)
    episodes: list[Episode] = Field(default_factory=list)
    facts: list[dict[str, Any]] = Field(default_factory=list)
    workflow: WorkflowSpec | None = None

    @property
    def episode_ids(self) -> list[str]:
        return [episode.episode_id for episode in self.episodes]


async def assemble_context(
    memory: Memory,
    *,
    agent_type: AgentType,
    turn_state: dict[str, Any],
    working: WorkingMemory | None,
    input_text: str = "",
) -> TurnContext:
    """Read working memory, recent episodes (and prefetched facts) concurrently; score the
    first two with their tier's weights and record what was retrieved."""
    config = agent_type.memory

    async def working_snapshot() -> dict[str, Any]:
        if working is None or not config.working_memory:
            return {}
        entries = await working.entries()
        values = await working.snapshot()
        items = [
            RankItem(
                id=entry.key,
                text=f"{entry.key} {json.dumps(values[entry.key], ensure_ascii=False)}",
                # KV keeps the expiry, not the write time: written = expiry - TTL.
                written_at=float(entry.expiration - working.ttl_seconds)
                if entry.expiration
                else 0.0,
                confidence=1.0,
            )
            for entry in entries
            if entry.key in values
        ]
        ranked = memory.rank(
            "working", input_text, items, pool=len(items), agent_type=agent_type.name
        )
        return {r.item.id: values[r.item.id] for r in ranked}

    async def recent() -> list[Episode]:
        if config.recent_episodes == 0:
            return []
        wanted = config.recent_episodes
        pool = await memory.episodic.recent_episodes(
            agent_type.name, min(MAX_EPISODE_POOL, max(wanted, wanted * EPISODE_POOL_FACTOR))
        )
        by_id = {e.episode_id: e for e in pool}
        items = [
            RankItem(
                id=e.episode_id,
                text=e.content,
                written_at=e.created_at / 1000.0,
                confidence=e.importance,
            )
            for e in pool
        ]
        ranked = memory.rank(
            "episodic", input_text, items, pool=len(items), top_k=wanted, agent_type=agent_type.name
        )
        chosen = (by_id[r.item.id] for r in ranked)
        return sorted(chosen, key=lambda e: (e.created_at, e.episode_id), reverse=True)

    async def facts() -> list[dict[str, Any]]:
        query = input_text.strip()[:MAX_QUERY_CHARS]
        if not (config.semantic_prefetch and query and memory.has_semantic):
            return []
        try:
            semantic = memory.semantic(agent_type=agent_type.name)
            result = await semantic.recall(query, max(1, min(config.semantic_top_k, MAX_TOP_K)))
        except Exception as exc:
            log.warning("semantic prefetch failed for tenant %s: %s", memory.tenant, exc)
            return []
        return [r.summary() for r in result.results]

    snapshot, episodes, found = await asyncio.gather(working_snapshot(), recent(), facts())
    return TurnContext(
        turn_state=turn_state, working_memory=snapshot, episodes=episodes, facts=found
    )


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split())  # one line per item keeps the sections readable
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_context(context: TurnContext) -> str:
    """The context as one message: stable headings a model (or a test double) can read."""
    lines = [CONTEXT_HEADER]
    state = context.turn_state
    if state:
        lines.append(
            f"Instance turn {state.get('turn_count', 0)}; previous run "
            f"{state.get('last_run_id') or 'none'} ({state.get('last_status') or 'n/a'})."
        )
    if context.workflow is not None:
        lines += ["## Workflow for this task", context.workflow.instructions]
    lines.append("## Working memory")
    if context.working_memory:
        for key, value in context.working_memory.items():
            encoded = json.dumps(value, ensure_ascii=False)
            lines.append(f"- {key} = {_preview(encoded, WORKING_PREVIEW_CHARS)}")
    else:
        lines.append("(empty)")
    lines.append(EPISODES_HEADER)
    if context.episodes:
        for episode in context.episodes:
            lines.append(
                f"{EPISODE_LINE_PREFIX}{episode.episode_id} run {episode.run_id} "
                f"{episode.kind}] {_preview(episode.content, EPISODE_PREVIEW_CHARS)}"
            )
    else:
        lines.append("(none)")
    if context.facts:
        lines.append("## Known facts")
        for fact in context.facts:
            lines.append(f"- {_preview(str(fact.get('content', fact)), EPISODE_PREVIEW_CHARS)}")
    return "\n".join(lines)
