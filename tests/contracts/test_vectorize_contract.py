"""Contract suite for the Vectorize port (`bindings.ports.vectorize.VectorIndex`).

Vectorize has no local simulator, so this suite is the specification every adapter must
meet. It is parametrised over adapter factories; only "local" (numpy + SQLite) runs here.
Sources: cloudflare-docs `vectorize/reference/client-api.mdx`, `metadata-filtering.mdx`,
`platform/limits.mdx`, `best-practices/insert-vectors.mdx`.

A factory takes (path or None, dimensions, metadata indexes) and returns an index that also
has `create_metadata_index(property, type)`; calling it again with the same path reopens
the same index.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindings.ports.errors import BindingLimitError
from bindings.ports.vectorize import (
    VectorIndex,
    VectorRecord,
)
from local_runtime.adapters.vectorize import LocalVectorIndex, MetadataIndexType

Indexes = dict[str, MetadataIndexType]


class ContractIndex(VectorIndex, Protocol):
    def create_metadata_index(self, property: str, type: MetadataIndexType) -> None: ...


Factory = Callable[[Path | None, int, Indexes], ContractIndex]


def _local(path: Path | None, dims: int, indexes: Indexes) -> ContractIndex:
    return LocalVectorIndex(path, dims, indexes)


FACTORIES: dict[str, Factory] = {"local": _local}


@pytest.fixture(params=sorted(FACTORIES))
def make_index(request: pytest.FixtureRequest) -> Factory:
    return FACTORIES[request.param]


def idx(*pairs: tuple[str, MetadataIndexType]) -> Indexes:
    return dict(pairs)


def vec(
    id: str, values: Sequence[float], namespace: str | None = None, **metadata: Any
) -> VectorRecord:
    return VectorRecord(id=id, values=list(values), namespace=namespace, metadata=metadata)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


async def ids_for(index: ContractIndex, query: Sequence[float], **kwargs: Any) -> list[str]:
    result = await index.query(query, **kwargs)
    return [m.id for m in result.matches]


# ----------------------------------------------------------------------------- basics


async def test_query_ranks_by_cosine_similarity(make_index: Factory) -> None:
    index = make_index(None, 3, {})
    await index.upsert(
        [vec("a", [1, 0, 0]), vec("b", [1, 1, 0]), vec("c", [0, 0, 1]), vec("d", [-1, 0, 0])]
    )
    result = await index.query([2, 0, 0], top_k=4)
    assert [m.id for m in result.matches] == ["a", "b", "c", "d"]
    assert result.count == 4
    assert [m.score for m in result.matches] == pytest.approx([1.0, math.sqrt(0.5), 0.0, -1.0])
    # default: no metadata
    assert all(m.metadata is None for m in result.matches)


async def test_default_top_k_is_five(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    await index.upsert([vec(str(i), [1, i]) for i in range(8)])
    assert (await index.query([1, 0])).count == 5


async def test_stored_values_are_float32_and_metadata_all_is_complete(
    make_index: Factory,
) -> None:
    index = make_index(None, 3, {})
    await index.upsert([vec("a", [0.1, 0.2, 0.3], title="hello", nested={"x": [1, 2]})])
    result = await index.query([0.1, 0.2, 0.3], return_metadata="all")
    assert result.matches[0].metadata == {"title": "hello", "nested": {"x": [1, 2]}}
    [a] = await index.get_by_ids(["a"])
    assert a.values == [float(np.float32(v)) for v in (0.1, 0.2, 0.3)]


async def test_ids_are_unique_per_index_not_per_namespace(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    await index.upsert([vec("a", [1, 0], namespace="t1")])
    # upsert replaces the vector in full, namespace included
    await index.upsert([vec("a", [0, 1], namespace="t2")])
    assert await ids_for(index, [0, 1], namespace="t1") == []
    assert await ids_for(index, [0, 1], namespace="t2") == ["a"]
    assert (await index.describe()).vector_count == 1


async def test_upsert_replaces_whole_vector_without_merging_metadata(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    await index.upsert([vec("a", [1, 0], keep="x", old=1)])
    await index.upsert([vec("a", [0, 1], new=2), vec("a", [1, 1], last=3)])
    [a] = await index.get_by_ids(["a"])
    assert a.metadata == {"last": 3}  # last in batch wins, nothing merged
    assert a.values == [1.0, 1.0]


async def test_get_by_ids_returns_known_vectors_in_request_order(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    await index.upsert([vec("a", [1, 0], namespace="n1", k=1), vec("b", [0, 1])])
    got = await index.get_by_ids(["b", "missing", "a"])
    assert [g.id for g in got] == ["b", "a"]
    assert got[1].namespace == "n1" and got[1].metadata == {"k": 1}
    assert got[0].namespace is None


async def test_delete_by_ids_removes_vectors_everywhere(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    await index.upsert([vec(f"v{i}", [1, i], namespace=f"n{i % 2}") for i in range(6)])
    await index.delete_by_ids(["v0", "v3", "nope", "v0"])
    info = await index.describe()
    assert (info.vector_count, info.dimensions, info.metric) == (4, 2, "cosine")
    assert await index.get_by_ids(["v0", "v3"]) == []
    remaining = await ids_for(index, [1, 0], top_k=10)
    assert sorted(remaining) == ["v1", "v2", "v4", "v5"]
    # the freed slots are reusable and queries stay consistent
    await index.upsert([vec("v0", [1, 0], namespace="n1")])
    assert (await index.query([1, 0], namespace="n1", top_k=1)).matches[0].id == "v0"


async def test_namespace_isolation(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    await index.upsert(
        [
            vec("a1", [1, 0], namespace="tenant-a"),
            vec("a2", [1, 0.1], namespace="tenant-a"),
            vec("b1", [1, 0], namespace="tenant-b"),
            vec("plain", [1, 0]),
        ]
    )
    a = await index.query([1, 0], namespace="tenant-a", top_k=10, return_metadata="all")
    assert sorted(m.id for m in a.matches) == ["a1", "a2"]
    assert {m.namespace for m in a.matches} == {"tenant-a"}
    assert await ids_for(index, [1, 0], namespace="tenant-b", top_k=10) == ["b1"]
    assert await ids_for(index, [1, 0], namespace="unknown", top_k=10) == []
    # without a namespace the whole index is searched
    assert sorted(await ids_for(index, [1, 0], top_k=10)) == ["a1", "a2", "b1", "plain"]


# ----------------------------------------------------------------------------- filters

FILTER_INDEXES = idx(
    ("platform", "string"), ("year", "number"), ("free", "boolean"), ("owner.name", "string")
)


@pytest.fixture
async def catalogue(make_index: Factory) -> ContractIndex:
    index = make_index(None, 2, FILTER_INDEXES)
    await index.upsert(
        [
            vec("1", [1, 0.0], platform="netflix", year=2020, free=True, owner={"name": "ann"}),
            vec("2", [1, 0.1], platform="hbo", year=2021, free=False, owner={"name": "bob"}),
            vec("3", [1, 0.2], platform="amazon", year=2022, free=True),
            vec("4", [1, 0.3], platform="netflix", year=2023.5, free=False, owner={"name": "bob"}),
            vec("5", [1, 0.4], platform="network", year=2024),
            vec("6", [1, 0.5]),
        ]
    )
    return index


async def matching(index: ContractIndex, filter: dict[str, Any]) -> list[str]:
    result = await index.query([1, 0], top_k=100, filter=filter)
    return sorted(m.id for m in result.matches)


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"platform": "netflix"}, ["1", "4"]),
        ({"platform": {"$eq": "netflix"}}, ["1", "4"]),
        ({"platform": {"$ne": "netflix"}}, ["2", "3", "5", "6"]),
        ({"platform": {"$in": ["hbo", "amazon", "nope"]}}, ["2", "3"]),
        ({"platform": {"$nin": ["hbo", "amazon"]}}, ["1", "4", "5", "6"]),
        ({"year": {"$lt": 2022}}, ["1", "2"]),
        ({"year": {"$lte": 2022}}, ["1", "2", "3"]),
        ({"year": {"$gt": 2022}}, ["4", "5"]),
        ({"year": {"$gte": 2022}}, ["3", "4", "5"]),
        ({"year": {"$gte": 2021, "$lt": 2023.5}}, ["2", "3"]),
        ({"year": {"$gt": 2021, "$lte": 2023.5}}, ["3", "4"]),
        ({"year": 2021}, ["2"]),
        ({"year": 2023.5}, ["4"]),
        ({"free": True}, ["1", "3"]),
        ({"free": {"$ne": True}}, ["2", "4", "5", "6"]),
        ({"owner.name": "bob"}, ["2", "4"]),
        ({"platform": "netflix", "free": False}, ["4"]),  # implicit AND
        ({"platform": {"$gte": "net", "$lt": "neu"}}, ["1", "4", "5"]),  # prefix search
        ({"platform": {"$gt": "hbo"}}, ["1", "4", "5"]),  # lexicographic
        # type mismatch: a number is never equal to an indexed string
        ({"platform": 3}, []),
        ({"year": "2021"}, []),
    ],
)
async def test_filter_operators(
    catalogue: ContractIndex, filter: dict[str, Any], expected: list[str]
) -> None:
    assert await matching(catalogue, filter) == expected


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"owner.name": None}, ["3", "5", "6"]),
        ({"owner.name": {"$ne": None}}, ["1", "2", "4"]),
        ({"free": {"$in": [None, False]}}, ["2", "4", "5", "6"]),
        ({"free": {"$nin": [None]}}, ["1", "2", "3", "4"]),
        ({"year": {"$lt": 3000}}, ["1", "2", "3", "4", "5"]),  # a range never matches null
    ],
)
async def test_missing_property_behaves_as_null(
    catalogue: ContractIndex, filter: dict[str, Any], expected: list[str]
) -> None:
    assert await matching(catalogue, filter) == expected


async def test_filter_applies_before_top_k(catalogue: ContractIndex) -> None:
    # the best-scoring vectors are not netflix ones; topK is taken from the filtered set
    result = await catalogue.query([1, 0.5], top_k=2, filter={"platform": "netflix"})
    assert [m.id for m in result.matches] == ["4", "1"]


async def test_filter_combined_with_namespace(make_index: Factory) -> None:
    index = make_index(None, 2, idx(("tenant_id", "string")))
    await index.upsert(
        [
            vec("x", [1, 0], namespace="t1", tenant_id="t1"),
            vec("y", [1, 0], namespace="t2", tenant_id="t1"),
        ]
    )
    got = await ids_for(index, [1, 0], namespace="t1", filter={"tenant_id": "t1"})
    assert got == ["x"]


async def test_filter_on_unindexed_property_raises_a_clear_error(catalogue: ContractIndex) -> None:
    with pytest.raises(BindingLimitError, match="create-metadata-index"):
        await catalogue.query([1, 0], filter={"title": "x"})


async def test_vectors_written_before_the_metadata_index_need_a_reupsert(
    make_index: Factory,
) -> None:
    index = make_index(None, 2, {})
    await index.upsert([vec("old", [1, 0], kind="fact")])
    index.create_metadata_index("kind", "string")
    await index.upsert([vec("new", [1, 0], kind="fact")])
    assert await matching(index, {"kind": "fact"}) == ["new"]
    await index.upsert([vec("old", [1, 0], kind="fact")])
    assert await matching(index, {"kind": "fact"}) == ["new", "old"]


async def test_only_the_first_64_bytes_of_a_string_are_indexed(make_index: Factory) -> None:
    index = make_index(None, 2, idx(("text", "string")))
    head = "h" * 63
    await index.upsert(
        [
            vec("a", [1, 0], text=head + "x" + "tail-a"),
            vec("b", [1, 0], text=head + "x" + "tail-b"),
            vec("c", [1, 0], text=head + "é"),  # é is 2 bytes: cut on the UTF-8 boundary
            vec("d", [1, 0], text=head),
        ]
    )
    assert await matching(index, {"text": head + "x"}) == ["a", "b"]
    assert await matching(index, {"text": head + "x" + "tail-a-anything"}) == ["a", "b"]
    assert await matching(index, {"text": head}) == ["c", "d"]
    full = await index.get_by_ids(["c"])
    assert full[0].metadata == {"text": head + "é"}


# ----------------------------------------------------------------------------- limits


@pytest.mark.parametrize(
    "record",
    [
        vec("x" * 65, [1, 0]),  # id > 64 bytes
        vec("é" * 33, [1, 0]),  # 66 bytes in UTF-8
        vec("", [1, 0]),
        vec("a", [1, 0], namespace="n" * 65),
        vec("a", [1, 0], namespace=""),
        vec("a", [1, 0, 0]),  # wrong dimensions
        vec("a", [0, 0]),  # zero vector
        vec("a", [1, float("nan")]),
        vec("a", [1, 0], blob="x" * (10 * 1024)),  # metadata > 10 KiB
        VectorRecord(id="a", values=[1, 0], metadata={"a.b": 1}),  # dot in a metadata key
        VectorRecord(id="a", values=[1, 0], metadata={"$x": 1}),
        VectorRecord(id="a", values=[1, 0], metadata={"n": {'q"': 1}}),
    ],
)
async def test_invalid_vectors_are_rejected(make_index: Factory, record: VectorRecord) -> None:
    index = make_index(None, 2, {})
    with pytest.raises(BindingLimitError):
        await index.upsert([record])
    assert (await index.describe()).vector_count == 0


async def test_limits_accept_values_at_the_boundary(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    meta = {"blob": "x" * (10 * 1024 - len('{"blob":""}'))}
    record = VectorRecord(id="x" * 64, values=[1, 0], namespace="n" * 64, metadata=meta)
    await index.upsert([record])
    assert (await index.describe()).vector_count == 1


async def test_a_bad_vector_rejects_the_whole_batch(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    with pytest.raises(BindingLimitError, match="dimensions"):
        await index.upsert([vec("ok", [1, 0]), vec("bad", [1, 0, 0])])
    assert (await index.describe()).vector_count == 0


async def test_at_most_1000_vectors_per_write(make_index: Factory) -> None:
    index = make_index(None, 2, {})
    await index.upsert([vec(str(i), [1, i]) for i in range(1000)])
    assert (await index.describe()).vector_count == 1000
    with pytest.raises(BindingLimitError, match="1000"):
        await index.upsert([vec(f"n{i}", [1, i]) for i in range(1001)])


@pytest.mark.parametrize(
    ("kwargs", "ok"),
    [
        ({"top_k": 0}, False),
        ({"top_k": 100}, True),
        ({"top_k": 101}, False),
        ({"top_k": 20, "return_metadata": "all"}, True),
        ({"top_k": 21, "return_metadata": "all"}, False),
    ],
)
async def test_top_k_limits(make_index: Factory, kwargs: dict[str, Any], ok: bool) -> None:
    index = make_index(None, 2, {})
    await index.upsert([vec("a", [1, 0])])
    if ok:
        assert (await index.query([1, 0], **kwargs)).count == 1
    else:
        with pytest.raises(BindingLimitError, match="topK"):
            await index.query([1, 0], **kwargs)


@pytest.mark.parametrize(
    ("vector", "match"), [([1, 0, 0], "dimensions"), ([0, 0], "zero"), ([1, math.inf], "finite")]
)
async def test_bad_query_vectors_are_rejected(
    make_index: Factory, vector: list[float], match: str
) -> None:
    index = make_index(None, 2, {})
    with pytest.raises(BindingLimitError, match=match):
        await index.query(vector)


@pytest.mark.parametrize(
    "filter",
    [
        {},
        {"platform": {}},
        {"platform": {"$regex": "x"}},
        {"platform": {"$eq": "a", "$ne": "b"}},
        {"year": {"$gt": 1, "$gte": 2}},  # two lower bounds
        {"year": {"$lt": 1, "$eq": 2}},  # range mixed with equality
        {"year": {"$lt": True}},  # range operands are strings or numbers
        {"year": {"$lt": None}},
        {"platform": {"$in": "hbo"}},  # $in needs an array
        {"platform": {"$eq": {"nested": 1}}},
        {"platform": ["hbo"]},
        {"$platform": "x"},
        {'plat"form': "x"},
        {"owner..name": "x"},
        {"platform": {"$in": ["x" * 2040]}},  # compact JSON >= 2048 bytes
    ],
)
async def test_invalid_filters_are_rejected(
    catalogue: ContractIndex, filter: dict[str, Any]
) -> None:
    with pytest.raises(BindingLimitError):
        await catalogue.query([1, 0], filter=filter)


async def test_filter_size_limit_is_strictly_less_than_2048_bytes(
    catalogue: ContractIndex,
) -> None:
    def sized(n: int) -> dict[str, Any]:
        base = {"platform": {"$in": [""]}}
        pad = n - len(json.dumps(base, separators=(",", ":")))
        return {"platform": {"$in": ["x" * pad]}}

    assert await matching(catalogue, sized(2047)) == []
    with pytest.raises(BindingLimitError, match="2048"):
        await matching(catalogue, sized(2048))


async def test_at_most_ten_metadata_indexes(make_index: Factory) -> None:
    index = make_index(None, 2, idx(*[(f"p{i}", "number") for i in range(10)]))
    with pytest.raises(BindingLimitError, match="10"):
        index.create_metadata_index("p10", "number")
    with pytest.raises(BindingLimitError, match="already exists"):
        index.create_metadata_index("p0", "number")


# ----------------------------------------------------------------------------- persistence


async def test_everything_survives_a_reopen(make_index: Factory, tmp_path: Path) -> None:
    path = tmp_path / "state" / "vectors.sqlite3"
    index = make_index(path, 3, idx(("tenant_id", "string")))
    index.create_metadata_index("score", "number")
    await index.upsert(
        [
            vec("a", [1, 0, 0], namespace="t1", tenant_id="t1", score=1),
            vec("b", [0, 1, 0], namespace="t1", tenant_id="t1", score=5),
            vec("c", [0, 0, 1], namespace="t2", tenant_id="t2", score=5),
        ]
    )
    await index.delete_by_ids(["a"])

    reopened = make_index(path, 3, {})
    assert (await reopened.describe()).vector_count == 2
    got = await reopened.query(
        [0, 1, 0.1], namespace="t1", filter={"score": {"$gte": 2}}, return_metadata="all"
    )
    assert [(m.id, m.metadata) for m in got.matches] == [("b", {"tenant_id": "t1", "score": 5})]
    assert got.matches[0].score == pytest.approx(cosine([0, 1, 0.1], [0, 1, 0]), abs=1e-6)
    assert await reopened.get_by_ids(["a"]) == []
    assert await ids_for(reopened, [0, 0, 1], filter={"tenant_id": "t2"}) == ["c"]


def test_reopen_with_other_dimensions_fails(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    LocalVectorIndex(path, 4).close()
    with pytest.raises(BindingLimitError, match="4 dimensions"):
        LocalVectorIndex(path, 8)


def test_constructor_index_type_conflict_fails(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite3"
    LocalVectorIndex(path, 4, idx(("p", "string"))).close()
    LocalVectorIndex(path, 4, idx(("p", "string"))).close()  # same declaration: fine
    with pytest.raises(BindingLimitError, match="already exists with type"):
        LocalVectorIndex(path, 4, idx(("p", "number")))


# ----------------------------------------------------------------------------- properties

COLORS = ["red", "green", "blue", ""]
PROPS: dict[str, MetadataIndexType] = {
    "color": "string",
    "size": "number",
    "flag": "boolean",
    "info.level": "number",
}

scalar = st.one_of(
    st.sampled_from(COLORS),
    st.integers(-3, 3),
    st.sampled_from([0.5, -1.5, 2.0]),
    st.booleans(),
    st.none(),
)


@st.composite
def metadata_st(draw: st.DrawFn) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if draw(st.booleans()):
        meta["color"] = draw(st.one_of(st.sampled_from(COLORS), scalar))
    if draw(st.booleans()):
        meta["size"] = draw(st.one_of(st.integers(-3, 3), scalar))
    if draw(st.booleans()):
        meta["flag"] = draw(st.one_of(st.booleans(), scalar))
    if draw(st.booleans()):
        meta["info"] = {"level": draw(st.one_of(st.integers(0, 3), scalar))}
    return meta


@st.composite
def filter_st(draw: st.DrawFn) -> dict[str, Any]:
    props = draw(st.lists(st.sampled_from(sorted(PROPS)), min_size=1, max_size=3, unique=True))
    out: dict[str, Any] = {}
    for prop in props:
        kind = draw(st.sampled_from(["implicit", "$eq", "$ne", "$in", "$nin", "range"]))
        if kind == "implicit":
            out[prop] = draw(scalar)
        elif kind in ("$eq", "$ne"):
            out[prop] = {kind: draw(scalar)}
        elif kind in ("$in", "$nin"):
            out[prop] = {kind: draw(st.lists(scalar, max_size=3))}
        else:
            bound = st.one_of(st.integers(-3, 3), st.sampled_from([*COLORS, "f", "s"]))
            lower = draw(st.sampled_from([None, "$gt", "$gte"]))
            upper = draw(st.sampled_from([None, "$lt", "$lte"] if lower else ["$lt", "$lte"]))
            spec = {op: draw(bound) for op in (lower, upper) if op}
            out[prop] = spec
    return out


def _ref_value(meta: dict[str, Any], prop: str) -> Any:
    node: Any = meta
    for part in prop.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    kind = PROPS[prop]
    if kind == "string":
        return node if isinstance(node, str) else None
    if kind == "number":
        is_num = isinstance(node, int | float) and not isinstance(node, bool)
        return float(node) if is_num else None
    return node if isinstance(node, bool) else None


def _ref_eq(value: Any, operand: Any) -> bool:
    if operand is None:
        return value is None
    if value is None:
        return False
    if isinstance(value, bool) or isinstance(operand, bool):
        return isinstance(value, bool) and isinstance(operand, bool) and value == operand
    if isinstance(value, str) or isinstance(operand, str):
        return isinstance(value, str) and isinstance(operand, str) and value == operand
    return float(value) == float(operand)


def _ref_match(meta: dict[str, Any], filter: dict[str, Any]) -> bool:
    for prop, spec in filter.items():
        value = _ref_value(meta, prop)
        if not isinstance(spec, dict):
            spec = {"$eq": spec}
        for op, operand in spec.items():
            if op == "$eq":
                ok = _ref_eq(value, operand)
            elif op == "$ne":
                ok = not _ref_eq(value, operand)
            elif op == "$in":
                ok = any(_ref_eq(value, o) for o in operand)
            elif op == "$nin":
                ok = not any(_ref_eq(value, o) for o in operand)
            else:
                comparable = value is not None and (
                    (isinstance(value, str) and isinstance(operand, str))
                    or (isinstance(value, float) and not isinstance(operand, str))
                )
                if not comparable:
                    ok = False
                elif op == "$gt":
                    ok = value > operand
                elif op == "$gte":
                    ok = value >= operand
                elif op == "$lt":
                    ok = value < operand
                else:
                    ok = value <= operand
            if not ok:
                return False
    return True


vector_st = st.lists(st.integers(-4, 4), min_size=4, max_size=4).filter(lambda v: any(v))


@pytest.mark.parametrize("name", sorted(FACTORIES))
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    rows=st.lists(
        st.tuples(vector_st, st.sampled_from([None, "ns1", "ns2"]), metadata_st()),
        min_size=1,
        max_size=25,
    ),
    query=vector_st,
    filter=st.one_of(st.none(), filter_st()),
    namespace=st.sampled_from([None, "ns1", "ns2"]),
    top_k=st.integers(1, 30),
)
def test_top_k_equals_brute_force_cosine_ranking(
    name: str,
    rows: list[tuple[list[int], str | None, dict[str, Any]]],
    query: list[int],
    filter: dict[str, Any] | None,
    namespace: str | None,
    top_k: int,
) -> None:
    index = FACTORIES[name](None, 4, idx(*PROPS.items()))
    records = [
        VectorRecord(id=f"v{i}", values=[float(x) for x in v], namespace=ns, metadata=m)
        for i, (v, ns, m) in enumerate(rows)
    ]

    async def run() -> list[tuple[str, float]]:
        await index.upsert(records)
        result = await index.query(query, top_k=top_k, namespace=namespace, filter=filter)
        return [(m.id, m.score) for m in result.matches]

    got = asyncio.run(run())
    expected = sorted(
        (
            (cosine(query, r.values), r.id)
            for r in records
            if (namespace is None or r.namespace == namespace)
            and (filter is None or _ref_match(r.metadata, filter))
        ),
        key=lambda t: -t[0],
    )
    assert len(got) == min(top_k, len(expected))
    brute = {vid: score for score, vid in expected}
    scores = [score for _, score in got]
    assert scores == sorted(scores, reverse=True)
    for vid, score in got:
        assert score == pytest.approx(brute[vid], abs=1e-5)
    if got:
        # nothing left out scores better than the worst returned match (up to float32 noise)
        returned = {vid for vid, _ in got}
        best_left_out = max((s for s, v in expected if v not in returned), default=-2.0)
        assert best_left_out <= got[-1][1] + 1e-5


@pytest.mark.slow
async def test_large_namespace_matches_brute_force(make_index: Factory) -> None:
    rng = np.random.default_rng(7)
    dims, n = 384, 20_000
    matrix = rng.standard_normal((n, dims)).astype(np.float32)
    index = make_index(None, dims, idx(("bucket", "number"), ("tenant_id", "string")))
    for start in range(0, n, 1000):
        await index.upsert(
            [
                VectorRecord(
                    id=f"v{i}",
                    values=matrix[i].tolist(),
                    namespace="big",
                    metadata={"bucket": i % 10, "tenant_id": "t"},
                )
                for i in range(start, start + 1000)
            ]
        )
    query = rng.standard_normal(dims).astype(np.float32)
    result = await index.query(
        query.tolist(),
        top_k=50,
        namespace="big",
        filter={"bucket": {"$gte": 3, "$lt": 5}, "tenant_id": "t"},
    )
    normed = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    scores = normed @ (query / np.linalg.norm(query))
    allowed = np.flatnonzero(np.isin(np.arange(n) % 10, [3, 4]))
    top = allowed[np.argsort(-scores[allowed])[:50]]
    assert [m.id for m in result.matches] == [f"v{i}" for i in top]


async def test_metadata_index_types_are_checked() -> None:
    with pytest.raises(BindingLimitError, match="type must be one of"):
        LocalVectorIndex(None, 2, {"x": "text"})
