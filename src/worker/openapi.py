"""The OpenAPI 3.1 document of every route, generated from the pydantic models.

`GET /openapi.json` serves it. Request bodies and query parameters are the models the
handlers validate with (`RunBody`, `LifecycleUpdate`, ...), responses the models they
answer with (`RunResult`, `RunPage`, `EraseReport`, ...), and every error the one shape of
`worker.errors` (`{"error": {"code", "message", "details"?}}`). One entry per route lives
in `worker.api_operations.OPERATIONS`; `tests/hardening/test_openapi.py` checks it against
the router, so a route cannot be added without being documented, and fuzzes the local
server with schemathesis against this document.

The local dev server adds its scheduled-handler endpoints (`build_document(local=True)`).

The response models live in `worker.api_models`.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel

from bindings.environment import Bindings
from http_messages import HttpRequest, HttpResponse, json_response
from worker.api_models import (
    ErrorBody,
    McpReply,
    ScheduledResult,
)
from worker.api_operations import ACCESS, API_KEY, OPERATIONS, Operation
from worker.router import MAX_PARAM_CHARS

API_VERSION = "0.1.0"


SCHEDULED_PATHS = ("/cdn-cgi/handler/scheduled", "/cdn-cgi/local/scheduled")

_PARAM_DESCRIPTIONS = {
    "tenant": "Tenant id: 1-63 of a-z, 0-9, '_' or '-', starting with a letter or digit",
    "agent_type": "A registered agent type",
    "run_id": "A run's ULID",
    "fact_id": "A fact's ULID",
    "subject": "The subject to erase, percent-encoded (decoded once)",
    "tool_name": "A tool registered for the API key's tenant",
}
_PARAM_PATTERNS = {
    "tenant": "^[a-z0-9][a-z0-9_-]{0,62}$",
}


class _Schemas:
    """Collects component schemas from pydantic models (refs into #/components/schemas)."""

    def __init__(self) -> None:
        self.components: dict[str, Any] = {}

    def ref(self, model: type[BaseModel], mode: Literal["validation", "serialization"]) -> Any:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode=mode)
        for name, definition in schema.pop("$defs", {}).items():
            self.components.setdefault(name, definition)
        name = model.__name__
        self.components.setdefault(name, schema)
        return {"$ref": f"#/components/schemas/{name}"}


def _operation_id(method: str, path: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "_", path.lower()).strip("_")
    return f"{method.lower()}_{words}"


def _json_content(schema: Any) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _path_parameters(path: str) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in path.split("/") if part.startswith("{")]
    parameters = []
    for name in names:
        schema: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_PARAM_CHARS}
        if name in _PARAM_PATTERNS:
            schema["pattern"] = _PARAM_PATTERNS[name]
        parameters.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": _PARAM_DESCRIPTIONS.get(name, name),
                "schema": schema,
            }
        )
    return parameters


def _query_parameters(model: type[BaseModel], schemas: _Schemas) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    for name, definition in schema.pop("$defs", {}).items():
        schemas.components.setdefault(name, definition)
    required = set(schema.get("required", ()))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


def _operation(op: Operation, schemas: _Schemas) -> dict[str, Any]:
    error = {
        "description": "A JSON error",
        "content": _json_content(schemas.ref(ErrorBody, "serialization")),
    }
    responses: dict[str, Any] = {}
    if op.ok is not None:
        responses[str(op.ok_status)] = {
            "description": "Success",
            "content": _json_content(schemas.ref(op.ok, "serialization")),
        }
    if op.path == "/mcp" and op.method == "POST":
        responses["202"] = {"description": "A notification or response was accepted"}
        # MCP answers every failure in JSON-RPC form (HTTP 4xx with a JSON-RPC error body).
        responses["default"] = {
            "description": "A JSON-RPC error",
            "content": _json_content(schemas.ref(McpReply, "serialization")),
        }
    elif op.ok is None and op.path.startswith("/api/v1/tools/"):
        responses["default"] = {
            "description": "The upstream's status and body (marked x-upstream-status), or a "
            "gateway error (marked x-gateway-error) in the JSON error shape",
            "content": {"*/*": {"schema": {}}},
        }
    elif op.tag == "oauth":
        responses["default"] = {
            "description": "The OAuth answer: RFC-defined JSON, a redirect, or an HTML page",
            "content": {"*/*": {"schema": {}}},
        }
    elif op.ok is None and op.path == "/openapi.json":
        responses["200"] = {
            "description": "OpenAPI 3.1",
            "content": _json_content({"type": "object"}),
        }
        responses["default"] = error
    else:
        responses["default"] = error
    operation: dict[str, Any] = {
        "operationId": _operation_id(op.method, op.path),
        "summary": op.summary,
        "tags": [op.tag],
        "responses": responses,
    }
    parameters = _path_parameters(op.path)
    if op.query is not None:
        parameters.extend(_query_parameters(op.query, schemas))
    if parameters:
        operation["parameters"] = parameters
    if op.body is not None:
        operation["requestBody"] = {
            "required": op.body_required,
            "content": _json_content(schemas.ref(op.body, "validation")),
        }
    elif op.path.startswith("/api/v1/tools/"):
        operation["requestBody"] = {
            "required": False,
            "description": "The tool's arguments (checked against its input_schema)",
            "content": _json_content({"type": "object"}),
        }
    if op.security:
        operation["security"] = [{name: []} for name in op.security]
    return operation


def build_document(*, local: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document; `local=True` adds the dev server's scheduled endpoints."""
    schemas = _Schemas()
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, schemas)
    if local:
        for path in SCHEDULED_PATHS:
            paths[path] = {
                "get": {
                    "operationId": "scheduled" + path.replace("/", "_").replace("-", "_"),
                    "summary": "Run the scheduled handler now (local dev server only)",
                    "tags": ["local"],
                    "parameters": [
                        {
                            "name": "cron",
                            "in": "query",
                            "required": True,
                            "schema": {"type": "string"},
                        },
                        {
                            "name": "time",
                            "in": "query",
                            "required": False,
                            "description": "Epoch milliseconds",
                            "schema": {"type": "string"},
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "The job's report",
                            "content": _json_content(schemas.ref(ScheduledResult, "serialization")),
                        },
                        "default": {
                            "description": "A JSON error",
                            "content": _json_content(schemas.ref(ErrorBody, "serialization")),
                        },
                    },
                }
            }
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
            "securitySchemes": {
                ACCESS: {"type": "apiKey", "in": "header", "name": "Cf-Access-Jwt-Assertion"},
                API_KEY: {"type": "http", "scheme": "bearer"},
            },
        },
    }


_DOCUMENTS: dict[bool, dict[str, Any]] = {}


def document(*, local: bool = False) -> dict[str, Any]:
    """`build_document`, built once per isolate (the models do not change at runtime)."""
    if local not in _DOCUMENTS:
        _DOCUMENTS[local] = build_document(local=local)
    return _DOCUMENTS[local]


async def openapi_route(
    request: HttpRequest, params: dict[str, str], bindings: Bindings
) -> HttpResponse:
    """`GET /openapi.json`."""
    return json_response(document())
