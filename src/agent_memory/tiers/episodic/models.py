"""The episodic tier's records: runs, episodes, the run-list cursor and the limit error.

`RunRecord` is one `agent_runs` row and `Episode` one `memory_episodes` row (times in epoch
milliseconds, as stored); `encode_cursor` / `decode_cursor` make the opaque keyset cursor
of the run list (a cursor this module did not produce raises `InvalidCursorError`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.cursors import InvalidCursorError, decode_cursor_value, encode_cursor_value
from agent_memory.governance.personal_data import PersonalData, Sealable
from agent_memory.ids import content_hash
from bindings.ports.sql import Row

RECENT_EPISODES = 10
MAX_EPISODE_CHARS = 32_768
MAX_PAGE_SIZE = 100

RunStatus = Literal["running", "completed", "failed"]
EpisodeKind = Literal["observation", "action", "outcome", "message", "summary"]
WriteOp = Literal["start_run", "append_episode", "complete_run", "fail_run"]


EPISODE_LIMIT_CODE = "episode_limit_reached"


class EpisodeLimitReached(Exception):
    """The tenant is at its episode limit (100K, migration 0004's trigger): the episode was
    refused and retrying cannot help (docs/lifecycle.md, "At the limit")."""

    code = EPISODE_LIMIT_CODE

    def __init__(self, tenant: str, detail: str) -> None:
        super().__init__(
            f"{EPISODE_LIMIT_CODE}: tenant {tenant!r} is at its episode limit; new episodes "
            f"are refused until the prune or an erase frees room ({detail})"
        )
        self.tenant = tenant


class Episode(BaseModel):
    model_config = ConfigDict(frozen=True)

    episode_id: str
    run_id: str
    agent_type: str
    instance_id: str
    kind: EpisodeKind
    subject: str | None = None
    content: str = Field(min_length=1, max_length=MAX_EPISODE_CHARS)
    data: dict[str, Any] = Field(default_factory=dict)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    created_at: int

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)


class RunRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    agent_type: str
    instance_id: str
    status: RunStatus
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] | None = None
    error: str | None = None
    steps: int = 0
    started_at: int
    finished_at: int | None = None


class RunPage(BaseModel):
    runs: list[RunRecord]
    next_cursor: str | None = None


def to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def run_from_row(row: Row) -> RunRecord:
    return RunRecord(
        run_id=row["run_id"],
        agent_type=row["agent_type"],
        instance_id=row["instance_id"],
        status=row["status"],
        input=json.loads(row["input"] or "{}"),
        output=json.loads(row["output"]) if row.get("output") else None,
        error=row.get("error"),
        steps=int(row["steps"]),
        started_at=int(row["started_at"]),
        finished_at=int(row["finished_at"]) if row.get("finished_at") is not None else None,
    )


def episode_from_row(row: Row, data: Mapping[str, Any] | None = None) -> Episode:
    """The episode of `row` as stored; `open_episodes` passes the opened `data`."""
    return Episode(
        episode_id=row["episode_id"],
        run_id=row["run_id"],
        agent_type=row["agent_type"],
        instance_id=row["instance_id"],
        kind=row["kind"],
        subject=row.get("subject"),
        content=row["content"],
        data=dict(data) if data is not None else json.loads(row["data"] or "{}"),
        importance=float(row["importance"]),
        created_at=int(row["created_at"]),
    )


async def open_episodes(rows: Sequence[Row], personal: PersonalData) -> list[Episode]:
    """The episodes of `rows` with their sealed personal data opened: every read of episode
    rows (warm or archived) goes through here (docs/personal-data.md)."""
    items = [
        Sealable(row.get("subject"), str(row["episode_id"]), json.loads(row["data"] or "{}"))
        for row in rows
    ]
    opened = await personal.open_many("data", items)
    return [episode_from_row(row, data) for row, data in zip(rows, opened, strict=True)]


def encode_cursor(started_at: int, run_id: str) -> str:
    return encode_cursor_value({"s": started_at, "r": run_id})


def decode_cursor(cursor: str) -> tuple[int, str]:
    value = decode_cursor_value(cursor)
    try:
        started_at, run_id = value["s"], value["r"]
    except (KeyError, TypeError):
        raise InvalidCursorError("cursor is not one this API returned") from None
    if not isinstance(started_at, int) or not isinstance(run_id, str):
        raise InvalidCursorError("cursor is not one this API returned")
    return started_at, run_id
