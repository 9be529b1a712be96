"""Runtime-neutral HTTP messages below `worker` and `gateway`, and `CodedError` / `ApiError`
(`{"error": {"code", "message"[, "details"]}}` with a stable code) with the edge's own refusals
(404, 405, 413, 422, 500). Imports nothing of this project.

`loads_bounded` is where a request body becomes Python values: deep nesting, huge integers and
huge strings are refused with a `JsonLimitError` code instead of crashing or stalling; so are lone
surrogates (no UTF-8 store takes them) and, with `allow_nul=False`, U+0000 (SQLite's `length()`
stops at a NUL, which would break the memory tables' `CHECK`s after the ack).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qsl, urlsplit


class Headers:
    """Case-insensitive, single-valued header map (enough for our routes)."""

    def __init__(self, items: Iterable[tuple[str, str]] | Mapping[str, str] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items = {name.lower(): (name, value) for name, value in pairs}

    def get(self, name: str, default: str | None = None) -> str | None:
        item = self._items.get(name.lower())
        return item[1] if item else default

    def set(self, name: str, value: str) -> None:
        self._items[name.lower()] = (name, value)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def items(self) -> list[tuple[str, str]]:
        return list(self._items.values())


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: Headers = field(default_factory=Headers)
    body: bytes = b""

    @property
    def path(self) -> str:
        return urlsplit(self.url).path or "/"

    @property
    def query(self) -> dict[str, str]:
        """Query parameters; a repeated name keeps its last value."""
        return dict(parse_qsl(urlsplit(self.url).query, keep_blank_values=True))


@dataclass
class HttpResponse:
    status: int = 200
    body: bytes = b""
    headers: Headers = field(default_factory=Headers)

    def json(self) -> Any:
        """Decode the body as JSON (used by tests and clients)."""
        return json.loads(self.body)


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> HttpResponse:
    out = Headers(headers or {})
    out.set("content-type", "application/json")
    body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    return HttpResponse(status=status, body=body, headers=out)


def empty_response(status: int = 204, headers: Mapping[str, str] | None = None) -> HttpResponse:
    return HttpResponse(status=status, body=b"", headers=Headers(headers or {}))


# On every response, so no other site frames it, no browser sniffs JSON into HTML and no URL
# (which can carry a subject) leaks as a referrer (issue 26); the inspector's files get
# theirs from `public/_headers`.
SECURITY_HEADERS: dict[str, str] = {
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
}

# Paths whose answers hold tenants' memory or operators' data: never stored by a cache.
PRIVATE_PREFIXES = ("/admin/", "/v1/agents/", "/api/v1/memory/")


def secure_response(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """`response` with `SECURITY_HEADERS` (a handler's own value wins: the OAuth pages set a
    CSP of their own) and, on a `PRIVATE_PREFIXES` path, `Cache-Control: no-store`."""
    for name, value in SECURITY_HEADERS.items():
        if name not in response.headers:
            response.headers.set(name, value)
    if request.path.startswith(PRIVATE_PREFIXES):
        response.headers.set("cache-control", "no-store")
    return response


class CodedError(Exception):
    """An error a client caused or should see: its HTTP `status`, a stable `code` and optional
    `details`, answered as `{"error": {"code", "message"[, "details"]}}` (`to_response`). The
    core's errors set them as class attributes, `ApiError` per instance; the edge turns every
    one into its answer in one place (`worker.routing.Router`)."""

    status = 500
    code = "internal_error"
    details: dict[str, Any] | None = None
    headers: Mapping[str, str] = MappingProxyType({})

    def to_response(self, headers: Mapping[str, str] | None = None) -> HttpResponse:
        """The JSON error response (`body`), with this error's headers and `headers` added."""
        headers = {**(headers or {}), **self.headers}
        return json_response(self.body(), status=self.status, headers=headers)

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": str(self)}
        return {"error": error | ({"details": self.details} if self.details else {})}


class ApiError(CodedError):
    """A `CodedError` whose status and code are given where it is raised."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers: dict[str, str] = dict(headers or {})


def method_not_allowed(allowed: list[str]) -> ApiError:
    """405 with the `Allow` header RFC 9110 requires, naming the path's methods."""
    return ApiError(
        405,
        "method_not_allowed",
        f"method not allowed; use {', '.join(allowed)}",
        {"allowed": allowed},
        headers={"allow": ", ".join(allowed)},
    )


def payload_too_large(limit: int) -> ApiError:
    return ApiError(413, "payload_too_large", f"request body exceeds {limit} bytes")


def validation_error(message: str, details: dict[str, Any] | None = None) -> ApiError:
    return ApiError(422, "validation_error", message, details)


