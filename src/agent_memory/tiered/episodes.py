"""How an episode travels between the tiers: one text form for all three, and one way back
to the model.

The text of an episode item is its `memory_episodes` row in archive form (JSON columns
decoded, sorted keys: `agent_memory.lifecycle.cold`), whichever tier holds it: D1 gives the
row, the cold archive holds it in that form already, and a hot copy is that text. So the
bytes a tier keeps are the bytes the warm tier stores (what the warm tier encrypts stays
encrypted in hot and cold), and every read, wherever it was found, becomes an `Episode`
through `open_episode_item` → `open_episodes`: the same row→model mapping as the
episodic tier's own reads, which also opens sealed personal fields (docs/personal-data.md),
so one decoding and decryption point serves every tier. `episode_from_item` is the mapping
without opening (for values known to hold no sealed field, and for the write path, which
seals).
"""

from __future__ import annotations

import json
from typing import Any

from agent_memory.governance.personal_data import PersonalData
from agent_memory.governance.policy import personal_marking
from agent_memory.lifecycle.prune import row_from_archive
from agent_memory.tiers.episodic import Episode, episode_from_row, open_episodes

EPISODE_KIND = "episode"
_JSON_COLUMNS = ("data",)


def item_text(row: dict[str, Any]) -> str:
    """A `memory_episodes` row (as D1 returns it, or as archived) → the item text."""
    out = dict(row)
    for column in _JSON_COLUMNS:
        if isinstance(out.get(column), str):
            out[column] = json.loads(out[column])
    return json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def item_row(text: str) -> dict[str, Any]:
    """The item text → the row as the table stores it (JSON columns encoded)."""
    row = json.loads(text)
    if not isinstance(row, dict):
        raise ValueError("an episode item is a JSON object")
    return row_from_archive(row, "episodes")


def episode_from_item(text: str) -> Episode:
    """The item text, from any tier → the episodic tier's model (its row mapping)."""
    return episode_from_row(item_row(text))


async def open_episode_item(text: str, personal: PersonalData) -> Episode:
    """The item text, from any tier → the episode with its sealed personal fields opened
    (a field whose subject key was erased reads as erased: `PersonalData.open_many`)."""
    return (await open_episodes([item_row(text)], personal))[0]


def is_personal(text: str) -> bool:
    """True when the item carries a `_personal` mark (`governance.personal_marking`), at the
    top or one level down (an episode's `data`). Such items never go to the hot tier."""
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return personal_marking(value) is not None
