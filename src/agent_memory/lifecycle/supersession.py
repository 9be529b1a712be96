"""Supersessions an operator can see, undo and replay (issue 25): nothing acknowledged
disappears silently.

Every supersession and merge the reconciler applies is a `memory_written` event whose
payload names both facts (`key`: the winner, `supersedes`: the loser) and what decided
(`decision`: op, decision, reason, adjudicator). `undo` makes the loser live again (its
vector is rewritten) and records a `memory_written` event with `op: supersession_undone`,
both ids and who undid it; the reconciler leaves an undone pair apart from then on
(`facts_kept_apart`, written with the restore: it outlives the event). `replay` applies
the supersession one recorded event describes again (after an undo, or on a copy of the
data), as a guarded update like the reconciler's own, with an `op: supersession_replayed`
event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agent_memory.governance.writes import EventLog, MemoryEvent, memory_written
from agent_memory.ids import sha256_hex
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.reconcile import ReconcileStore
from bindings.ports.clock import Clock

UNDONE = "supersession_undone"
REPLAYED = "supersession_replayed"


class SupersessionError(Exception):
    """A refused undo or replay: `code` is stable, `status` the HTTP status to answer."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


@dataclass(frozen=True)
class Change:
    fact_id: str
    superseded_by: str
    event_id: str
    by: str


def _written(tenant: str, now: float, op: str, loser: str, winner: str, by: str) -> MemoryEvent:
    return memory_written(
        tenant_id=tenant,
        tier="semantic",
        now=now,
        content_hash=sha256_hex(f"{op}|{loser}|{winner}|{now}"),
        payload={"op": op, "key": winner, "fact_id": loser, "superseded_by": winner, "by": by},
        agent_type="operator",
    )


async def undo(
    memory: SemanticMemory,
    store: ReconcileStore,
    events: EventLog,
    clock: Clock,
    fact_id: str,
    by: str,
) -> Change:
    """Make superseded `fact_id` live again; 404 `fact_not_found`, 409 `not_superseded`."""
    fact = await memory.get(fact_id)
    if fact is None:
        raise SupersessionError(404, "fact_not_found", "no such fact in this tenant")
    if fact.status != "superseded" or fact.superseded_by is None:
        raise SupersessionError(409, "not_superseded", f"the fact is {fact.status}")
    now = clock.now()
    if not await store.restore(fact_id, fact.superseded_by, int(now * 1000)):
        raise SupersessionError(409, "not_superseded", "the fact changed meanwhile")
    event = _written(store.tenant_id, now, UNDONE, fact_id, fact.superseded_by, by)
    await events.record(event)
    await memory.complete_pending()
    return Change(fact_id, fact.superseded_by, event.event_id, by)


async def replay(
    store: ReconcileStore, events: EventLog, clock: Clock, event_id: str, by: str
) -> Change:
    """Apply again the supersession event `event_id` records; 404 `event_not_found`, 422
    `not_a_supersession`, 409 `not_active` (the loser is not live: nothing to replay)."""
    rows = await events.rows("event_id = ? AND kind = 'memory_written'", event_id, limit=1)
    if not rows:
        raise SupersessionError(404, "event_not_found", "no such event in this tenant")
    payload = json.loads(str(rows[0]["payload"]))
    loser, winner = payload.get("supersedes"), payload.get("key")
    if not (isinstance(loser, str) and isinstance(winner, str)):
        raise SupersessionError(422, "not_a_supersession", "the event records no supersession")
    now = clock.now()
    if not await store.supersede(loser, winner, int(now * 1000), relation=None):
        raise SupersessionError(409, "not_active", "the superseded fact is not live now")
    await store.drop_vectors([loser])
    event = _written(store.tenant_id, now, REPLAYED, loser, winner, by)
    await events.record(event)
    return Change(loser, winner, event.event_id, by)
