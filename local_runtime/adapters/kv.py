"""Workers KV on SQLite: `SqliteKV` implements `bindings.ports.kv.KVNamespace`, with the rules
and error texts of workerd (`src/workerd/api/kv.c++`) and miniflare (`workers/kv/*`): keys of
1-512 UTF-8 bytes, not "." or ".."; `expiration_ttl` at least 60 s, an absolute `expiration`
at least 60 s ahead (the TTL wins when both are given); metadata at most 1024 bytes of JSON,
values at most 25 MiB; `list` in UTF-8 byte order, at most 1000 a page, its cursor the last
key returned (a `limit` of 0 or less is the default); expired keys are invisible. A broken
rule raises `BindingLimitError` with the text a Worker sees. Not reproduced: eventual
consistency, `cacheTtl` and the 1 write/s/key limit.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from bindings.ports.clock import Clock, SystemClock
from bindings.ports.errors import BindingLimitError
from bindings.ports.kv import (
    KV_MAX_KEY_BYTES,
    KV_MAX_LIST_LIMIT,
    KV_MAX_METADATA_BYTES,
    KV_MAX_VALUE_BYTES,
    KV_MIN_EXPIRATION_TTL,
    KVKey,
    KVListResult,
    KVValueWithMetadata,
)
from local_runtime.adapters.jsnumbers import becomes_js_number, js_number

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv_entries (
    key        BLOB PRIMARY KEY,  -- UTF-8 bytes: BLOB order is memcmp, KV's byte order
    value      TEXT NOT NULL,
    expiration INTEGER,           -- epoch seconds; NULL never expires
    metadata   TEXT               -- JSON text; NULL when none was given
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_entries_expiration
    ON kv_entries (expiration) WHERE expiration IS NOT NULL;
"""


def _fail(method: str, status: int, message: str) -> BindingLimitError:
    # workerd's checkForErrorStatus(): "KV <METHOD> failed: <status> <statusText>", where
    # the status text is miniflare's HttpError message.
    return BindingLimitError(f"KV {method} failed: {status} {message}")


def _key_bytes(method: str, key: str) -> bytes:
    """Validate a key the way workerd's validateKeyName() does; return its UTF-8 bytes."""
    if key == "":
        raise BindingLimitError("Key name cannot be empty.")
    if key in (".", ".."):
        raise BindingLimitError(f'"{key}" is not allowed as a key name.')
    encoded = key.encode("utf-8")
    if len(encoded) > KV_MAX_KEY_BYTES:
        raise _fail(
            method,
            414,
            f"UTF-8 encoded length of {len(encoded)} exceeds key length limit of "
            f"{KV_MAX_KEY_BYTES}.",
        )
    return encoded


