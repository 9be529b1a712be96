"""Round trip: a tenant exported and imported into another tenant on another shard has the
same facts, history, episodes, runs, packs and settings, and recall answers the same questions
with the same facts in the same order and scores; a property test over generated tenants."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory.directory import home_of, place_tenant
from agent_memory.memory import Memory
from agent_memory.tiers.semantic.models import FactInput
from local_runtime.runtime import LocalRuntime
from tests.portability.conftest import comparable, exported
from tests.portability.seed import QUESTIONS, seed_tenant


async def _import(runtime: LocalRuntime, tenant: str, records: list[dict]) -> dict:
    runtime.clock.advance(3600)  # type: ignore[attr-defined]  # an import happens later
    lines = [json.dumps(r).encode() for r in records]
    importer = (await Memory.open(runtime.bindings(), tenant)).importer()
    report = await importer.run(lambda: lines, by="ops@example.com")
    await runtime.background.drain()
    return report.model_dump()


async def _recall(runtime: LocalRuntime, tenant: str, question: str) -> list[tuple[str, float]]:
    semantic = (await Memory.open(runtime.bindings(), tenant)).semantic()
    found = await semantic.rank(question, 10, record=False)
    return [(r.fact.fact_id, round(r.score, 9)) for r in found.results]


async def test_a_tenant_moves_by_export_and_import_to_another_shard(
    memory_runtime: LocalRuntime,
) -> None:
    rt = memory_runtime
    await place_tenant(rt.bindings(), "acme", "primary")
    await place_tenant(rt.bindings(), "globex", "s2")
    await seed_tenant(rt, "acme")
    # Personal fields are sealed under acme's keys: they open nowhere else, so moving a tenant
    # takes an export with them opened (an operator's event), sealed again under globex's.
    original = await exported(rt, "acme", "opened")
    kinds = {r["record"] for r in original}
    assert kinds >= {
        "header",
        "fact",
        "provenance",
        "link",
        "kept_apart",
        "event",
        "episode",
        "run",
        "pack",
        "lifecycle",
    }, kinds
    statuses = {r["status"] for r in original if r["record"] == "fact"}
    assert statuses == {"active", "superseded"}
    report = await _import(rt, "globex", original)
    assert report["refused"] == {}, report["refusals"]
    assert await home_of(rt.bindings(), "globex") == "s2"
    again = await exported(rt, "globex", "opened")
    assert comparable(again) == comparable(original)
    sealed = [r for r in await exported(rt, "globex") if r["record"] == "fact"]
    assert any(str(r["metadata"].get("phone", "")).startswith("pii.1.") for r in sealed)
    for question in QUESTIONS:
        assert await _recall(rt, "globex", question) == await _recall(rt, "acme", question)


@st.composite
def tenants(draw: st.DrawFn) -> list[FactInput]:
    words = st.sampled_from(["tea", "boat", "Paris", "Berlin", "invoice", "May", "coffee"])
    subjects = st.sampled_from(["ada", "bo", "cy", "general"])
    made = draw(
        st.lists(
            st.tuples(subjects, st.lists(words, min_size=2, max_size=5)), min_size=1, max_size=12
        )
    )
    return [
        FactInput(content=f"{s} likes {' '.join(w)} #{i}", subject=s, valid_from=1.7e9 + i)
        for i, (s, w) in enumerate(made)
    ]


@settings(
    max_examples=int(os.environ.get("PORTABILITY_EXAMPLES", "8")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(facts=tenants())
async def test_any_tenant_comes_back_the_same(memory_runtime: LocalRuntime, facts: list) -> None:
    rt = memory_runtime
    source, target = f"src-{os.urandom(4).hex()}", f"dst-{os.urandom(4).hex()}"
    await place_tenant(rt.bindings(), source, "primary")
    await place_tenant(rt.bindings(), target, "s2")
    memory = await Memory.open(rt.bindings(), source)
    await memory.semantic().learn_many(facts)
    reconciler = memory.reconciler()
    assert reconciler is not None
    await reconciler.run()
    await rt.background.drain()
    original = await exported(rt, source)
    await _import(rt, target, original)
    assert comparable(await exported(rt, target)) == comparable(original)
    for question in ("tea", "Paris boat", "invoice in May"):
        assert await _recall(rt, target, question) == await _recall(rt, source, question)
