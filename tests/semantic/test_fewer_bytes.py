"""Fewer bytes per fact (issue 29, item 4): what was cut must still be there when asked for.

A created fact's `memory_written` event is compact (its row says the rest), yet the
inspector shows it whole."""

from __future__ import annotations

import hashlib
import json

from agent_memory.governance.writes import canonical_json
from agent_memory.lifecycle.inspect import MemoryInspector
from local_runtime.runtime import LocalRuntime
from tests.semantic.conftest import NOW_MS, MemoryFactory

FACT = {
    "content": "Ada prefers a call on Tuesday mornings",
    "subject": "contact:ada",
    "predicate": "prefers",
    "confidence": 0.9,
    "source": "mcp",
}


async def test_a_created_facts_event_is_compact_and_the_inspector_shows_it_whole(
    rt: LocalRuntime, make_memory: MemoryFactory
) -> None:
    result = await make_memory(agent_type="sdr").learn(FACT)
    rows = (await rt.db.prepare("SELECT * FROM memory_events").all()).results
    [row] = [r for r in rows if r["kind"] == "memory_written"]
    assert row["event_id"] == result.fact_id and row["tier"] == "semantic"
    assert row["agent_type"] == "sdr"
    assert row["content_hash"] is None and row["payload"] == "{}"  # the row holds the rest

    detail = await MemoryInspector(rt.db, "acme", now_ms=NOW_MS).fact_detail(result.fact_id)
    assert detail is not None
    [event] = detail.written
    value = {
        "subject": "contact:ada",
        "predicate": "prefers",
        "object": "",
        "content": FACT["content"],
        "metadata": {},
    }
    assert event.content_hash == hashlib.sha256(canonical_json(value)).hexdigest()
    assert event.payload == {
        "key": "contact:ada|prefers",
        "source": "mcp",
        "confidence": 0.9,
        "bytes": len(canonical_json(value)),
        "subject": "contact:ada",
    }
    assert "Tuesday" not in json.dumps(row)  # still no content in the audit trail
