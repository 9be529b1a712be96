"""What a memory write proposes, and why a policy may refuse it (ADR-0051).

A `WriteProposal` is (tier, key, value, confidence, source, supersedes?) plus who proposes
it (`agent_type`, None for platform clients) and what it is about (`subject`). Its
`content_hash` is the SHA-256 of the canonical JSON of the value: the only trace of the
value an audit event keeps. Personal data is marked in the value itself with the
`_personal` key (`personal_marking`). `WriteDenied` carries every `Violation` found.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.governance.events import EventTier
from agent_memory.ids import sha256_hex

Tier = EventTier
TIERS: tuple[Tier, ...] = ("working", "episodic", "semantic", "procedural")
PERSONAL_MARK = "_personal"

ViolationCode = Literal[
    "too_large",
    "tier_not_allowed",
    "confidence_too_low",
    "personal_data_tier",
    "personal_data_without_subject",
    "personal_data_writer",
    "personal_field_missing",
    "invalid_proposal",
]


class WriteProposal(BaseModel):
    """One memory write, as the policy sees it."""

    model_config = ConfigDict(frozen=True)

    tier: Tier
    key: str = Field(min_length=1, max_length=512)
    value: Any
    confidence: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    source: str
    supersedes: str | None = None
    agent_type: str | None = None
    subject: str | None = None
    run_id: str | None = None
    # Why the write was made, copied into its `memory_written` event as `decision` (the
    # reconciler's update step: decision, reason, adjudicator). Never personal data.
    decision: dict[str, str] | None = None

    @property
    def content(self) -> bytes:
        """The canonical JSON of the value (sorted keys, no spaces): what is hashed and sized."""
        return canonical_json(self.value)

    @property
    def content_hash(self) -> str:
        return sha256_hex(self.content)

    def personal_fields(self) -> tuple[str, ...] | None:
        """The marked personal fields: None when nothing is marked, () for the whole entry."""
        return personal_marking(self.value)


class Violation(BaseModel):
    model_config = ConfigDict(frozen=True)

    code: ViolationCode
    message: str


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True)

    allowed: bool
    violations: list[Violation] = Field(default_factory=list)


class WriteDenied(ValueError):
    """The policy refused a proposal; nothing was written. `violations` says why."""

    code = "memory_write_denied"

    def __init__(self, proposal: WriteProposal, violations: Sequence[Violation]) -> None:
        reasons = "; ".join(f"{v.code}: {v.message}" for v in violations)
        super().__init__(f"memory write to {proposal.tier} {proposal.key!r} denied: {reasons}")
        self.proposal = proposal
        self.violations = list(violations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "error": {
                "code": self.code,
                "message": str(self),
                "details": {
                    "tier": self.proposal.tier,
                    "key": self.proposal.key,
                    "violations": [v.model_dump() for v in self.violations],
                },
            }
        }


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def personal_marking(value: Any) -> tuple[str, ...] | None:
    """Read the `_personal` mark of a JSON object value (see the module docstring)."""
    if not isinstance(value, Mapping) or PERSONAL_MARK not in value:
        return _nested_marking(value)
    mark = value[PERSONAL_MARK]
    if mark is True:
        return ()
    if mark is False or mark is None:
        return _nested_marking(value)
    if isinstance(mark, list) and all(isinstance(item, str) for item in mark):
        return tuple(mark)
    return ("<invalid _personal mark>",)


def _nested_marking(value: Any) -> tuple[str, ...] | None:
    # A mark one level down (`{"data": {"_personal": [...]}}`, a fact's metadata) counts too.
    if isinstance(value, Mapping):
        for name, item in value.items():
            if isinstance(item, Mapping) and PERSONAL_MARK in item:
                inner = personal_marking(item)
                if inner is not None:
                    return tuple(f"{name}.{field}" for field in inner) or (name,)
    return None


def missing_marked_fields(value: Any, fields: Sequence[str]) -> list[str]:
    missing = []
    for dotted in fields:
        node = value
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                missing.append(dotted)
                break
            node = node[part]
    return missing
