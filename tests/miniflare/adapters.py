"""Test-only adapters: the KV, D1 and DO-SQL ports over real workerd bindings (Miniflare).

`tests/miniflare/harness.mjs` runs `tests/miniflare/worker.js` in workerd; these classes
implement `bindings.ports.kv.KVNamespace`, `bindings.ports.d1.D1Database` and
`bindings.ports.do_sql.DurableObjectStorage` by calling it over loopback HTTP with httpx.
They model what Python code sees on Cloudflare through the Python Workers SDK, and add
no rules of their own: every limit, error text and value comes from workerd.

What crosses the boundary, and how it is made faithful:

* **Python -> JS arguments** follow Pyodide's implicit conversion (pyodide
  `docs/usage/type-conversions.md`, "Python to JavaScript"): an `int` within +-2^53 becomes
  a Number and a larger one a BigInt; `float` a Number (NaN/inf included); `bool` a
  Boolean; `None` `null` (the SDK wrapper's rule); `bytes`/`memoryview` a Uint8Array.
  Anything else is refused with TypeError, as the SDK refuses what it cannot convert.
* **JS -> Python results** follow Pyodide's rule the other way: a JS number becomes an
  `int` when it is integral and within +-2^53, else a `float`. The harness sends numbers
  exactly as JavaScript prints them, and `_loads` applies that rule to every number in the
  answer (so D1's `1.0` arrives as `1`, and DO SQL's int64 arrives rounded to a double).
  An ArrayBuffer arrives as `memoryview` (Pyodide's `to_py`); D1 gives BLOBs as JS arrays
  of byte values, so they arrive as `list[int]`.
* **Errors**: the JS error's message is kept verbatim and raised as the port's exception:
  `D1Error` for D1 (with `BindingLimitError` mixed in for SQLite limit errors),
  `BindingLimitError` for KV rule violations (`KV PUT failed: 4xx ...`, key-name
  TypeErrors), `BindingError` for DO SQL (with `BindingLimitError` for limit errors).

`MiniflareDurableObjectStorage.transaction_sync(fn)` cannot run Python inside JS's
synchronous `transactionSync`, so it replays: every statement `fn` executes is run, with
all the statements before it, inside a `transactionSync` that the harness rolls back (a
probe), so `fn` sees exactly the state it would see in the transaction. When `fn` returns,
the whole log runs once more and commits; when it raises, nothing was ever committed. A
replay whose outcome differs from what `fn` saw (non-deterministic SQL) raises rather
than commit something else. Nested calls roll back only their own statements, like
workerd's nested transactions (savepoints).
"""

from __future__ import annotations

import base64
import inspect
import json
import math
import re
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from bindings.ports.d1 import D1Error, D1Meta, D1Result
from bindings.ports.errors import BindingError, BindingLimitError
from bindings.ports.kv import (
    KV_MAX_LIST_LIMIT,
    KVKey,
    KVListResult,
    KVValueWithMetadata,
)
from bindings.ports.sql import Row, SqlValue
from local_runtime.adapters.do_sql import BufferedSqlCursor

T = TypeVar("T")

# Pyodide's int <-> Number boundary, inclusive on both sides.
PYODIDE_INT_LIMIT = 2**53

# SQLite limit errors as workerd reports them (workerd caps these limits in
# SqliteDatabase::setupSecurity; the text is SQLite's own plus the result code).
_SQL_LIMIT_ERRORS = re.compile(
    r"too many SQL variables|SQLITE_TOOBIG|string or blob too big|too many columns"
    r"|LIKE or GLOB pattern too complex|too many terms in compound SELECT"
    r"|Expression tree is too large|too many arguments on function",
)
_KV_HTTP_ERROR = re.compile(r"^KV \w+ failed: (\d{3})\b")


class HarnessError(RuntimeError):
    """The harness itself failed (not a binding error): a bug in the test machinery."""


