"""The memory lifecycle with its D1 side on workerd: the SQL the local adapter accepts must
also run on Cloudflare's SQLite (row-value range deletes, the CHECK-guarded ledger insert,
`RETURNING`, the recursive tenant scan, numbered parameters, the limit trigger's `RAISE`,
`instr`, `json_extract`). The cold tier and the vector index are the local ones (R2 and
Vectorize have no simulator in this harness)."""

from __future__ import annotations

import pytest

from agent_memory.lifecycle.brief import build_brief
from agent_memory.lifecycle.erase import SubjectEraser
from agent_memory.lifecycle.prune import Pruner
from agent_memory.lifecycle.retention import LifecycleUpdate, known_tenants, set_lifecycle
from agent_memory.memory import Memory
from agent_memory.tiers.episodic import Episode, EpisodeLimitReached, EpisodicStore
from bindings.environment import Bindings
from tests.lifecycle.conftest import DAY_MS, NOW_MS, seed_episodes, seed_run, ulid_at
from tests.miniflare.adapters import MiniflareD1


async def test_prune_brief_and_limit_on_workerd(
    mf_bindings: Bindings, mf_migrated_d1: MiniflareD1
) -> None:
    db = mf_migrated_d1
    assert mf_bindings.cold is not None
    old = await seed_episodes(db, "acme", [NOW_MS - (100 + i) * DAY_MS for i in range(5)])
    await seed_episodes(db, "acme", [NOW_MS - DAY_MS])
    await seed_run(db, "acme", NOW_MS - 100 * DAY_MS)
    await seed_episodes(db, "globex", [NOW_MS - 200 * DAY_MS])
    assert await known_tenants(db) == ["acme", "globex"]

    pruner = Pruner(db, mf_bindings.cold, mf_bindings.clock, default_retention_days=90)
    dry = await pruner.dry_run(NOW_MS)
    assert {t.tenant_id: t.episodes_due for t in dry.tenants} == {"acme": 5, "globex": 1}
    report = await pruner.run("weekly-x", NOW_MS)
    assert report.complete
    counts = {t.tenant_id: (t.episodes_deleted, t.runs_deleted) for t in report.tenants}
    assert counts == {"acme": (5, 1), "globex": (1, 0)}
    assert len(mf_bindings.cold.keys("archive/acme/episodes/")) >= 1  # type: ignore[attr-defined]
    again = await pruner.run("weekly-x", NOW_MS)  # RETURNING status: already complete
    assert again.complete and sum(t.episodes_now for t in again.tenants) == 0

    brief = await build_brief(db, now_ms=NOW_MS, default_retention_days=90)
    by_tenant = {t.tenant_id: t for t in brief.tenants}
    assert by_tenant["acme"].episodes == 1 and by_tenant["acme"].archived_rows == 6

    await set_lifecycle(
        db, "acme", LifecycleUpdate(episode_limit=1), default_days=90, now_ms=1, updated_by="t"
    )
    store = EpisodicStore(db, "acme")
    extra = Episode(
        episode_id=ulid_at(NOW_MS + 1),
        run_id=ulid_at(NOW_MS + 1),
        agent_type="assistant",
        instance_id="default",
        kind="observation",
        content="one too many",
        created_at=NOW_MS + 1,
    )
    with pytest.raises(EpisodeLimitReached):
        await store.append_episode(extra)
    assert old  # the archived ids were real rows


async def test_reconcile_and_erase_on_workerd(
    mf_bindings: Bindings, mf_migrated_d1: MiniflareD1
) -> None:
    db = mf_migrated_d1
    memory = (await Memory.open(mf_bindings, "acme")).semantic()
    await memory.learn({"content": "Ada prefers email", "confidence": 0.5})
    await memory.learn({"content": "Ada prefers email", "subject": "contact:ada"})
    # A personal field, sealed into workerd's D1 under a data key stored there too.
    personal = await memory.learn(
        {
            "content": "Ada's email address is on file",
            "subject": "contact:ada",
            "metadata": {"_personal": ["email"], "email": "ada@example.com"},
        }
    )
    stored = (
        await db.prepare(
            "SELECT metadata FROM semantic_facts WHERE tenant_id = 'acme' AND fact_id = ?"
        )
        .bind(personal.fact_id)
        .first_value("metadata")
    )
    assert "ada@example.com" not in str(stored) and '"email":"pii.1.A256GCM.' in str(stored)
    fact = await memory.get(personal.fact_id)
    assert fact is not None and fact.metadata["email"] == "ada@example.com"
    obs = {"observations": [{"predicate": "likes", "object": "tea", "confidence": 0.9}]}
    now = int(mf_bindings.clock.now() * 1000)
    await seed_episodes(db, "acme", [now - 3, now - 2, now - 1], subject="contact:ada", data=obs)
    reconciler = (await Memory.open(mf_bindings, "acme")).reconciler()
    assert reconciler is not None
    report = await reconciler.run()
    assert (report.merged_exact, report.promoted) == (1, 1)

    eraser = SubjectEraser(
        "acme",
        db=db,
        clock=mf_bindings.clock,
        kv=mf_bindings.kv,
        vectors=mf_bindings.vectors,
        cold=mf_bindings.cold,
    )
    erased = await eraser.erase("contact:ada")
    assert erased.complete and erased.episodes == 3 and erased.facts == 4
    # Its data key is gone (crypto-shredding) and the keyword index keeps none of its facts.
    assert erased.data_keys == 1 and erased.keyword_index_optimized
    left = await db.prepare(
        "SELECT COUNT(*) AS n FROM semantic_facts WHERE tenant_id = 'acme'"
    ).first_value("n")
    assert left == 0
