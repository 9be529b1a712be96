"""Issue 26, finding 10 (protocol), over the whole route table (`worker.app.ROUTES`):

* every 405 names the path's methods in `Allow` (RFC 9110 requires it; the router knows
  them) — before, 32 operations answered 405 without it;
* request bodies are typed strictly: a JSON `0` is not `false`, `"5"` is not `5`, `1.0` is
  not an integer — before, `{"dry_run": 0}` ran a real prune. Every boolean and number field
  of every route's body is refused with the wrong JSON type, by name.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from bindings.environment import Bindings
from bindings.ports.clock import FixedClock
from bindings.settings import Settings
from http_messages import ApiError, HttpRequest
from local_runtime.background import LocalBackgroundTasks
from worker.app import ROUTES, handle
from worker.routing import parse_body

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
PATHS = sorted({route.path for route in ROUTES})


def _concrete(path: str) -> str:
    for name in ("tenant", "agent_type", "agent_id", "key", "name", "subject", "tool_name"):
        path = path.replace("{" + name + "}", "acme")
    return path.replace("{", "0").replace("}", "0")  # ids: any well-formed segment


@pytest.mark.parametrize("path", PATHS)
async def test_every_405_names_the_paths_methods_in_allow(path: str) -> None:
    target = _concrete(path)
    # Every route the URL matches (`/api/v1/memory/acme/archive` is also the key "archive").
    declared = sorted({route.method for route in ROUTES if route.regex().fullmatch(target)})
    bindings = Bindings(
        settings=Settings(environment="test"), clock=FixedClock(), background=LocalBackgroundTasks()
    )
    for method in (m for m in METHODS if m not in declared):
        response = await handle(HttpRequest(method, "http://x" + target), bindings)
        assert response.status == 405, (method, path, response.body)
        assert response.json()["error"]["code"] == "method_not_allowed"
        assert response.headers.get("allow") == ", ".join(declared), (method, path)


def _types(prop: dict[str, Any]) -> set[str]:
    found = {prop["type"]} if "type" in prop else set()
    for option in prop.get("anyOf", ()):
        found |= _types(option)
    return found


# Per JSON Schema type: values of another JSON type that lax parsing used to accept.
WRONG = {
    "boolean": [0, 1, "true", "false"],
    "integer": ["5", 5.0, True],
    "number": ["0.5", True],
}
TYPED_FIELDS = sorted(
    {
        (route.method, route.path, name, kind)
        for route in ROUTES
        if (model := route.model(route.body)) is not None
        for name, prop in model.model_json_schema()["properties"].items()
        for kind in _types(prop) & set(WRONG)
    }
)


def test_the_table_has_typed_body_fields_to_check() -> None:
    fields = {(path, name) for _m, path, name, _k in TYPED_FIELDS}
    assert ("/admin/tenants/{tenant}/prune", "dry_run") in fields
    assert ("/api/v1/memory/{agent_id}", "ttl") in fields
    assert len(fields) >= 10


@pytest.mark.parametrize(("method", "path", "name", "kind"), TYPED_FIELDS)
def test_body_fields_refuse_values_of_another_json_type(
    method: str, path: str, name: str, kind: str
) -> None:
    route = next(r for r in ROUTES if (r.method, r.path) == (method, path))
    model = route.model(route.body)
    assert model is not None
    for value in WRONG[kind]:
        request = HttpRequest(method, "http://x/", body=json.dumps({name: value}).encode())
        with pytest.raises(ApiError) as refused:
            parse_body(request, model)
        assert (refused.value.status, refused.value.code) == (422, "validation_error")
        problems = (refused.value.details or {})["problems"]
        assert name in {p["field"] for p in problems}, (value, problems)
