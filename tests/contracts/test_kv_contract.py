"""Contract suite for the KV port (`bindings.ports.kv.KVNamespace`).

The rules and error texts are Cloudflare's, as workerd and miniflare implement them
(workerd `src/workerd/api/kv.c++`; miniflare `src/workers/kv/namespace.worker.ts`).
Every adapter must pass this suite; tests needing to move time skip for adapters whose
clock cannot be moved.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindings.ports.errors import BindingLimitError
from tests.contracts.conftest import KVFactory, KVHarness

TTL_TOO_SHORT = (
    "KV PUT failed: 400 Invalid expiration_ttl of 30. Expiration TTL must be at least 60."
)


def need_clock(harness: KVHarness) -> None:
    if harness.advance is None:
        pytest.skip("this adapter's clock cannot be moved forward")


# --- reads and writes -------------------------------------------------------------------


async def test_put_then_get_returns_the_value(kv: KVHarness) -> None:
    await kv.kv.put("greeting", "hello")
    assert await kv.kv.get("greeting") == "hello"


async def test_missing_key_reads_as_none(kv: KVHarness) -> None:
    assert await kv.kv.get("nothing-here") is None
    missing = await kv.kv.get_with_metadata("nothing-here")
    assert missing.value is None
    assert missing.metadata is None


async def test_put_overwrites_value_and_metadata(kv: KVHarness) -> None:
    await kv.kv.put("k", "one", metadata={"v": 1})
    await kv.kv.put("k", "two")
    again = await kv.kv.get_with_metadata("k")
    assert again.value == "two"
    assert again.metadata is None


async def test_metadata_round_trips(kv: KVHarness) -> None:
    meta = {"tenant": "t1", "n": 3, "nested": {"ok": True}, "tags": ["a", "b"]}
    await kv.kv.put("with-meta", "v", metadata=meta)
    got = await kv.kv.get_with_metadata("with-meta")
    assert got.value == "v"
    assert got.metadata == meta


async def test_values_keep_unicode_and_empty_strings(kv: KVHarness) -> None:
    await kv.kv.put("empty", "")
    await kv.kv.put("unicode", "naïve ☃ 𝄞")
    assert await kv.kv.get("empty") == ""
    assert await kv.kv.get("unicode") == "naïve ☃ 𝄞"


async def test_delete_removes_and_tolerates_missing_keys(kv: KVHarness) -> None:
    await kv.kv.put("gone", "soon")
    await kv.kv.delete("gone")
    assert await kv.kv.get("gone") is None
    await kv.kv.delete("gone")  # deleting twice is not an error
    await kv.kv.delete("never-existed")


# --- key rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "Key name cannot be empty."),
        (".", '"." is not allowed as a key name.'),
        ("..", '".." is not allowed as a key name.'),
    ],
)
async def test_illegal_key_names_are_rejected_everywhere(
    kv: KVHarness, key: str, message: str
) -> None:
    for call in (
        kv.kv.get(key),
        kv.kv.get_with_metadata(key),
        kv.kv.put(key, "v"),
        kv.kv.delete(key),
    ):
        with pytest.raises(BindingLimitError, match=re.escape(message)):
            await call


async def test_key_of_513_utf8_bytes_is_rejected_with_the_byte_count(kv: KVHarness) -> None:
    key = "€" * 171  # 3 bytes each: 513 bytes, only 171 characters
    expected = "UTF-8 encoded length of 513 exceeds key length limit of 512."
    with pytest.raises(BindingLimitError, match=re.escape(f"KV PUT failed: 414 {expected}")):
        await kv.kv.put(key, "v")
    with pytest.raises(BindingLimitError, match=re.escape(f"KV GET failed: 414 {expected}")):
        await kv.kv.get(key)
    with pytest.raises(BindingLimitError, match=re.escape(f"KV DELETE failed: 414 {expected}")):
        await kv.kv.delete(key)


async def test_key_of_exactly_512_bytes_is_accepted(kv: KVHarness) -> None:
    key = "k" * 510 + "é"  # 510 + 2 bytes
    await kv.kv.put(key, "max")
    assert await kv.kv.get(key) == "max"


# --- expiration rules ---------------------------------------------------------------------


async def test_ttl_below_60_seconds_is_rejected_with_cloudflares_text(kv: KVHarness) -> None:
    with pytest.raises(BindingLimitError, match=re.escape(TTL_TOO_SHORT)):
        await kv.kv.put("short", "v", expiration_ttl=30)
    assert await kv.kv.get("short") is None


async def test_non_positive_ttl_is_rejected(kv: KVHarness) -> None:
    with pytest.raises(
        BindingLimitError,
        match=re.escape("Invalid expiration_ttl of 0. Please specify integer greater than 0."),
    ):
        await kv.kv.put("zero", "v", expiration_ttl=0)


async def test_ttl_of_exactly_60_seconds_is_accepted(kv: KVHarness) -> None:
    await kv.kv.put("minute", "v", expiration_ttl=60)
    assert await kv.kv.get("minute") == "v"


async def test_absolute_expiration_in_the_past_is_rejected(kv: KVHarness) -> None:
    past = int(kv.now()) - 10
    with pytest.raises(
        BindingLimitError,
        match=re.escape(
            f"KV PUT failed: 400 Invalid expiration of {past}. Please specify integer greater "
            "than the current number of seconds since the UNIX epoch."
        ),
    ):
        await kv.kv.put("past", "v", expiration=past)


async def test_absolute_expiration_less_than_60s_ahead_is_rejected(kv: KVHarness) -> None:
    soon = int(kv.now()) + 30
    with pytest.raises(
        BindingLimitError,
        match=re.escape(
            f"KV PUT failed: 400 Invalid expiration of {soon}. "
            "Expiration times must be at least 60 seconds in the future."
        ),
    ):
        await kv.kv.put("soon", "v", expiration=soon)


async def test_ttl_expiry_hides_the_key_from_every_read(kv: KVHarness) -> None:
    need_clock(kv)
    assert kv.advance is not None
    await kv.kv.put("session", "v", expiration_ttl=60, metadata={"m": 1})
    await kv.kv.put("session-forever", "v")
    kv.advance(59)
    assert await kv.kv.get("session") == "v"
    kv.advance(1)
    assert await kv.kv.get("session") is None
    gone = await kv.kv.get_with_metadata("session")
    assert (gone.value, gone.metadata) == (None, None)
    listed = await kv.kv.list(prefix="session")
    assert [k.name for k in listed.keys] == ["session-forever"]


async def test_absolute_expiration_is_honoured(kv: KVHarness) -> None:
    need_clock(kv)
    assert kv.advance is not None
    at = int(kv.now()) + 120
    await kv.kv.put("until", "v", expiration=at)
    kv.advance(119)
    assert await kv.kv.get("until") == "v"
    kv.advance(1)
    assert await kv.kv.get("until") is None


async def test_rewriting_a_key_without_ttl_makes_it_permanent(kv: KVHarness) -> None:
    need_clock(kv)
    assert kv.advance is not None
    await kv.kv.put("k", "temp", expiration_ttl=60)
    await kv.kv.put("k", "kept")
    kv.advance(3600)
    assert await kv.kv.get("k") == "kept"


async def test_ttl_wins_when_both_expirations_are_given(kv: KVHarness) -> None:
    far = int(kv.now()) + 86_400
    await kv.kv.put("both", "v", expiration_ttl=120, expiration=far)
    [key] = (await kv.kv.list(prefix="both")).keys
    assert key.expiration is not None
    assert abs(key.expiration - (kv.now() + 120)) <= 2


# --- size limits --------------------------------------------------------------------------


async def test_metadata_over_1024_bytes_is_rejected(kv: KVHarness) -> None:
    # '{"k":"' + x*1017 + '"}' serialises to 1025 bytes.
    with pytest.raises(
        BindingLimitError,
        match=re.escape("KV PUT failed: 413 Metadata length of 1025 exceeds limit of 1024."),
    ):
        await kv.kv.put("big-meta", "v", metadata={"k": "x" * 1017})
    assert await kv.kv.get("big-meta") is None


async def test_metadata_of_exactly_1024_bytes_is_accepted(kv: KVHarness) -> None:
    meta = {"k": "x" * 1016}
    await kv.kv.put("max-meta", "v", metadata=meta)
    assert (await kv.kv.get_with_metadata("max-meta")).metadata == meta


async def test_value_over_25_mib_is_rejected(kv: KVHarness) -> None:
    limit = 25 * 1024 * 1024
    with pytest.raises(
        BindingLimitError,
        match=re.escape(
            f"KV PUT failed: 413 Value length of {limit + 1} exceeds limit of {limit}."
        ),
    ):
        await kv.kv.put("huge", "x" * (limit + 1))
    assert await kv.kv.get("huge") is None


# --- list ----------------------------------------------------------------------------------


async def test_list_filters_by_prefix_in_utf8_byte_order(kv: KVHarness) -> None:
    names = ["user:b", "user:a", "user:é", "user:Z", "user:ab", "usex", "other"]
    for name in names:
        await kv.kv.put(name, "v")
    page = await kv.kv.list(prefix="user:")
    assert [k.name for k in page.keys] == ["user:Z", "user:a", "user:ab", "user:b", "user:é"]
    assert page.list_complete is True
    assert page.cursor is None


async def test_list_reports_expiration_and_metadata_only_when_set(kv: KVHarness) -> None:
    await kv.kv.put("a:plain", "v")
    await kv.kv.put("a:ttl", "v", expiration_ttl=3600)
    await kv.kv.put("a:meta", "v", metadata={"role": "admin"})
    keys = {k.name: k for k in (await kv.kv.list(prefix="a:")).keys}
    assert keys["a:plain"].expiration is None
    assert keys["a:plain"].metadata is None
    assert keys["a:meta"].metadata == {"role": "admin"}
    expiration = keys["a:ttl"].expiration
    assert expiration is not None
    assert abs(expiration - (kv.now() + 3600)) <= 2


async def test_list_paginates_with_an_opaque_cursor(kv: KVHarness) -> None:
    for i in range(7):
        await kv.kv.put(f"p:{i}", str(i))
    first = await kv.kv.list(prefix="p:", limit=3)
    assert [k.name for k in first.keys] == ["p:0", "p:1", "p:2"]
    assert first.list_complete is False
    assert first.cursor
    second = await kv.kv.list(prefix="p:", limit=3, cursor=first.cursor)
    assert [k.name for k in second.keys] == ["p:3", "p:4", "p:5"]
    third = await kv.kv.list(prefix="p:", limit=3, cursor=second.cursor)
    assert [k.name for k in third.keys] == ["p:6"]
    assert third.list_complete is True


async def test_keys_written_after_the_cursor_position_are_still_listed(kv: KVHarness) -> None:
    for name in ("c:a", "c:c", "c:e"):
        await kv.kv.put(name, "v")
    first = await kv.kv.list(prefix="c:", limit=2)
    assert [k.name for k in first.keys] == ["c:a", "c:c"]
    await kv.kv.put("c:d", "late")
    rest = await kv.kv.list(prefix="c:", limit=2, cursor=first.cursor)
    assert [k.name for k in rest.keys] == ["c:d", "c:e"]


async def test_list_limit_above_1000_is_rejected(kv: KVHarness) -> None:
    with pytest.raises(
        BindingLimitError,
        match=re.escape(
            "KV GET failed: 400 Invalid key_count_limit of 1001. "
            "Please specify an integer less than 1000."
        ),
    ):
        await kv.kv.list(limit=1001)


async def test_list_default_page_is_1000_keys(kv: KVHarness) -> None:
    for i in range(1001):
        await kv.kv.put(f"n:{i:04d}", "v")
    page = await kv.kv.list(prefix="n:")
    assert len(page.keys) == 1000
    assert page.list_complete is False
    rest = await kv.kv.list(prefix="n:", cursor=page.cursor)
    assert [k.name for k in rest.keys] == ["n:1000"]


async def test_list_prefix_longer_than_a_key_is_rejected(kv: KVHarness) -> None:
    with pytest.raises(BindingLimitError, match=re.escape("KV GET failed: 414")):
        await kv.kv.list(prefix="p" * 513)


async def test_deleted_keys_disappear_from_list(kv: KVHarness) -> None:
    await kv.kv.put("d:1", "v")
    await kv.kv.put("d:2", "v")
    await kv.kv.delete("d:1")
    assert [k.name for k in (await kv.kv.list(prefix="d:")).keys] == ["d:2"]


key_text = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], min_codepoint=32),
    min_size=1,
    max_size=12,
).filter(lambda k: k not in (".", ".."))


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    live=st.sets(key_text, min_size=0, max_size=30),
    deleted=st.sets(key_text, max_size=10),
    page_size=st.integers(min_value=1, max_value=8),
    prefix=st.sampled_from(["", "a", "b", "é"]),
)
async def test_pagination_returns_every_live_key_exactly_once_in_byte_order(
    make_kv: KVFactory, live: set[str], deleted: set[str], page_size: int, prefix: str
) -> None:
    async with make_kv() as harness:
        for name in live | deleted:
            await harness.kv.put(name, "v")
        for name in deleted - live:
            await harness.kv.delete(name)
        seen: list[str] = []
        cursor: str | None = None
        while True:
            page = await harness.kv.list(prefix=prefix, limit=page_size, cursor=cursor)
            assert len(page.keys) <= page_size
            seen.extend(k.name for k in page.keys)
            if page.list_complete:
                break
            cursor = page.cursor
            assert cursor
        expected = sorted((k for k in live if k.startswith(prefix)), key=lambda k: k.encode())
        assert seen == expected