def _prefix_upper_bound(prefix: bytes) -> bytes | None:
    """The smallest byte string greater than every string starting with `prefix`."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def _encode_cursor(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode("ascii")


def _decode_cursor(cursor: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(cursor.encode("ascii"))
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise _fail("GET", 400, f"Invalid cursor {cursor!r}.") from None


def _as_js_json(value: Any) -> Any:
    """Metadata as the Workers SDK hands it to JS before KV's JSON.stringify.

    A whole float is the same JS number as the int (1.0 is stored as 1); an int beyond
    +-2^53 becomes a BigInt, which JSON.stringify refuses (workerd's TypeError text).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | dict | list):
        return value
    if isinstance(value, int):
        if not becomes_js_number(value):
            raise TypeError("Do not know how to serialize a BigInt")
        return value
    if isinstance(value, float):
        return js_number(value) if math.isfinite(value) else value
    if isinstance(value, dict):
        return {key: _as_js_json(item) for key, item in value.items()}
    return [_as_js_json(item) for item in value]


def _load_metadata(text: str) -> Any:
    # Read back through a JS number, as Pyodide converts it.
    return json.loads(text, parse_float=lambda number: js_number(float(number)))


class SqliteKV:
    """A KV namespace stored in one SQLite file (or ":memory:" for tests)."""

    def __init__(self, path: str | Path, clock: Clock | None = None) -> None:
        """Open (creating if needed) the namespace at `path`; `clock` decides what "now" is
        for expiration (tests pass a `FixedClock`)."""
        self._clock: Clock = clock if clock is not None else SystemClock()
        location = str(path)
        if location != ":memory:":
            Path(location).parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: every statement commits on its own (KV writes are single
        # statements), and no implicit BEGIN ever holds the write lock across awaits.
        self._db = sqlite3.connect(location, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        self._db.execute("PRAGMA busy_timeout = 2000")
        # Deleted values are overwritten with zeros (a subject erase leaves no bytes behind).
        self._db.execute("PRAGMA secure_delete = ON")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def checkpoint(self) -> None:
        """Checkpoint and truncate the WAL, so no deleted value survives in the -wal file."""
        self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def _now(self) -> int:
        # miniflare compares expirations with the current time floored to whole seconds.
        return math.floor(self._clock.now())

    async def get(self, key: str) -> str | None:
        return (await self.get_with_metadata(key)).value

    async def get_with_metadata(self, key: str) -> KVValueWithMetadata:
        """Return value and metadata; both None when the key is missing or expired."""
        encoded = _key_bytes("GET", key)
        row = self._db.execute(
            "SELECT value, expiration, metadata FROM kv_entries WHERE key = ?", (encoded,)
        ).fetchone()
        if row is None:
            return KVValueWithMetadata(value=None, metadata=None)
        value, expiration, metadata = row
        if expiration is not None and expiration <= self._now():
            # Garbage-collect on read, as miniflare does; the clock only moves forward.
            self._db.execute(
                "DELETE FROM kv_entries WHERE key = ? AND expiration <= ?",
                (encoded, self._now()),
            )
            return KVValueWithMetadata(value=None, metadata=None)
        return KVValueWithMetadata(
            value=value, metadata=None if metadata is None else _load_metadata(metadata)
        )

    async def put(
        self,
        key: str,
        value: str,
        *,
        expiration_ttl: int | None = None,
        expiration: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        encoded = _key_bytes("PUT", key)
        now = self._now()
        expires_at: int | None = None
        if expiration_ttl is not None:
            # workerd takes the option as an integer, truncating a fraction (59.6 is
            # reported as "59"; checked against workerd through Miniflare).
            ttl = math.trunc(expiration_ttl)
            if ttl <= 0:
                raise _fail(
                    "PUT",
                    400,
                    f"Invalid expiration_ttl of {ttl}. Please specify integer greater than 0.",
                )
            if ttl < KV_MIN_EXPIRATION_TTL:
                raise _fail(
                    "PUT",
                    400,
                    f"Invalid expiration_ttl of {ttl}. "
                    f"Expiration TTL must be at least {KV_MIN_EXPIRATION_TTL}.",
                )
            expires_at = now + ttl
        elif expiration is not None:
            at = math.trunc(expiration)
            if at <= now:
                raise _fail(
                    "PUT",
                    400,
                    f"Invalid expiration of {at}. Please specify integer greater "
                    "than the current number of seconds since the UNIX epoch.",
                )
            if at < now + KV_MIN_EXPIRATION_TTL:
                raise _fail(
                    "PUT",
                    400,
                    f"Invalid expiration of {at}. Expiration times must be at "
                    f"least {KV_MIN_EXPIRATION_TTL} seconds in the future.",
                )
            expires_at = at

        metadata_json: str | None = None
        if metadata is not None:
            try:
                # JSON.stringify's compact form: its byte length is what KV measures.
                metadata_json = json.dumps(
                    _as_js_json(metadata),
                    separators=(",", ":"),
                    ensure_ascii=False,
                    allow_nan=False,
                )
            except (TypeError, ValueError) as exc:
                raise TypeError(f"KV metadata must be JSON-serialisable: {exc}") from None
            size = len(metadata_json.encode("utf-8"))
            if size > KV_MAX_METADATA_BYTES:
                raise _fail(
                    "PUT",
                    413,
                    f"Metadata length of {size} exceeds limit of {KV_MAX_METADATA_BYTES}.",
                )

        if not isinstance(value, str):
            raise TypeError("KV values are text: encode JSON or bytes before put()")
        # A str has at most 4 bytes per character, so only long values need encoding.
        if len(value) * 4 > KV_MAX_VALUE_BYTES:
            size = len(value.encode("utf-8"))
            if size > KV_MAX_VALUE_BYTES:
                raise _fail(
                    "PUT", 413, f"Value length of {size} exceeds limit of {KV_MAX_VALUE_BYTES}."
                )

        self._db.execute(
            "INSERT OR REPLACE INTO kv_entries (key, value, expiration, metadata) "
            "VALUES (?, ?, ?, ?)",
            (encoded, value, expires_at, metadata_json),
        )

    async def delete(self, key: str) -> None:
        """Delete a key; deleting a missing key is not an error."""
        encoded = _key_bytes("DELETE", key)
        self._db.execute("DELETE FROM kv_entries WHERE key = ?", (encoded,))

    async def list(
        self, *, prefix: str = "", limit: int = KV_MAX_LIST_LIMIT, cursor: str | None = None
    ) -> KVListResult:
        """List live keys in byte order, starting after `cursor`, at most `limit` of them."""
        if limit > KV_MAX_LIST_LIMIT:
            raise _fail(
                "GET",
                400,
                f"Invalid key_count_limit of {limit}. "
                f"Please specify an integer less than {KV_MAX_LIST_LIMIT}.",
            )
        if limit <= 0:
            limit = KV_MAX_LIST_LIMIT
        prefix_bytes = prefix.encode("utf-8")
        if len(prefix_bytes) > KV_MAX_KEY_BYTES:
            raise _fail(
                "GET",
                414,
                f"UTF-8 encoded length of {len(prefix_bytes)} exceeds key length limit of "
                f"{KV_MAX_KEY_BYTES}.",
            )
        now = self._now()
        clauses = ["(expiration IS NULL OR expiration > ?)"]
        params: list[Any] = [now]
        if prefix_bytes:
            clauses.append("key >= ?")
            params.append(prefix_bytes)
            upper = _prefix_upper_bound(prefix_bytes)
            if upper is not None:
                clauses.append("key < ?")
                params.append(upper)
        if cursor:
            clauses.append("key > ?")
            params.append(_decode_cursor(cursor))
        # One extra row tells whether another page exists.
        params.append(limit + 1)
        rows = self._db.execute(
            "SELECT key, expiration, metadata FROM kv_entries WHERE "
            + " AND ".join(clauses)
            + " ORDER BY key LIMIT ?",
            params,
        ).fetchall()
        # Expired rows are collected here too, like miniflare's list(); the partial index
        # makes this a range delete.
        self._db.execute(
            "DELETE FROM kv_entries WHERE expiration IS NOT NULL AND expiration <= ?", (now,)
        )
        more = len(rows) > limit
        page = rows[:limit]
        keys = [
            KVKey(
                name=bytes(key).decode("utf-8"),
                expiration=expiration,
                metadata=None if metadata is None else _load_metadata(metadata),
            )
            for key, expiration, metadata in page
        ]
        if more:
            return KVListResult(
                keys=keys, list_complete=False, cursor=_encode_cursor(bytes(page[-1][0]))
            )
        return KVListResult(keys=keys, list_complete=True, cursor=None)
