"""Context assembly: what an agent is given at the start of a turn.

`TurnContext` holds the four things a turn starts from: the instance's `turn_state`, a
snapshot of its working memory, recent episodes of (tenant, agent type) and, for agent
types with `semantic_prefetch`, facts recalled for the input. `render_context` turns it
into the text of one system message.

Tier-aware retrieval (ADR-0051): working memory and the episodes are scored like semantic
recall, with their tier's weights from `MEMORY_RETRIEVAL_CONFIG` (`retrieval.rank`:
lexical relevance to the turn input, recency, confidence — an episode's importance, 1 for
working memory — and density). Working memory keys are listed best first; the episodes
are the `recent_episodes` best of the newest `EPISODE_POOL_FACTOR` times as many, listed
newest first. Each read emits a `memory_retrieved` event (tier `working` / `episodic`)
with the scores, in the background, like semantic recall.

Semantic prefetch is a hook: `register_semantic_prefetch(fn)` installs the function the
semantic tier provides; with none installed (or prefetch off) the section is empty.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

from agent_memory.agent.retrieval_events import record_retrieval, retrieval_config
from agent_memory.governance.agent_types import AgentType, WorkflowSpec
from agent_memory.retrieval.scoring import RankItem, rank
from agent_memory.tiers.episodic import Episode, EpisodicStore
from agent_memory.tiers.working import WorkingMemory
from bindings.environment import Bindings

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


SemanticPrefetch = Callable[[Bindings, str, AgentType, str, int], Awaitable[list[dict[str, Any]]]]
_PREFETCH: list[SemanticPrefetch] = []


def register_semantic_prefetch(fn: SemanticPrefetch) -> None:
    """Install the tier-3 prefetch: `fn(bindings, tenant, agent_type, text, top_k)` → facts."""
    _PREFETCH[:] = [fn]


async def assemble_context(
    *,
    agent_type: AgentType,
    turn_state: dict[str, Any],
    working: WorkingMemory | None,
    episodic: EpisodicStore | None,
    bindings: Bindings | None = None,
    tenant: str = "",
    input_text: str = "",
) -> TurnContext:
    """Read working memory, recent episodes (and prefetched facts) concurrently; score the
    first two with their tier's weights and record what was retrieved."""
    memory = agent_type.memory
    config = retrieval_config(bindings)
    now = bindings.clock.now() if bindings is not None else None

    async def working_snapshot() -> dict[str, Any]:
        if working is None or not memory.working_memory:
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
        at = now if now is not None else max((i.written_at for i in items), default=0.0)
        ranked = rank(input_text, items, config.weights_for("working"), at)
        record_retrieval(
            bindings, tenant, "working", input_text, ranked, agent_type.name, at, len(items)
        )
        return {r.item.id: values[r.item.id] for r in ranked}

    async def recent() -> list[Episode]:
        if episodic is None or memory.recent_episodes == 0:
            return []
        wanted = memory.recent_episodes
        pool = await episodic.recent_episodes(
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
        at = now if now is not None else max((i.written_at for i in items), default=0.0)
        ranked = rank(input_text, items, config.weights_for("episodic"), at)[:wanted]
        record_retrieval(
            bindings, tenant, "episodic", input_text, ranked, agent_type.name, at, len(items)
        )
        chosen = [by_id[r.item.id] for r in ranked]
        chosen.sort(key=lambda e: (e.created_at, e.episode_id), reverse=True)
        return chosen

    async def facts() -> list[dict[str, Any]]:
        if not (memory.semantic_prefetch and _PREFETCH and bindings is not None):
            return []
        return await _PREFETCH[0](bindings, tenant, agent_type, input_text, memory.semantic_top_k)

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
