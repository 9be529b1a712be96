"""Agent types: what each kind of agent is allowed to do and remember (docs/agent-runtime.md,
"Agent types and tools"). A deployment runs the built-in types and those its `AGENT_TYPES` var
(a JSON list) defines or replaces by name (`catalog`); a run of any other type is refused (404,
nothing written). `long_term_enabled` adds `recall_memory` / `store_memory` (ADR-0030:
declarative, not listed in `tools`); `semantic_prefetch` is off by default: retrieval is the
agent's decision.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agent_memory.namespace import AGENT_TYPE_PATTERN

MAX_RECENT_EPISODES = 10
WORKING_MEMORY_TOOLS = (
    "working_memory_get",
    "working_memory_set",
    "working_memory_delete",
    "working_memory_list",
)


class MemoryConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    working_memory: bool = True
    recent_episodes: int = Field(default=MAX_RECENT_EPISODES, ge=0, le=MAX_RECENT_EPISODES)
    long_term_enabled: bool = False
    semantic_prefetch: bool = False
    semantic_top_k: int = Field(default=5, ge=1, le=20)


class WorkflowSpec(BaseModel):
    """One way of doing a task type; the procedural bandit learns which works best."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str = Field(min_length=1, max_length=128)
    task_type: str = Field(min_length=1, max_length=64)
    instructions: str = Field(min_length=1)
    spec: dict[str, Any] = Field(default_factory=dict)


class AgentType(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str = Field(pattern=AGENT_TYPE_PATTERN)
    description: str
    system_prompt: str
    tools: tuple[str, ...] = WORKING_MEMORY_TOOLS
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    step_limit: int = Field(default=8, ge=1, le=64)
    timeout_seconds: float = Field(default=60.0, gt=0, le=600)
    default_task_type: str = "general"
    workflows: tuple[WorkflowSpec, ...] = ()


ASSISTANT = AgentType(
    name="assistant",
    description="A general assistant that keeps notes in working memory.",
    system_prompt=(
        "You are a careful assistant. Use working memory to keep facts you will need later "
        "in this conversation. Earlier episodes of your work are listed in the context; "
        "build on them instead of starting over."
    ),
    workflows=(
        WorkflowSpec(
            workflow_id="assistant.general.direct",
            task_type="general",
            instructions="Answer directly in one short paragraph.",
        ),
        WorkflowSpec(
            workflow_id="assistant.general.plan_first",
            task_type="general",
            instructions="Write a two-line plan, then answer.",
        ),
    ),
)

SDR = AgentType(
    name="sdr",
    description="A sales development agent that learns which outreach framing works.",
    system_prompt=(
        "You are a sales development representative. Draft outreach for the contact in the "
        "input. Use what earlier episodes say about this contact; keep the current contact "
        "and draft in working memory."
    ),
    memory=MemoryConfig(long_term_enabled=True),
    step_limit=10,
    timeout_seconds=90.0,
    default_task_type="outreach",
    workflows=(
        WorkflowSpec(
            workflow_id="sdr.outreach.direct_roi",
            task_type="outreach",
            instructions="Lead with a concrete ROI figure.",
        ),
        WorkflowSpec(
            workflow_id="sdr.outreach.social_proof",
            task_type="outreach",
            instructions="Lead with a customer in the same industry.",
        ),
        WorkflowSpec(
            workflow_id="sdr.outreach.question_led",
            task_type="outreach",
            instructions="Open with one question about their current process.",
        ),
    ),
)

BUILT_IN: Mapping[str, AgentType] = MappingProxyType({a.name: a for a in (ASSISTANT, SDR)})


@lru_cache(maxsize=8)
def catalog(defined: str = "") -> Mapping[str, AgentType]:
    """The deployment's agent types: the built-in ones and those `defined` (the `AGENT_TYPES`
    var, a JSON list of agent types) adds or replaces by name. Raises `ValueError` for a
    definition that is not a valid agent type."""
    if not defined.strip():
        return BUILT_IN
    try:
        types = _DEFINITIONS.validate_json(defined)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"]
        raise ValueError(f"AGENT_TYPES is not a list of agent types: {problem}") from None
    return MappingProxyType({**BUILT_IN, **{t.name: t for t in types}})


_DEFINITIONS = TypeAdapter(list[AgentType])
