"""Personal data at rest (issue 13, docs/personal-data.md): marked fields are stored only as
AES-256-GCM ciphertext under the subject's data key, read back in plaintext through the
tiers, refused when no key-encryption key is configured, bound to their row, readable across
a KEK rotation, and unreadable everywhere — a cold archive copied before included — once the
subject is erased."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from typing import Any

import pytest

from agent_memory.governance.personal_data import PersonalData, PersonalDataUnavailable, SealedValue
from agent_memory.lifecycle.erase import SubjectEraser
from agent_memory.lifecycle.inspect import MemoryInspector
from agent_memory.lifecycle.prune import Pruner, decode_archive, row_from_archive
from agent_memory.memory import Memory
from agent_memory.tiers.episodic import Episode, EpisodicStore, open_episodes
from agent_memory.tiers.semantic.models import MemoryInputError
from bindings.environment import Bindings
from bindings.settings import Settings
from local_runtime.runtime import LocalRuntime
from tests.lifecycle.conftest import DAY_MS, NOW_MS, count, ulid_at
from worker.cron import DAILY_BRIEF, run_scheduled

ADA = "contact:ada"
EMAIL = "ada.lovelace@example.com"
PHONE = "+44 20 7946 0000"


def kek(kid: str) -> str:
    return f"{kid}:{base64.b64encode(os.urandom(32)).decode()}"


def with_keks(rt: LocalRuntime, keks: str) -> Bindings:
    settings = Settings.from_vars({"MEMORY_PII_KEKS": keks})
    return dataclasses.replace(rt.bindings(), settings=settings)


def episode(ms: int, data: dict[str, Any], subject: str | None = ADA) -> Episode:
    return Episode(
        episode_id=ulid_at(ms),
        run_id=ulid_at(ms - 1),
        agent_type="assistant",
        instance_id="default",
        kind="observation",
        subject=subject,
        content="talked about contact details",
        data=data,
        created_at=ms,
    )


async def raw_column(rt: LocalRuntime, sql: str, *params: Any) -> str:
    return str(await rt.db.prepare(sql).bind(*params).first_value("v"))


async def test_marked_episode_fields_are_ciphertext_in_d1_and_plaintext_when_read(
    rt: LocalRuntime,
) -> None:
    store = EpisodicStore(rt.db, "acme", personal=PersonalData.from_bindings(rt.bindings(), "acme"))
    fields = episode(NOW_MS - 2, {"_personal": ["email"], "email": EMAIL, "topic": "renewal"})
    whole = episode(NOW_MS - 1, {"_personal": True, "phone": PHONE, "city": "London"})
    # A whole object marked one level down: it stays an object, marked, with its seal.
    nested = episode(NOW_MS, {"contact": {"_personal": True, "phone": PHONE}, "topic": "x"})
    for item in (fields, whole, nested):
        await store.append_episode(item)
    stored = {
        e.episode_id: json.loads(
            await raw_column(
                rt, "SELECT data AS v FROM memory_episodes WHERE episode_id = ?", e.episode_id
            )
        )
        for e in (fields, whole, nested)
    }
    # Only the marked field is sealed; the rest (and the mark) stay readable for queries.
    by_fields, by_whole = stored[fields.episode_id], stored[whole.episode_id]
    assert by_fields["topic"] == "renewal" and by_fields["_personal"] == ["email"]
    assert SealedValue.parse(by_fields["email"]) is not None
    assert set(by_whole) == {"_personal", "_sealed"}
    by_nested = stored[nested.episode_id]
    assert by_nested["topic"] == "x" and set(by_nested["contact"]) == {"_personal", "_sealed"}
    dump = json.dumps(stored)
    assert EMAIL not in dump and PHONE not in dump and "London" not in dump
    # Read back through the tier: the caller sees what was written.
    read = {e.episode_id: e for e in await store.episodes_for_run(fields.run_id)}
    for item in (whole, nested):
        read.update({e.episode_id: e for e in await store.episodes_for_run(item.run_id)})
    for item in (fields, whole, nested):
        assert read[item.episode_id].data == item.data


async def test_marked_fact_metadata_never_reaches_d1_fts_or_vectors_in_plaintext(
    rt: LocalRuntime,
) -> None:
    memory = (await Memory.open(rt.bindings(), "acme")).semantic()
    learned = await memory.learn(
        {
            "content": "Ada asked to be contacted by email",
            "subject": ADA,
            "metadata": {"_personal": ["email"], "email": EMAIL, "entity": "ada lovelace"},
        }
    )
    raw = await raw_column(
        rt, "SELECT metadata AS v FROM semantic_facts WHERE fact_id = ?", learned.fact_id
    )
    assert EMAIL not in raw and '"email":"pii.1.A256GCM.' in raw
    # The keyword index (migration 0009): no term of the sealed value is a posting.
    terms = await rt.db.prepare("SELECT term FROM semantic_terms").all()
    assert terms.results  # the fact's content is indexed ...
    assert not any("example" in str(row["term"]) for row in terms.results)  # ... not the email
    [record] = await rt.vectors.get_by_ids([learned.fact_id])
    assert EMAIL not in json.dumps(record.metadata)
    fact = await memory.get(learned.fact_id)
    assert fact is not None and fact.metadata["email"] == EMAIL
    result = await memory.recall("contacted by email", filters={"subject": ADA})
    assert result.results[0].fact.metadata["email"] == EMAIL
    # The per-subject data key is stored wrapped, the subject only as its hash.
    keys = await rt.db.prepare("SELECT * FROM subject_data_keys").all()
    [key_row] = keys.results
    assert key_row["kek_kid"] == "dev-1" and ADA not in json.dumps(key_row)


async def test_without_a_kek_personal_data_is_refused_and_nothing_is_written(
    rt: LocalRuntime,
) -> None:
    bindings = with_keks(rt, "")
    memory = (await Memory.open(bindings, "acme")).semantic()
    with pytest.raises(MemoryInputError) as caught:
        await memory.learn({"content": "x", "subject": ADA, "metadata": {"_personal": True}})
    assert caught.value.code == "personal_data_unavailable"
    store = EpisodicStore(rt.db, "acme", personal=PersonalData.from_bindings(bindings, "acme"))
    with pytest.raises(PersonalDataUnavailable):
        await store.append_episode(episode(NOW_MS, {"_personal": ["email"], "email": EMAIL}))
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM semantic_facts") == 0
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM memory_episodes") == 0
    assert await count(rt.db, "SELECT COUNT(*) AS n FROM subject_data_keys") == 0
    # Unmarked data needs no key.
    await store.append_episode(episode(NOW_MS, {"topic": "renewal"}))


async def test_a_sealed_value_opens_only_in_its_own_row(rt: LocalRuntime) -> None:
    store = EpisodicStore(rt.db, "acme", personal=PersonalData.from_bindings(rt.bindings(), "acme"))
    first = episode(NOW_MS - 2, {"_personal": ["email"], "email": EMAIL})
    second = episode(NOW_MS - 1, {"_personal": ["email"], "email": "someone@example.com"})
    await store.append_episode(first)
    await store.append_episode(second)
    # Copy the first row's sealed value into the second row: the AAD names the row.
    await (
        rt.db.prepare(
            "UPDATE memory_episodes SET data = (SELECT data FROM memory_episodes "
            "WHERE episode_id = ?) WHERE episode_id = ?"
        )
        .bind(first.episode_id, second.episode_id)
        .run()
    )
    [moved] = await store.episodes_for_run(second.run_id)
    assert moved.data == {"_personal": ["email"], "email": None}
    [kept] = await store.episodes_for_run(first.run_id)
    assert kept.data["email"] == EMAIL


async def test_kek_rotation_reads_with_any_kid_and_rewrap_retires_the_old_one(
    rt: LocalRuntime,
) -> None:
    old, new = kek("k1"), kek("k2")
    first = with_keks(rt, old)
    store = EpisodicStore(rt.db, "acme", personal=PersonalData.from_bindings(first, "acme"))
    item = episode(NOW_MS, {"_personal": ["email"], "email": EMAIL})
    await store.append_episode(item)

    async def read(bindings: Bindings) -> Any:
        personal = PersonalData.from_bindings(bindings, "acme")
        [found] = await EpisodicStore(rt.db, "acme", personal=personal).episodes_for_run(
            item.run_id
        )
        return found.data["email"]

    rotated = with_keks(rt, f"{new},{old}")  # newest first: k2 wraps, both unwrap
    assert await read(rotated) == EMAIL
    assert await read(with_keks(rt, new)) is None  # k1 removed before the re-wrap: unreadable
    # The daily cron re-wraps under the newest KEK; a second run finds nothing to do.
    daily = await run_scheduled(DAILY_BRIEF, rt.clock.now(), rotated)
    assert daily["result"]["data_keys_rewrapped"] == {"acme": 1}
    again = await run_scheduled(DAILY_BRIEF, rt.clock.now(), rotated)
    assert again["result"]["data_keys_rewrapped"] == {}
    kids = await rt.db.prepare("SELECT kek_kid FROM subject_data_keys").all()
    assert [row["kek_kid"] for row in kids.results] == ["k2"]
    assert await read(with_keks(rt, new)) == EMAIL  # k1 can now leave the secret


async def test_an_archive_copied_before_the_erase_cannot_be_decrypted_after(
    rt: LocalRuntime,
) -> None:
    personal = PersonalData.from_bindings(rt.bindings(), "acme")
    store = EpisodicStore(rt.db, "acme", personal=personal)
    old = episode(NOW_MS - 100 * DAY_MS, {"_personal": ["email"], "email": EMAIL})
    await store.append_episode(old)
    await Pruner(rt.db, rt.cold, rt.clock, default_retention_days=90).run("job", NOW_MS)
    listing = await rt.cold.list(prefix="archive/acme/episodes/")
    [info] = listing.objects
    body = await rt.cold.get(info.key)
    assert body is not None
    copy = bytes(body.data)  # e.g. a bucket replica or a download kept elsewhere
    assert EMAIL.encode() not in copy and EMAIL not in json.dumps(decode_archive(copy))

    def archived_rows() -> list[dict[str, Any]]:
        return [row_from_archive(row, "episodes") for row in decode_archive(copy)]

    [before] = await open_episodes(
        archived_rows(), PersonalData.from_bindings(rt.bindings(), "acme")
    )
    assert before.data["email"] == EMAIL  # the copy is readable while the key exists

    report = await SubjectEraser("acme", db=rt.db, clock=rt.clock).erase(ADA)
    assert report.data_keys == 1
    # The copy was not rewritten (it is outside the live stores) and still holds the
    # ciphertext, but no key opens it any more.
    [after] = await open_episodes(
        archived_rows(), PersonalData.from_bindings(rt.bindings(), "acme")
    )
    assert after.data == {"_personal": ["email"], "email": None}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("k1", "is not `kid:base64key`"),
        ("k 1:AAAA", "is not `kid:base64key`"),
        ("k1:not base64!", "is not base64"),
        (f"k1:{base64.b64encode(b'short').decode()}", "is 5 bytes, not 32"),
        (f"{kek('k1')},{kek('k1')}", "names kid 'k1' twice"),
    ],
    # Ids without the random keys: pytest-xdist workers must collect the same ids.
    ids=["no-colon", "space-in-kid", "not-base64", "short-key", "kid-twice"],
)
def test_bad_kek_settings_are_refused_without_echoing_keys(raw: str, problem: str) -> None:
    with pytest.raises(ValueError, match="MEMORY_PII_KEKS") as caught:
        Settings.from_vars({"MEMORY_PII_KEKS": raw})
    assert problem in str(caught.value)
    for entry in raw.split(","):
        secret = entry.partition(":")[2]
        assert len(secret) < 8 or secret not in str(caught.value)


def test_the_sealed_value_text_round_trips_and_rejects_other_strings() -> None:
    value = SealedValue(kid="01J0000000000000000000000A", nonce=b"n" * 12, ciphertext=b"c" * 20)
    text = value.text()
    assert text.startswith("pii.1.A256GCM.01J0000000000000000000000A.")
    assert SealedValue.parse(text) == value
    for other in ("pii.2.A256GCM.k.bm9uY2U.Y3Q", "pii.1.A128GCM.k.a.b", "hello", 42, None):
        assert SealedValue.parse(other) is None


async def test_the_inspector_shows_a_personal_facts_compact_write_event_whole(
    rt: LocalRuntime,
) -> None:
    """A fact with marked fields keeps a compact event row (no hash, only the marked fields):
    the inspector fills its hash and payload in from the opened fact."""
    memory = (await Memory.open(rt.bindings(), "acme")).semantic()
    metadata = {"_personal": ["email"], "email": EMAIL}
    learned = await memory.learn(
        {"content": "Ada wants email", "subject": ADA, "metadata": metadata}
    )
    [row] = (await rt.db.prepare("SELECT * FROM memory_events").all()).results
    assert row["event_id"] == learned.fact_id and row["content_hash"] is None
    personal = PersonalData.from_bindings(rt.bindings(), "acme")
    detail = await MemoryInspector(rt.db, "acme", now_ms=NOW_MS, personal=personal).fact_detail(
        learned.fact_id
    )
    assert detail is not None
    [event] = detail.written
    assert event.content_hash is not None and event.payload["subject"] == ADA
    assert event.payload["personal_fields"] == ["metadata.email"]