def internal_error() -> ApiError:
    return ApiError(500, "internal_error", "internal error; the request changed nothing")


# Deep enough for any body our routes accept, far below Python's recursion limit.
MAX_DEPTH = 64
# A 64-bit integer has 20 digits; 64 leaves room for big identifiers sent as numbers, far
# below Python's 4300-digit conversion limit.
MAX_INT_DIGITS = 64

# The largest integer storage takes (checked before any SQL bind): on Workers a Python int
# beyond +-2^53 crosses into JavaScript as a BigInt, which D1 refuses ("Type 'bigint' not
# supported") and DO SQL cannot bind (local_runtime/adapters/jsnumbers.py).
MAX_STORED_INT = 2**53 - 1
# The latest instant a time filter, cursor or expiry may name: the end of year 9999 UTC.
MAX_EPOCH_SECONDS = 253_402_300_799
MAX_EPOCH_MS = MAX_EPOCH_SECONDS * 1000 + 999
# Admin and memory bodies: no single string needs more.
MAX_STRING_CHARS = 65_536


class JsonLimitError(ValueError):
    """The body is valid JSON (or not) but breaks a limit; `code` is stable for clients."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def status(self) -> int:
        """The HTTP status for this refusal: 400 not JSON, 422 a bad character, else 413."""
        return {"invalid_json": 400, "invalid_character": 422}.get(self.code, 413)


@dataclass(frozen=True)
class JsonLimits:
    """Limits one decode enforces beyond `MAX_DEPTH` and `MAX_INT_DIGITS`, which hold for
    every decode. `max_string_chars` applies to keys and values alike."""

    max_string_chars: int = MAX_STRING_CHARS
    allow_nul: bool = True


# Bodies whose strings end up in D1 text columns: no NUL (see the module docstring).
STORAGE_LIMITS = JsonLimits(allow_nul=False)


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise JsonLimitError(
            "number_too_large",
            f"an integer has {digits} digits; at most {MAX_INT_DIGITS} are accepted",
        )
    return int(text)


def _parse_float(text: str) -> float:
    # float() is linear in its input, but a 100 KB mantissa is still not a number anyone sends.
    if len(text) > MAX_INT_DIGITS * 2:
        raise JsonLimitError(
            "number_too_large", f"a number has {len(text)} characters; at most {MAX_INT_DIGITS * 2}"
        )
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise JsonLimitError("number_too_large", "a number overflows a 64-bit float")
    return value


def _refuse_constant(name: str) -> Any:
    # Python accepts NaN and Infinity; JSON (RFC 8259) does not, and neither do we.
    raise JsonLimitError("invalid_json", f"{name} is not valid JSON")


def check_value(value: Any, limits: JsonLimits) -> None:
    """Check a decoded value's nesting depth and every key and string (iteratively); raises
    `JsonLimitError`."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > MAX_DEPTH:
                raise _too_deep()
            children = item.values() if isinstance(item, dict) else item
            if isinstance(item, dict):
                for key in item:
                    _check_string(key, limits)
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, str):
            _check_string(item, limits)


def _too_deep() -> JsonLimitError:
    return JsonLimitError("json_too_deep", f"the JSON nests deeper than {MAX_DEPTH} levels")


def _check_string(text: str, limits: JsonLimits) -> None:
    if len(text) > limits.max_string_chars:
        raise JsonLimitError(
            "string_too_long",
            f"a string has {len(text)} characters; at most {limits.max_string_chars}",
        )
    if not limits.allow_nul and "\x00" in text:
        raise JsonLimitError("invalid_character", "strings must not contain U+0000 (NUL)")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # JSON can spell a lone UTF-16 surrogate ("\ud800") that no UTF-8 store or
            # upstream can take: refused here rather than failing later, after the ack.
            raise JsonLimitError(
                "invalid_character", "strings must not contain lone UTF-16 surrogates"
            ) from None


def loads_bounded(data: bytes | str, limits: JsonLimits = JsonLimits()) -> Any:
    """Decode JSON under `limits`: `JsonLimitError` (`json_too_deep`, `number_too_large`,
    `string_too_long`, `invalid_character`, `invalid_json`) for a limit, another `ValueError`
    for text that is not JSON or UTF-8; never `RecursionError`."""
    text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
    try:
        value = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_refuse_constant,
        )
    except RecursionError:
        # The C decoder guards its recursion with the interpreter's limit (~1000 levels),
        # so a hostile nesting fails fast here; shallower excess is caught by the walk.
        raise _too_deep() from None
    check_value(value, limits)
    return value
