"""The pure half of a subject erase (no I/O): what a valid subject is (`validate_subject`),
which rows are its traces (`SubjectMatcher`, over the ids of the D1 rows already found to
be traces, `Found`), and what the erase reports (`EraseReport`, which each store's eraser
adds its counts to as it goes, so a failure part-way still reports what was removed).

The rules are those of `agent_memory.lifecycle.erase`'s docstring; they apply alike to a
row as stored and to a row as archived in the cold tier.

Private to `agent_memory.lifecycle`: other packages import these names from
`agent_memory.lifecycle.erase`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from agent_memory.lifecycle.cold import ArchiveKind

MIN_SUBJECT_CHARS = 3
MAX_SUBJECT_CHARS = 256


class EraseReport(BaseModel):
    """What the erase removed, per tier."""

    tenant_id: str
    subject: str
    working_keys: int = 0
    episodes: int = 0
    runs: int = 0
    facts: int = 0
    vectors: int = 0
    links: int = 0
    provenance: int = 0
    events: int = 0
    events_scrubbed: int = 0
    archives_rewritten: int = 0
    archives_deleted: int = 0
    # Data keys destroyed (crypto-shredding): every sealed value of the subject, wherever a
    # copy of it lives (cold archives, D1 Time Travel), no longer has a key.
    data_keys: int = 0
    # No postings of an erased fact are left in the keyword index, and no term statistic
    # that no remaining fact holds (`_erase_rows._optimize_keyword_index`).
    keyword_index_optimized: bool = False
    archived_rows: dict[str, int] = Field(
        default_factory=lambda: {"episodes": 0, "runs": 0, "events": 0}
    )
    # The AgentRuntime Durable Objects (`_erase_instances`): instances reached, and rows
    # removed (turn_state: rows whose state was scrubbed) per store.
    agent_state: dict[str, int] = Field(
        default_factory=lambda: {
            "instances": 0,
            "run_log": 0,
            "turn_state": 0,
            "failed_writes": 0,
            "pending_writes": 0,
        }
    )
    complete: bool = True
    errors: list[str] = Field(default_factory=list)

    def removed(self) -> int:
        return (
            self.working_keys
            + self.episodes
            + self.runs
            + self.facts
            + self.vectors
            + self.links
            + self.provenance
            + self.events
            + self.data_keys
            + sum(self.archived_rows.values())
            + sum(n for store, n in self.agent_state.items() if store != "instances")
        )


class Found(BaseModel):
    """The D1 rows that are traces, and what identifies them elsewhere."""

    episodes: set[str] = Field(default_factory=set)
    runs: set[str] = Field(default_factory=set)
    facts: set[str] = Field(default_factory=set)
    hashes: set[str] = Field(default_factory=set)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


class SubjectMatcher:
    """The pure rules: is this row (as stored, or as archived) a trace of the subject?"""

    def __init__(self, subject: str, found: Found | None = None) -> None:
        self.subject = subject
        self.found = found or Found()

    def mentions(self, *values: Any) -> bool:
        return any(self.subject in _text(v) for v in values)

    def episode(self, row: dict[str, Any]) -> bool:
        return (
            row.get("subject") == self.subject
            or str(row.get("episode_id")) in self.found.episodes
            or self.mentions(row.get("content"), row.get("data"))
        )

    def run(self, row: dict[str, Any]) -> bool:
        return str(row.get("run_id")) in self.found.runs or self.mentions(
            row.get("input"), row.get("output"), row.get("error")
        )

    @staticmethod
    def _payload(row: dict[str, Any]) -> Any:
        payload = row.get("payload")
        if isinstance(payload, str):
            try:
                return json.loads(payload)
            except ValueError:
                return {}
        return payload

    def _erased_ids(self) -> set[str]:
        return self.found.episodes | self.found.facts

    def event(self, row: dict[str, Any]) -> bool:
        """An event to delete: it is about an erased row, run or content, or names the
        subject. (One that only lists an erased fact among its results is scrubbed.)"""
        payload = self._payload(row)
        named: set[str] = set()
        if isinstance(payload, dict):
            for key in ("key", "supersedes"):
                value = payload.get(key)
                if isinstance(value, str):
                    named.add(value)
        run_id = row.get("run_id")
        digest = row.get("content_hash")
        return (
            str(row.get("event_id")) in self._erased_ids()
            or (run_id is not None and str(run_id) in self.found.runs)
            or (digest is not None and digest in self.found.hashes)
            or bool(named & self._erased_ids())
            or self.mentions(payload)
        )

    def scrubbed(self, row: dict[str, Any]) -> dict[str, Any] | None:
        """The payload without references to erased facts (a recall that returned one
        among others), or None when the event lists none."""
        payload = self._payload(row)
        if not isinstance(payload, dict):
            return None
        erased = self._erased_ids()
        results = payload.get("results")
        dropped = payload.get("dropped")
        hit = False
        out = dict(payload)
        if isinstance(results, list):
            kept = [r for r in results if not (isinstance(r, dict) and r.get("id") in erased)]
            hit = hit or len(kept) != len(results)
            out["results"] = kept
        if isinstance(dropped, list):
            kept_ids = [d for d in dropped if d not in erased]
            hit = hit or len(kept_ids) != len(dropped)
            out["dropped"] = kept_ids
        return out if hit else None

    def archived(self, kind: ArchiveKind, row: dict[str, Any]) -> bool:
        if kind == "episodes":
            return self.episode(row)
        if kind == "runs":
            return self.run(row)
        return self.event(row)

    def archived_scrub(self, kind: ArchiveKind, row: dict[str, Any]) -> dict[str, Any] | None:
        """An archived row with references to erased facts removed, or None."""
        if kind != "events":
            return None
        payload = self.scrubbed(row)
        return None if payload is None else {**row, "payload": payload}


def validate_subject(subject: str) -> str:
    """The subject, or ValueError: 3-256 characters, not blank (a very short string would
    match as a substring of almost everything)."""
    if not isinstance(subject, str) or subject.strip() != subject or not subject:
        raise ValueError("subject must be a non-empty string without surrounding spaces")
    if not MIN_SUBJECT_CHARS <= len(subject) <= MAX_SUBJECT_CHARS:
        raise ValueError(f"subject must be {MIN_SUBJECT_CHARS}-{MAX_SUBJECT_CHARS} characters long")
    return subject
