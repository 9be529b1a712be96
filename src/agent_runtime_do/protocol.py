"""The RPC payloads between the edge and the AgentRuntime Durable Object, validated on arrival.
Expected failures come back as `{"error": {"status", "code", "message"}}` (`rpc_error`), not
exceptions: one crossing Cloudflare RPC arrives as a bare JS error whose type is lost.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.namespace import AGENT_TYPE_PATTERN, INSTANCE_PATTERN, TENANT_PATTERN

MAX_INPUT_CHARS = 16_000
TASK_TYPE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
MAX_ERASE_RUN_IDS = 1000


class ScopePayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(pattern=TENANT_PATTERN)
    agent_type: str = Field(pattern=AGENT_TYPE_PATTERN)
    instance_id: str = Field(pattern=INSTANCE_PATTERN)


class RunPayload(ScopePayload):
    input: str = Field(min_length=1, max_length=MAX_INPUT_CHARS)
    task_type: str | None = Field(default=None, pattern=TASK_TYPE_PATTERN)
    subject: str | None = Field(default=None, min_length=1, max_length=256)
    metadata: dict[str, Any] = Field(default_factory=dict)
    requested_by: str | None = None


class RunLogPayload(ScopePayload):
    run_id: str = Field(min_length=26, max_length=26)


class OutcomePayload(RunLogPayload):
    score: float = Field(ge=0.0, le=1.0)


class WorkflowsPayload(ScopePayload):
    task_type: str | None = Field(default=None, pattern=TASK_TYPE_PATTERN)
    candidates_only: bool = False
    min_pulls: int = Field(default=20, ge=1)
    min_mean: float = Field(default=0.7, ge=0.0, le=1.0)


class ErasePayload(ScopePayload):
    subject: str = Field(min_length=3, max_length=256)
    run_ids: list[str] = Field(default_factory=list, max_length=MAX_ERASE_RUN_IDS)
    # The instance is named after the subject: its whole storage goes (`core.rebuild`).
    wipe: bool = False


class Failure(BaseModel):
    code: str
    message: str


class RunResult(BaseModel):
    run_id: str
    tenant: str
    agent_type: str
    instance_id: str
    status: Literal["completed", "failed"]
    output: str
    steps: int
    tool_calls: int
    tools_used: list[str]
    task_type: str
    workflow_id: str | None
    context_episode_ids: list[str]
    episode_id: str
    turn_count: int
    started_at: int
    finished_at: int
    failure: Failure | None = None


def rpc_error(status: int, code: str, message: str) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message}}
