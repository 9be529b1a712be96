"""recall_memory / store_memory: the MCP dispatcher and the schemas (ADR-0030)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.agent.memory_tools import MEMORY_TOOLS, McpMemoryTools
from agent_memory.memory import retrieval_config
from agent_memory.tiers.semantic.models import MemoryInputError
from gateway.json_schema import validate
from gateway.mcp import MemoryToolDispatcher
from local_runtime.runtime import LocalRuntime
from tests.semantic.conftest import fact_rows, vector_count


@pytest.fixture
def dispatcher(rt: LocalRuntime) -> MemoryToolDispatcher:
    built: MemoryToolDispatcher = McpMemoryTools(rt.bindings())
    return built


async def test_store_then_recall_round_trip(dispatcher: MemoryToolDispatcher) -> None:
    stored = await dispatcher.call(
        "acme", "store_memory", {"content": "The team ships on Thursdays", "metadata": {"k": 1}}
    )
    assert stored == {"stored": True}
    found = await dispatcher.call("acme", "recall_memory", {"query": "when do we ship?"})
    assert found["count"] == 1
    [result] = found["results"]
    assert result["content"] == "The team ships on Thursdays"
    assert result["metadata"] == {"k": 1}
    assert result["agent_type"] == "mcp"
    assert set(result["score_breakdown"]) >= {"relevance", "recency", "confidence", "density"}


async def test_metadata_can_carry_the_fact_triple(
    rt: LocalRuntime, dispatcher: MemoryToolDispatcher
) -> None:
    await dispatcher.call(
        "acme",
        "store_memory",
        {
            "content": "Contact 123456 responded positively to direct ROI framing",
            "metadata": {
                "subject": "contact:hubspot_id:123456",
                "predicate": "responded_positively_to",
                "object": "direct_roi_framing",
                "confidence": 0.82,
                "campaign": "q3",
            },
        },
    )
    [row] = await fact_rows(rt)
    assert (row["subject"], row["predicate"], row["object"], row["confidence"]) == (
        "contact:hubspot_id:123456",
        "responded_positively_to",
        "direct_roi_framing",
        0.82,
    )
    assert row["source"] == "mcp"


async def test_stores_are_scoped_to_the_calling_tenant(dispatcher: MemoryToolDispatcher) -> None:
    await dispatcher.call("acme", "store_memory", {"content": "acme's secret pricing"})
    found = await dispatcher.call(
        "globex", "recall_memory", {"query": "secret pricing", "top_k": 20}
    )
    assert found == {"results": [], "count": 0}


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("recall_memory", {"query": ""}, "query"),
        ("recall_memory", {"query": "x", "top_k": 0}, "top_k"),
        ("recall_memory", {"query": "x", "top_k": 21}, "top_k"),
        ("recall_memory", {"top_k": 3}, "query"),
        ("store_memory", {"content": ""}, "content"),
        ("store_memory", {"content": "x" * 8193}, "content"),
        ("store_memory", {"content": "ok", "metadata": [1, 2]}, "metadata"),
        ("store_memory", {"content": "ok", "metadata": {"b": "x" * 10_300}}, "metadata"),
        (
            "store_memory",
            {"content": "ok", "metadata": {"confidence": "high"}},
            "metadata.confidence",
        ),
    ],
)
async def test_bad_arguments_are_clear_errors_and_write_nothing(
    rt: LocalRuntime,
    dispatcher: MemoryToolDispatcher,
    tool: str,
    arguments: dict[str, Any],
    field: str,
) -> None:
    with pytest.raises(MemoryInputError) as caught:
        await dispatcher.call("acme", tool, arguments)
    error = caught.value.to_dict()["error"]
    assert error["code"] == "validation_error"
    assert [p["field"] for p in error["details"]["problems"]] == [field]
    assert await fact_rows(rt) == [] and await vector_count(rt) == 0


async def test_unknown_tool_is_an_error(dispatcher: MemoryToolDispatcher) -> None:
    with pytest.raises(MemoryInputError) as caught:
        await dispatcher.call("acme", "delete_memory", {"id": "x"})
    assert caught.value.code == "unknown_tool"


def test_schemas_follow_adr_0030() -> None:
    RECALL_MEMORY_SCHEMA = MEMORY_TOOLS["recall_memory"].input_schema()
    STORE_MEMORY_SCHEMA = MEMORY_TOOLS["store_memory"].input_schema()
    assert RECALL_MEMORY_SCHEMA["required"] == ["query"]
    top_k = RECALL_MEMORY_SCHEMA["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"], top_k["default"]) == (1, 20, 5)
    assert STORE_MEMORY_SCHEMA["required"] == ["content"]
    assert STORE_MEMORY_SCHEMA["properties"]["metadata"]["type"] == "object"
    assert validate(RECALL_MEMORY_SCHEMA, {"query": "x", "filters": {"subject": "s"}}) == []
    assert validate(RECALL_MEMORY_SCHEMA, {"query": "x", "top_k": 50}) != []
    assert validate(STORE_MEMORY_SCHEMA, {"content": "x", "metadata": "no"}) != []


def test_the_schema_advertises_every_argument_recall_accepts() -> None:
    """tools/list used to leave out `filters.as_of` and the time window, which the server
    accepted: the schema is now the model the call is validated with."""
    filters = MEMORY_TOOLS["recall_memory"].input_schema()["properties"]["filters"]
    options = [o for o in filters.get("anyOf", [filters]) if o.get("type") == "object"]
    assert {"as_of", "valid_from_after", "valid_from_before", "subject"} <= set(
        options[0]["properties"]
    )


def test_default_retrieval_config_when_settings_have_none(rt: LocalRuntime) -> None:
    config = retrieval_config(rt.bindings())
    weights = config.weights_for("semantic")
    assert sum(weights.normalized()) == pytest.approx(1.0)
