"""A small path router: `{name}` segments, 404 for unknown paths, 405 for wrong methods."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from http_messages import HttpRequest, HttpResponse
from worker.errors import method_not_allowed, not_found

C = TypeVar("C")
Handler = Callable[[HttpRequest, dict[str, str], C], Awaitable[HttpResponse]]

_PARAM = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Route(Generic[C]):
    method: str
    pattern: str
    handler: Handler[C]

    def regex(self) -> re.Pattern[str]:
        # A parameter matches one non-empty path segment.
        body = _PARAM.sub(
            lambda m: f"(?P<{m.group(1)}>[^/]+)",
            re.escape(self.pattern).replace(r"\{", "{").replace(r"\}", "}"),
        )
        return re.compile(f"^{body}$")


class Router(Generic[C]):
    def __init__(self) -> None:
        self._routes: list[tuple[re.Pattern[str], Route[C]]] = []

    def add(self, method: str, pattern: str, handler: Handler[C]) -> None:
        route = Route(method.upper(), pattern, handler)
        self._routes.append((route.regex(), route))

    def resolve(self, method: str, path: str) -> tuple[Handler[C], dict[str, str]]:
        """Return the handler and path parameters, or raise 404/405 `ApiError`s."""
        allowed: list[str] = []
        for regex, route in self._routes:
            match = regex.match(path)
            if match is None:
                continue
            if route.method == method.upper():
                return route.handler, match.groupdict()
            allowed.append(route.method)
        if allowed:
            raise method_not_allowed(sorted(set(allowed)))
        raise not_found(f"no route for {path}")
