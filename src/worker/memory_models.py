"""Request and answer models of the uniform memory API (`worker.memory_routes`)."""

from __future__ import annotations

import json
import unicodedata
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agent_memory.memory import MemoryItem
from agent_memory.scope import AGENT_TYPE_PATTERN
from agent_memory.tiers.episodic import Episode
from worker.memory_tokens import MemoryTier

MIN_TTL_SECONDS = 60
MAX_METADATA_BYTES = 4096


class MemoryQuery(BaseModel):
    """Query of `GET /api/v1/memory/{agent_id}`."""

    model_config = ConfigDict(extra="forbid")

    tier: MemoryTier | None = None
    query: str | None = Field(default=None, min_length=1, max_length=1024)
    limit: int = Field(default=20, ge=1, le=100)
    cursor: str | None = Field(default=None, min_length=1, max_length=512)
    agent_type: str | None = Field(default=None, pattern=AGENT_TYPE_PATTERN)
    # A time filter on the semantic tier's search (epoch seconds on `valid_from`, the date a
    # memory is about): [valid_from_after, valid_from_before).
    valid_from_after: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    valid_from_before: float | None = Field(default=None, gt=0, allow_inf_nan=False)

    @field_validator("query")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and (
            not value.strip() or any(unicodedata.category(c) == "Cc" for c in value)
        ):
            raise ValueError("query must be non-blank text without control characters")
        return value

    @model_validator(mode="after")
    def _window(self) -> MemoryQuery:
        after, before = self.valid_from_after, self.valid_from_before
        if after is not None and before is not None and before <= after:
            raise ValueError("valid_from_before must be after valid_from_after")
        return self


class MemoryDeleteQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tier: MemoryTier


class MemoryWrite(BaseModel):
    """Body of `POST /api/v1/memory/{agent_id}`."""

    model_config = ConfigDict(extra="forbid")

    tier: MemoryTier
    key: str = Field(min_length=1, max_length=128)
    value: Any
    ttl: int | None = Field(default=None, ge=MIN_TTL_SECONDS)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("value")
    @classmethod
    def _present(cls, value: Any) -> Any:
        # null would read back as "missing" (working) or an empty episode: refuse it.
        if value is None:
            raise ValueError("value must not be null; DELETE the key instead")
        return value

    @field_validator("metadata")
    @classmethod
    def _small(cls, value: dict[str, Any]) -> dict[str, Any]:
        if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_METADATA_BYTES:
            raise ValueError(f"metadata must be at most {MAX_METADATA_BYTES} bytes of JSON")
        return value


class MemoryPage(BaseModel):
    tenant: str
    agent_id: str
    tier: MemoryTier | None
    query: str | None
    tiers_searched: list[MemoryTier]
    items: list[MemoryItem]
    next_cursor: str | None


class MemoryWritten(BaseModel):
    tenant: str
    agent_id: str
    item: MemoryItem


class MemoryDeleted(BaseModel):
    tenant: str
    agent_id: str
    tier: MemoryTier
    key: str
    deleted: bool


class ArchivePageQuery(BaseModel):
    """Query of `GET /admin/tenants/{tenant}/subjects/{subject}/archive`."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(default=20, ge=1, le=100)
    cursor: str | None = Field(default=None, min_length=1, max_length=512)


class ArchiveQuery(ArchivePageQuery):
    """Query of `GET /api/v1/memory/{agent_id}/archive`."""

    subject: str | None = Field(default=None, min_length=1, max_length=256)

    @field_validator("subject")
    @classmethod
    def _printable(cls, value: str | None) -> str | None:
        if value is not None and any(unicodedata.category(c) == "Cc" for c in value):
            raise ValueError("subject must not contain control characters")
        return value


class TieredEpisode(BaseModel):
    """An episode read through the hot/warm/cold client, with where it was found."""

    tenant: str
    agent_id: str
    item_key: str
    namespace_key: str
    found_in: Literal["hot", "warm", "cold"]
    promoted_to: list[Literal["hot", "warm"]]
    episode: Episode


class ArchivedEpisode(BaseModel):
    item_key: str
    archived_at: int
    episode: Episode


class ArchivePage(BaseModel):
    tenant: str
    agent_id: str
    namespace_key: str
    subject: str | None
    items: list[ArchivedEpisode]
    next_cursor: str | None


class SubjectArchivePage(BaseModel):
    tenant: str
    subject: str
    items: list[ArchivedEpisode]
    next_cursor: str | None
