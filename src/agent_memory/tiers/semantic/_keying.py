"""The key lookup every semantic write (and the key backfill) goes through."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from agent_memory.governance.personal_data import public_view
from agent_memory.statements import IDS_PER_STATEMENT
from agent_memory.tiers.semantic._scope import FactScope
from agent_memory.tiers.semantic.keys import FactKey, derive_key, entity_candidates


class KeyedText(Protocol):
    """What a key is derived from: a new `FactInput`, or a stored row being backfilled."""

    @property
    def content(self) -> str: ...

    @property
    def subject(self) -> str: ...

    @property
    def predicate(self) -> str: ...

    @property
    def metadata(self) -> dict[str, Any]: ...


async def derive_keys(scope: FactScope, inputs: Sequence[KeyedText]) -> list[FactKey]:
    """Each input's key (`keys.derive_key`), with the names the tenant already has facts
    about found in one indexed lookup (`known_subject`)."""
    names = [name for fact in inputs for name in entity_candidates(fact.content)]
    wanted = list(dict.fromkeys(names))[:IDS_PER_STATEMENT]
    known: set[str] = set()
    if wanted:
        marks = ", ".join("?" for _ in wanted)
        result = (
            await scope.db.prepare(
                "SELECT DISTINCT key_entity FROM semantic_facts WHERE tenant_id = ? "
                f"AND key_entity IN ({marks})"
            )
            .bind(scope.tenant_id, *wanted)
            .all()
        )
        known = {str(row["key_entity"]) for row in result.results}
    return [
        derive_key(
            fact.content,
            subject=fact.subject,
            predicate=fact.predicate,
            # Personal fields never feed a derived, indexed value (docs/personal-data.md).
            metadata=public_view(fact.metadata),
            known_entities=known,
        )
        for fact in inputs
    ]
