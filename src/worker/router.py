"""A small path router: `{name}` segments, 404 for unknown paths, 405 for wrong methods.

The router is the one place path parameters are decoded and checked, before any handler
runs (docs/architecture.md "Input limits"): routes match the raw, percent-encoded path
(so an encoded `/` stays inside its segment), then each parameter is percent-decoded
exactly once as UTF-8 and refused with 422 `invalid_path` when it is empty, longer than
`MAX_PARAM_CHARS`, contains a control character, or does not fully match the rule its
name has in `PARAM_RULES`. Handlers receive decoded, checked values and never decode again.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import unquote

from agent_memory.scope import TENANT_PATTERN
from http_messages import HttpRequest, HttpResponse
from worker.errors import ApiError, method_not_allowed, not_found

C = TypeVar("C")
Handler = Callable[[HttpRequest, dict[str, str], C], Awaitable[HttpResponse]]

_PARAM = re.compile(r"\{([a-z_]+)\}")

# No parameter of ours is longer: subjects are capped at 256 characters, ids far below.
MAX_PARAM_CHARS = 256

# Full-match rules by parameter name. `None` means only the generic checks apply (the
# handler gives a specific answer, e.g. 404 `run_not_found`, for a well-formed unknown id).
PARAM_RULES: dict[str, re.Pattern[str] | None] = {
    "tenant": re.compile(TENANT_PATTERN),
    "agent_type": None,
    "run_id": None,
    "fact_id": None,
    "episode_id": None,
    "subject": None,
    "tool_name": None,
}


def invalid_path(name: str, problem: str) -> ApiError:
    return ApiError(422, "invalid_path", f"path parameter {name!r} {problem}", {"param": name})


def decode_param(name: str, raw: str) -> str:
    """Percent-decode one raw path segment once and check it; raises 422 `invalid_path`."""
    try:
        value = unquote(raw, errors="strict")
    except UnicodeDecodeError:
        raise invalid_path(name, "is not valid percent-encoded UTF-8") from None
    if not value:
        raise invalid_path(name, "is empty")
    if len(value) > MAX_PARAM_CHARS:
        raise invalid_path(name, f"is longer than {MAX_PARAM_CHARS} characters")
    # Category Cc: C0 controls (NUL, tab, CR, LF...), DEL and the C1 controls.
    if any(unicodedata.category(char) == "Cc" for char in value):
        raise invalid_path(name, "contains a control character")
    rule = PARAM_RULES.get(name)
    if rule is not None and rule.fullmatch(value) is None:
        raise invalid_path(name, f"does not match {rule.pattern}")
    return value


class LazyHandler(Generic[C]):
    """A route handler named `"package.module:attribute"`, imported on its first call.

    The start-up rule (docs/pyodide.md "Start-up"): what the deploy snapshots is only what
    every request may need; a route only some requests take names its handler here, so its
    module (and everything that module imports) loads on the first request to that route
    and is cached for the isolate's life. Nothing else is deferred implicitly.
    """

    def __init__(self, target: str) -> None:
        module, _, attribute = target.partition(":")
        if not module or not attribute:
            raise ValueError(f"a lazy handler is 'module:attribute', got {target!r}")
        self.target = target
        self._module = module
        self._attribute = attribute
        self._handler: Handler[C] | None = None

    def resolve(self) -> Handler[C]:
        """Import the handler's module (once) and return the handler."""
        if self._handler is None:
            handler: Handler[C] = getattr(importlib.import_module(self._module), self._attribute)
            self._handler = handler
        return self._handler

    async def __call__(
        self, request: HttpRequest, params: dict[str, str], context: C
    ) -> HttpResponse:
        return await self.resolve()(request, params, context)

    def __repr__(self) -> str:
        return f"LazyHandler({self.target!r})"


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
        """Return the handler and its decoded, checked path parameters.

        `path` is the raw (percent-encoded) request path. Raises `ApiError`: 404 for no
        route, 405 for a wrong method, 422 `invalid_path` for a bad parameter.
        """
        allowed: list[str] = []
        for regex, route in self._routes:
            match = regex.match(path)
            if match is None:
                continue
            if route.method == method.upper():
                params = {name: decode_param(name, raw) for name, raw in match.groupdict().items()}
                return route.handler, params
            allowed.append(route.method)
        if allowed:
            raise method_not_allowed(sorted(set(allowed)))
        raise not_found(f"no route for {path}")
