"""Supersessions an operator can see, undo and replay (issue 25): nothing acknowledged
disappears silently.

Every supersession and merge the reconciler applies is a `memory_written` event whose payload
names both facts (`key`: the winner, `supersedes`: the loser) and what decided (`decision`: op,
decision, reason, adjudicator). `Reconciler.undo` and `Reconciler.replay` act on them and
record `memory_written` events with `op: supersession_undone` / `supersession_replayed`.
"""

from __future__ import annotations

from dataclasses import dataclass

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
