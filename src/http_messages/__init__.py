"""Runtime-neutral HTTP messages, below both the edge (`worker`) and the `gateway`: what every
handler takes and returns (the Worker entry and the local runtime convert their own types
into these), and `ApiError`, the one error type every layer that answers HTTP raises:
`{"error": {"code", "message"[, "details"]}}` with a status; codes are stable identifiers
clients may branch on. Imports nothing of this project.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit


class Headers:
    """Case-insensitive, single-valued header map (enough for our routes)."""

    def __init__(self, items: Iterable[tuple[str, str]] | Mapping[str, str] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: dict[str, tuple[str, str]] = {}
        for name, value in pairs:
            self._items[name.lower()] = (name, value)

    def get(self, name: str, default: str | None = None) -> str | None:
        item = self._items.get(name.lower())
        return item[1] if item else default

    def set(self, name: str, value: str) -> None:
        self._items[name.lower()] = (name, value)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def items(self) -> list[tuple[str, str]]:
        return list(self._items.values())

    def __repr__(self) -> str:
        return f"Headers({self.items()!r})"


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


# Below the values it renders: `errors` imports them from this (partly initialised) module.
from http_messages.errors import ApiError as ApiError  # noqa: E402
