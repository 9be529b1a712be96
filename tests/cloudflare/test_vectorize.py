"""`CloudflareVectorIndex` against the fake Vectorize index, in raw and wrapped mode."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from bindings.ports.errors import BindingLimitError
from bindings.ports.vectorize import VectorRecord
from tests.fakes.js_runtime import FakeJsRuntime, FakeVectorizeIndex, JSValue

DIMS = 4


@pytest.fixture
def fake_index(js_runtime: FakeJsRuntime) -> FakeVectorizeIndex:
    return js_runtime.vectorize(DIMS)


@pytest.fixture
def index(fake_index: FakeVectorizeIndex, bind: Callable[[JSValue], Any]) -> Any:
    from bindings.cloudflare.vectorize import CloudflareVectorIndex

    return CloudflareVectorIndex(bind(fake_index))


def record(vid: str, values: list[float], tenant: str, **metadata: Any) -> VectorRecord:
    return VectorRecord(
        id=vid, values=values, namespace=tenant, metadata={"tenant_id": tenant, **metadata}
    )


async def seed(index: Any) -> None:
    await index.upsert(
        [
            record("f1", [1, 0, 0, 0], "t1", kind="fact", year=2024),
            record("f2", [0.9, 0.1, 0, 0], "t1", kind="episode", year=2025),
            record("f3", [1, 0, 0, 0], "t2", kind="fact", year=2025),
        ]
    )


async def test_query_is_scoped_by_namespace_and_filter(index: Any) -> None:
    await seed(index)
    result = await index.query(
        np.array([1, 0, 0, 0], dtype=np.float32),
        top_k=5,
        namespace="t1",
        filter={"tenant_id": "t1", "year": {"$gte": 2024}},
        return_metadata="all",
    )
    assert [m.id for m in result.matches] == ["f1", "f2"]
    assert result.count == 2
    assert result.matches[0].score == pytest.approx(1.0)
    assert result.matches[0].metadata == {"tenant_id": "t1", "kind": "fact", "year": 2024}
    assert result.matches[0].namespace == "t1"
    only_facts = await index.query([1, 0, 0, 0], namespace="t1", filter={"kind": {"$in": ["fact"]}})
    assert [m.id for m in only_facts.matches] == ["f1"]
    assert only_facts.matches[0].metadata is None  # returnMetadata "none"


async def test_values_come_back_when_asked(index: Any) -> None:
    await seed(index)
    result = await index.query([0, 1, 0, 0], top_k=1, namespace="t1", return_values=True)
    assert result.matches[0].values == pytest.approx([0.9, 0.1, 0, 0])


async def test_insert_skips_existing_ids_and_upsert_replaces(index: Any) -> None:
    await seed(index)
    await index.insert([record("f1", [0, 0, 0, 1], "t1", kind="changed")])
    assert (await index.get_by_ids(["f1"]))[0].metadata["kind"] == "fact"
    mutation = await index.upsert([record("f1", [0, 0, 0, 1], "t1", kind="changed")])
    assert mutation.mutation_id and mutation.count == 1
    stored = (await index.get_by_ids(["f1"]))[0]
    assert stored.values == [0, 0, 0, 1] and stored.metadata["kind"] == "changed"
    assert stored.namespace == "t1"


async def test_delete_and_describe(index: Any) -> None:
    await seed(index)
    assert (await index.describe()).vector_count == 3
    await index.delete_by_ids(["f1", "f2"])
    info = await index.describe()
    assert info.vector_count == 1 and info.dimensions == DIMS
    assert await index.get_by_ids(["f1"]) == []


@pytest.mark.parametrize(
    "options",
    [
        {"top_k": 101},
        {"top_k": 21, "return_values": True},
        {"top_k": 21, "return_metadata": "all"},
        {"top_k": 0},
        {"namespace": "n" * 65},
        {"filter": {"tenant_id": "x" * 2100}},
    ],
)
async def test_documented_query_limits_are_checked(index: Any, options: dict[str, Any]) -> None:
    with pytest.raises(BindingLimitError):
        await index.query([1, 0, 0, 0], **options)


async def test_wrong_dimensions_are_an_input_error(
    index: Any, fake_index: FakeVectorizeIndex
) -> None:
    with pytest.raises(BindingLimitError, match="40012"):
        await index.upsert([record("bad", [1, 0], "t1")])
    assert fake_index.vectors == {}


async def test_ids_longer_than_64_bytes_are_refused(index: Any) -> None:
    with pytest.raises(BindingLimitError):
        await index.upsert([record("x" * 65, [1, 0, 0, 0], "t1")])
