"""Context assembly: what an agent is given at the start of a turn.

`TurnContext` holds the four things a turn starts from: the instance's `turn_state`, a
snapshot of its working memory, the latest episodes of (tenant, agent type) (newest first,
at most 10) and, for agent types with `semantic_prefetch`, facts recalled for the input.
`render_context` turns it into the text of one system message.

Semantic prefetch is a hook: `register_semantic_prefetch(fn)` installs the function the
semantic tier provides; with none installed (or prefetch off) the section is empty.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

from agent_memory.governance.agent_types import AgentType, WorkflowSpec
from agent_memory.tiers.episodic import Episode, EpisodicStore
from agent_memory.tiers.working import WorkingMemory
from bindings.environment import Bindings

EPISODE_PREVIEW_CHARS = 400
WORKING_PREVIEW_CHARS = 2_000
CONTEXT_HEADER = "# Context for this turn"
EPISODES_HEADER = "## Recent episodes (newest first)"
EPISODE_LINE_PREFIX = "- [episode "


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
    """Read working memory, recent episodes (and prefetched facts) concurrently."""
    memory = agent_type.memory

    async def working_snapshot() -> dict[str, Any]:
        if working is None or not memory.working_memory:
            return {}
        return await working.snapshot()

    async def recent() -> list[Episode]:
        if episodic is None or memory.recent_episodes == 0:
            return []
        return await episodic.recent_episodes(agent_type.name, memory.recent_episodes)

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
