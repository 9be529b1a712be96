"""The gateway's tool input schemas in real Pyodide: fastjsonschema (pure Python, mounted
from the venv as the Worker ships it from PyPI) loads, compiles a schema into Python code
with `exec` and validates, through `gateway.json_schema` — `anyOf`, `pattern` and `$ref`
(to `#/$defs/...`) included, refusals named at registration, problems at their paths."""

from __future__ import annotations

from typing import Any

from gateway.json_schema import UnsupportedSchemaError, check_schema, validate

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "repo": {"$ref": "#/$defs/repo", "description": "owner/name"},
        "issue": {"anyOf": [{"type": "integer", "minimum": 1}, {"$ref": "#/$defs/key"}]},
        "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "tree": {"$ref": "#/$defs/node"},
    },
    "required": ["repo", "issue"],
    "additionalProperties": False,
    "$defs": {
        "repo": {"type": "string", "pattern": "^[a-z0-9-]+/[a-z0-9-]+$"},
        "key": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"},
        "node": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        },
    },
}


def _paths(instance: Any) -> set[str]:
    return {problem["path"] for problem in validate(SCHEMA, instance)}


def test_any_of_pattern_and_refs_validate_in_pyodide() -> None:
    check_schema(SCHEMA)
    assert _paths({"repo": "octo/hello", "issue": 7, "labels": ["bug"]}) == set()
    assert _paths({"repo": "octo/hello", "issue": "OPS-12", "tree": {"children": [{}]}}) == set()
    bad = {
        "repo": "Octo/Hello!",
        "issue": "ops-12",
        "labels": ["a", "a"],
        "tree": {"children": [{"children": 3}]},
        "extra": True,
    }
    assert _paths(bad) == {
        "$.repo",
        "$.issue",
        "$.labels",
        "$.tree.children[0].children",
        "$.extra",
    }
    assert _paths({"repo": "octo/hello\n", "issue": 1}) == {"$.repo"}  # `$` is end of text
    assert _paths({}) == {"$.repo", "$.issue"}


def test_registration_refusals_are_named_in_pyodide() -> None:
    refused = {
        "prefixItems": {"type": "object", "prefixItems": []},
        "remote": {"type": "object", "$ref": "https://evil.example/s.json"},
        "cycle": {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        "pattern": {"type": "string", "pattern": "("},
    }
    messages = {}
    for name, schema in refused.items():
        try:
            check_schema(schema)
        except UnsupportedSchemaError as exc:
            messages[name] = str(exc)
    assert "'prefixItems' is not supported" in messages["prefixItems"]
    assert "points outside this schema" in messages["remote"]
    assert "$ref cycle" in messages["cycle"]
    assert "not a valid regex" in messages["pattern"]
