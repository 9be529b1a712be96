"""The OpenAPI 3.1 document (`GET /openapi.json`), generated from the route table: each operation
is one `Route` (the models the router validates with, its auth); every error is the `Error`
schema. tests/hardening/test_openapi.py fuzzes the local server against it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel

from worker.routing import MAX_PARAM_CHARS, PATH_PARAMS, Route

Mode = Literal["validation", "serialization"]
API_VERSION = "0.1.0"
SCHEDULED_PATHS = ("/cdn-cgi/handler/scheduled", "/cdn-cgi/local/scheduled")
ERROR = {"$ref": "#/components/schemas/Error"}
ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "description": "Stable identifier clients may use"},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        }
    },
}


class _Schemas:
    """Collects component schemas from pydantic models (refs into #/components/schemas)."""

    def __init__(self) -> None:
        self.components: dict[str, Any] = {"Error": ERROR_SCHEMA}

    def schema(self, model: type[BaseModel], mode: Mode) -> Any:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode=mode)
        for name, definition in schema.pop("$defs", {}).items():
            self.components.setdefault(name, definition)
        return schema

    def ref(self, model: type[BaseModel], mode: Mode) -> Any:
        self.components.setdefault(model.__name__, self.schema(model, mode))
        return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(schema: Any, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _path_parameter(name: str) -> dict[str, Any]:
    param = PATH_PARAMS[name]
    schema: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_PARAM_CHARS}
    if param.pattern:
        schema["pattern"] = param.pattern
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": param.description,
        "schema": schema,
    }


def _operation(route: Route, schemas: _Schemas) -> dict[str, Any]:
    words = re.sub(r"[^a-z0-9]+", "_", route.path.lower()).strip("_")
    operation: dict[str, Any] = {
        "operationId": f"{route.method.lower()}_{words}",
        "summary": route.summary,
        "tags": [route.tag],
    }
    parameters = [_path_parameter(name) for name in re.findall(r"\{([a-z_]+)\}", route.path)]
    query = route.model(route.query)
    if query is not None:
        schema = schemas.schema(query, "validation")
        required = set(schema.get("required", ()))
        parameters.extend(
            {"name": name, "in": "query", "required": name in required, "schema": prop}
            for name, prop in schema.get("properties", {}).items()
        )
    if parameters:
        operation["parameters"] = parameters
    body = route.model(route.body)
    if body is not None:
        operation["requestBody"] = {
            "required": route.body_required,
            "content": {"application/json": {"schema": schemas.ref(body, "validation")}},
        }
    elif route.response is None and route.method == "POST":
        operation["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    response = route.model(route.response)
    if response is None:
        answer = {"description": "No fixed shape", "content": {"*/*": {"schema": {}}}}
        operation["responses"] = {"default": answer}
    else:
        operation["responses"] = {
            str(route.status): _json(schemas.ref(response, "serialization"), "Success"),
            "default": _json(ERROR, "A JSON error"),
        }
    if route.auth.scheme:
        operation["security"] = [{route.auth.scheme: []}]
    return operation


def _scheduled(path: str) -> dict[str, Any]:
    """The local dev server's `GET /cdn-cgi/.../scheduled?cron=&time=` (`wrangler dev`'s)."""
    return {
        "operationId": "scheduled" + path.replace("/", "_").replace("-", "_"),
        "summary": "Run the scheduled handler now (local dev server only)",
        "tags": ["local"],
        # A platform admin's Access token, in the header only (local_runtime.server).
        "security": [{"cloudflareAccess": []}],
        "parameters": [
            {"name": "cron", "in": "query", "required": True, "schema": {"type": "string"}},
            {
                "name": "time",
                "in": "query",
                "required": False,
                "description": "Epoch milliseconds",
                "schema": {"type": "string"},
            },
        ],
        "responses": {
            "200": _json({"type": "object"}, "The job's report"),
            "default": _json(ERROR, "A JSON error"),
        },
    }


def build_document(routes: Sequence[Route], *, local: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document of `routes`; `local=True` adds the dev server's scheduled
    endpoints."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, schemas)
    if local:
        for path in SCHEDULED_PATHS:
            paths[path] = {"get": _scheduled(path)}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "agent-memory Worker",
            "version": API_VERSION,
            "description": "Tool gateway and agent runtime with tiered memory. Errors are "
            '`{"error": {"code", "message"}}` with stable codes; input limits are in '
            "docs/architecture.md.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas.components,
            "securitySchemes": {r.auth.scheme: r.auth.spec for r in routes if r.auth.scheme},
        },
    }


_BUILT: dict[bool, tuple[Sequence[Route], dict[str, Any]]] = {}


def document(routes: Sequence[Route], *, local: bool = False) -> dict[str, Any]:
    """`build_document`, built once per isolate and route table (the models do not change
    at runtime)."""
    built = _BUILT.get(local)
    if built is None or built[0] is not routes:
        built = _BUILT[local] = (routes, build_document(routes, local=local))
    return built[1]