# --- value conversion ----------------------------------------------------------------------


def _js_number(value: float) -> int | float:
    """The Python value Pyodide produces for the JS number `value`."""
    if value.is_integer() and -PYODIDE_INT_LIMIT <= value <= PYODIDE_INT_LIMIT:
        return int(value)
    return value


def _parse_int(text: str) -> int | float:
    # JSON.stringify prints an integral double below 1e21 without a fraction or exponent.
    value = int(text)
    if -PYODIDE_INT_LIMIT <= value <= PYODIDE_INT_LIMIT:
        return value
    return float(value)


def _parse_float(text: str) -> int | float:
    return _js_number(float(text))


def _loads(text: str) -> Any:
    """Parse a harness answer, converting numbers the way Pyodide converts JS numbers."""
    return json.loads(text, parse_int=_parse_int, parse_float=_parse_float)


def encode_argument(value: Any) -> Any:
    """A Python SQL argument -> the JSON the harness turns into the JS value Pyodide sends."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if -PYODIDE_INT_LIMIT <= value <= PYODIDE_INT_LIMIT:
            return value
        return {"$bigint": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"$number": "NaN" if math.isnan(value) else f"{'' if value > 0 else '-'}Infinity"}
    if isinstance(value, bytes | memoryview):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, list):
        return [encode_argument(item) for item in value]
    if isinstance(value, dict):
        # The SDK sends a dict as a plain JS object; the binding decides what to do with it.
        return {"$object": {str(k): encode_argument(v) for k, v in value.items()}}
    # tuples and bytearrays are refused by the SDK, custom objects by structured clone.
    raise TypeError(f"{type(value).__name__} cannot be passed to a binding")


def _js_object(value: Any) -> Any:
    """A JSON-like Python value -> JSON for the harness, tagging what JSON cannot carry."""
    if isinstance(value, dict):
        return {str(k): _js_object(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_js_object(item) for item in value]
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int | float):
        return encode_argument(value)
    raise TypeError(f"{type(value).__name__} cannot be passed to a binding")


def decode_cell(value: Any) -> Any:
    """A SQL result cell from the harness -> the Python value Pyodide produces."""
    if isinstance(value, dict):
        if "$bytes" in value:
            return memoryview(base64.b64decode(value["$bytes"]))
        if "$number" in value:
            return float(value["$number"])
        if "$bigint" in value:
            return int(value["$bigint"])
    if isinstance(value, list):
        return [decode_cell(item) for item in value]
    return value


def _decode_row(row: dict[str, Any]) -> Row:
    return {name: decode_cell(cell) for name, cell in row.items()}


# --- the harness connection ------------------------------------------------------------------


@dataclass
class MiniflareHarness:
    """A running harness: its base URL and a shared synchronous client (thread-safe)."""

    base_url: str
    client: httpx.Client = field(init=False)
    # The harness speaks plain HTTP on loopback, but httpx builds a TLS context for every
    # client all the same (loading the CA bundle: ~45 ms); the clients share this one.
    tls: ssl.SSLContext = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tls = ssl.create_default_context()
        self.client = httpx.Client(base_url=self.base_url, timeout=60.0, verify=self.tls)

    def close(self) -> None:
        self.client.close()

    def async_client(self) -> httpx.AsyncClient:
        """A new async client; one per event loop (pytest-asyncio gives each test its own)."""
        return httpx.AsyncClient(base_url=self.base_url, timeout=60.0, verify=self.tls)

    def call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to `path` synchronously; returns {"ok": ...} or {"error": ...}."""
        return _answer(self.client.post(path, content=json.dumps(body, allow_nan=False)))

    async def acall(
        self, client: httpx.AsyncClient, path: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        return _answer(await client.post(path, content=json.dumps(body, allow_nan=False)))

    def reset_d1(self) -> None:
        """Drop every table and view of the D1 database (test isolation)."""
        _ok(self.call("/d1", {"op": "reset"}), HarnessError)

    def clear_kv(self) -> None:
        """Delete every key of the KV namespace (test isolation)."""
        _ok(self.call("/kv", {"op": "clear"}), HarnessError)


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 200:
        raise HarnessError(f"harness answered {response.status_code}: {response.text[:500]}")
    answer = _loads(response.text)
    if not isinstance(answer, dict) or not ({"ok", "error"} & answer.keys()):
        raise HarnessError(f"unexpected harness answer: {response.text[:500]}")
    return answer


def _ok(answer: dict[str, Any], error: Callable[[str], Exception]) -> Any:
    if "error" in answer:
        raise error(str(answer["error"].get("message", answer["error"])))
    return answer["ok"]


# --- KV --------------------------------------------------------------------------------------


def _kv_error(message: str, name: str = "Error") -> Exception:
    # workerd reports a broken KV rule either as "KV <METHOD> failed: <4xx> ..." (the
    # upstream's HTTP status) or, for key names, as a TypeError thrown before the request.
    status = _KV_HTTP_ERROR.match(message)
    if status is not None and 400 <= int(status.group(1)) < 500:
        return BindingLimitError(message)
    if name == "TypeError":
        if "key name" in message.lower():
            return BindingLimitError(message)
        return TypeError(message)  # e.g. metadata JSON.stringify cannot serialise
    return BindingError(message)


class MiniflareKV:
    """`KVNamespace` over workerd's KV (Miniflare's in-memory store, real clock)."""

    def __init__(self, harness: MiniflareHarness, client: httpx.AsyncClient) -> None:
        self._harness = harness
        self._client = client

    async def _call(self, body: dict[str, Any]) -> Any:
        answer = await self._harness.acall(self._client, "/kv", body)
        if "error" in answer:
            raise _kv_error(answer["error"]["message"], answer["error"].get("name", "Error"))
        return answer["ok"]

    async def get(self, key: str) -> str | None:
        value = await self._call({"op": "get", "key": key})
        return None if value is None else str(value)

    async def get_with_metadata(self, key: str) -> KVValueWithMetadata:
        result = await self._call({"op": "getWithMetadata", "key": key})
        return KVValueWithMetadata(value=result.get("value"), metadata=result.get("metadata"))

    async def put(
        self,
        key: str,
        value: str,
        *,
        expiration_ttl: int | None = None,
        expiration: int | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(value, str):
            raise TypeError("KV values are text: encode JSON or bytes before put()")
        # Options that are None are left out, as the Cloudflare adapter does (null is not
        # the same as absent for expirationTtl).
        options = {
            name: option
            for name, option in (
                ("expirationTtl", expiration_ttl),
                ("expiration", expiration),
                ("metadata", metadata),
            )
            if option is not None
        }
        if metadata is not None:
            # The SDK converts the dict to a JS object (ints beyond 2^53 become BigInts,
            # which KV's JSON.stringify then refuses); workerd sees exactly that.
            options["metadata"] = _js_object(metadata)
        await self._call({"op": "put", "key": key, "value": value, "options": options})

    async def delete(self, key: str) -> None:
        await self._call({"op": "delete", "key": key})

    async def list(
        self, *, prefix: str = "", limit: int = KV_MAX_LIST_LIMIT, cursor: str | None = None
    ) -> KVListResult:
        options: dict[str, Any] = {"limit": limit}
        if prefix:
            options["prefix"] = prefix
        if cursor:
            options["cursor"] = cursor
        page = await self._call({"op": "list", "options": options})
        complete = bool(page.get("list_complete", True))
        return KVListResult(
            keys=[
                KVKey(
                    name=item["name"],
                    expiration=item.get("expiration"),
                    metadata=item.get("metadata"),
                )
                for item in page.get("keys", [])
            ],
            list_complete=complete,
            cursor=None if complete else page.get("cursor"),
        )


# --- D1 --------------------------------------------------------------------------------------


class MiniflareD1LimitError(D1Error, BindingLimitError):
    """D1 refused a statement for breaking a limit (bound parameters, SQL length...)."""


def _d1_error(message: str) -> D1Error:
    if _SQL_LIMIT_ERRORS.search(message):
        return MiniflareD1LimitError(message)
    return D1Error(message)


def _d1_result(data: dict[str, Any]) -> D1Result:
    meta = data.get("meta") or {}
    return D1Result(
        meta=D1Meta(changes=meta.get("changes") or 0, size_after=meta.get("size_after") or 0),
        results=[_decode_row(row) for row in data.get("results") or []],
    )


class MiniflareD1Statement:
    """`D1Statement`: SQL and arguments held here, executed by workerd's D1 binding."""

    def __init__(self, db: MiniflareD1, sql: str, params: list[Any] | None = None) -> None:
        self._db = db
        self.sql = sql
        self.params: list[Any] = params or []

    def bind(self, *params: SqlValue | bool) -> MiniflareD1Statement:
        """Bind arguments; workerd checks their types now, as `bind()` does on Workers."""
        encoded = [encode_argument(param) for param in params]
        # bind() is synchronous on Workers and throws D1_TYPE_ERROR there; ask workerd now.
        answer = self._db.harness.call("/d1", {"op": "bind", "sql": self.sql, "params": encoded})
        _ok(answer, _d1_error)
        return MiniflareD1Statement(self._db, self.sql, encoded)

    def _body(self, op: str, **extra: Any) -> dict[str, Any]:
        return {"op": op, "sql": self.sql, "params": self.params, **extra}

    async def all(self) -> D1Result:
        return _d1_result(await self._db.request(self._body("all")))

    async def run(self) -> D1Result:
        return _d1_result(await self._db.request(self._body("run")))

    async def first(self) -> Row | None:
        row = await self._db.request(self._body("first"))
        return None if row is None else _decode_row(row)

    async def first_value(self, column: str) -> Any:
        return decode_cell(await self._db.request(self._body("first", column=column)))


class MiniflareD1:
    """`D1Database` over workerd's D1 binding (Miniflare's D1 runs on workerd's SQLite)."""

    def __init__(self, harness: MiniflareHarness, client: httpx.AsyncClient) -> None:
        self.harness = harness
        self._client = client

    async def request(self, body: dict[str, Any]) -> Any:
        return _ok(await self.harness.acall(self._client, "/d1", body), _d1_error)

    def prepare(self, sql: str) -> MiniflareD1Statement:
        return MiniflareD1Statement(self, sql)

    async def batch(self, statements: Sequence[Any]) -> list[D1Result]:
        for statement in statements:
            if not isinstance(statement, MiniflareD1Statement):
                raise TypeError("batch() takes statements prepared by this database")
        results = await self.request(
            {"op": "batch", "statements": [{"sql": s.sql, "params": s.params} for s in statements]}
        )
        return [_d1_result(result) for result in results]


# --- Durable Object SQL ----------------------------------------------------------------------


class MiniflareSqlError(BindingError):
    """workerd's SqlStorage refused or failed a statement (its message kept verbatim)."""


class MiniflareSqlLimitError(MiniflareSqlError, BindingLimitError):
    """A statement broke one of the limits workerd sets on DO SQLite."""


def _sql_error(message: str) -> MiniflareSqlError:
    if _SQL_LIMIT_ERRORS.search(message):
        return MiniflareSqlLimitError(message)
    return MiniflareSqlError(message)


class MiniflareSqlCursor(BufferedSqlCursor):
    """`SqlCursor` over a statement's complete result (workerd's cursor, read eagerly)."""

    error_type = MiniflareSqlError

    def __init__(self, result: dict[str, Any]) -> None:
        super().__init__(
            list(result["columnNames"]),
            [[decode_cell(c) for c in row] for row in result["rows"]],
            int(result["rowsWritten"]),
        )


@dataclass
class _LoggedStatement:
    sql: str
    params: list[Any]
    outcome: dict[str, Any]
    may_fail: bool = False

    def wire(self) -> dict[str, Any]:
        return {"sql": self.sql, "params": self.params, "mayFail": self.may_fail}


class MiniflareSqlStorage:
    """`SqlStorage` of one named SqlObject in the harness."""

    def __init__(self, owner: MiniflareDurableObjectStorage) -> None:
        self._owner = owner

    def exec(self, sql: str, *params: SqlValue) -> MiniflareSqlCursor:
        encoded = [encode_argument(param) for param in params]
        return self._owner.execute(sql, encoded)


class MiniflareDurableObjectStorage:
    """`DurableObjectStorage` of the SQLite-backed Durable Object named `name`."""

    def __init__(self, harness: MiniflareHarness, name: str) -> None:
        self._harness = harness
        self.name = name
        self._sql = MiniflareSqlStorage(self)
        # The statements of the open transaction_sync (None outside one).
        self._log: list[_LoggedStatement] | None = None

    @property
    def sql(self) -> MiniflareSqlStorage:
        return self._sql

    def _call(self, body: dict[str, Any]) -> dict[str, Any]:
        return self._harness.call("/do", {"name": self.name, **body})

    def execute(self, sql: str, params: list[Any]) -> MiniflareSqlCursor:
        if self._log is None:
            result = _ok(self._call({"op": "exec", "sql": sql, "params": params}), _sql_error)
            return MiniflareSqlCursor(result)
        statement = _LoggedStatement(sql=sql, params=params, outcome={})
        self._log.append(statement)
        outcome = self._replay(commit=False)[-1]
        statement.outcome = outcome
        if "error" in outcome:
            # fn may catch this and go on, as in JS: the statement then had no effect.
            statement.may_fail = True
            raise _sql_error(outcome["error"]["message"])
        return MiniflareSqlCursor(outcome["ok"])

    def _replay(self, *, commit: bool) -> list[dict[str, Any]]:
        """Run the log in one transactionSync; commit it, or (a probe) roll it back.

        In a probe the newest statement may fail without aborting, so its error can be
        handed to fn; every earlier statement must do exactly what fn already saw.
        """
        assert self._log is not None
        statements = [statement.wire() for statement in self._log]
        if not commit:
            statements[-1]["mayFail"] = True
        result = _ok(
            self._call({"op": "transaction", "commit": commit, "statements": statements}),
            HarnessError,
        )
        outcomes: list[dict[str, Any]] = result["outcomes"]
        settled = self._log if commit else self._log[:-1]
        for statement, outcome in zip(settled, outcomes, strict=False):
            if outcome != statement.outcome:
                raise HarnessError(
                    "transaction_sync replay diverged (non-deterministic SQL?): "
                    f"{statement.sql!r} gave {outcome}, first {statement.outcome}"
                )
        if "error" in result or len(outcomes) != len(self._log):
            raise HarnessError(f"transaction_sync replay failed: {result.get('error')}")
        return outcomes

    def transaction_sync(self, fn: Callable[[], T]) -> T:
        """Run `fn` atomically: if it raises, every write it made is rolled back."""
        if inspect.iscoroutinefunction(fn):
            raise TypeError("transaction_sync() needs a synchronous function")
        outermost = self._log is None
        if outermost:
            self._log = []
        assert self._log is not None
        mark = len(self._log)
        try:
            result = fn()
            if inspect.iscoroutine(result):
                result.close()
                raise TypeError("transaction_sync() needs a synchronous function")
        except BaseException:
            # A nested transaction rolls back its own statements only (a savepoint).
            del self._log[mark:]
            if outermost:
                self._log = None
            raise
        if outermost:
            try:
                if self._log:
                    self._replay(commit=True)
            finally:
                self._log = None
        return result
