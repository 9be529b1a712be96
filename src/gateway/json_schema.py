"""A small JSON Schema validator for tool inputs (the subset the gateway supports).

The `jsonschema` package is not a Worker dependency (pywrangler vendors only
`[project].dependencies`), so tool input schemas are checked here. Semantics follow
JSON Schema 2020-12 for the keywords below; a keyword applies only to instances of its
type (`minimum` ignores strings, `properties` ignores arrays), as the spec says.

Supported assertions: `type` (a name or a list of names), `properties`, `required`,
`additionalProperties` (boolean or schema), `items` (one schema), `enum`, `const`,
`minLength`/`maxLength`, `minItems`/`maxItems`, `minimum`/`maximum`,
`exclusiveMinimum`/`exclusiveMaximum` (numbers, the 2020-12 form). Subschemas may be
the booleans `true`/`false`.

Accepted as annotations only, never enforced: `title`, `description`, `default`,
`examples`, `$comment`, `deprecated`, `readOnly`, `writeOnly`, `$schema`, and `format`
(2020-12 treats `format` as an annotation unless the format-assertion vocabulary is
on). Every other keyword (`$ref`, `anyOf`, `pattern`, `uniqueItems`, ...) is rejected
by `check_schema` at tool registration, so a schema never silently validates less than
its author meant.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TYPE_NAMES = frozenset({"null", "boolean", "object", "array", "number", "string", "integer"})

ASSERTION_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
    }
)
ANNOTATION_KEYWORDS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
        "format",
    }
)
SUPPORTED_KEYWORDS = ASSERTION_KEYWORDS | ANNOTATION_KEYWORDS

MAX_SCHEMA_DEPTH = 32
# Enough to show a caller what is wrong without building an unbounded error list.
MAX_PROBLEMS = 20

_COUNT_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems")
_NUMBER_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


class UnsupportedSchemaError(ValueError):
    """A schema uses a keyword outside the supported subset, or a keyword is malformed."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class SchemaProblem:
    """One reason an instance fails its schema. `path` is JSONPath-like: `$.items[2].name`."""

    path: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "problem": self.message}


# --- registration-time check -------------------------------------------------------------


def check_schema(schema: Any) -> None:
    """Raise `UnsupportedSchemaError` listing every unsupported or malformed keyword.

    `schema` must be an object or a boolean; nesting deeper than `MAX_SCHEMA_DEPTH` is
    refused (validation recurses as deep as the schema, so this bounds it).
    """
    problems: list[str] = []
    _check(schema, "#", 0, problems)
    if problems:
        raise UnsupportedSchemaError(problems)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_json_value(value: Any, depth: int = 0) -> bool:
    if depth > MAX_SCHEMA_DEPTH:
        return False
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_is_json_value(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_value(v, depth + 1) for k, v in value.items())
    return False


def _check(schema: Any, where: str, depth: int, problems: list[str]) -> None:
    if isinstance(schema, bool):
        return
    if not isinstance(schema, dict):
        problems.append(f"{where}: a schema must be an object or a boolean")
        return
    if depth > MAX_SCHEMA_DEPTH:
        problems.append(f"{where}: schema nested deeper than {MAX_SCHEMA_DEPTH} levels")
        return
    for keyword in schema:
        if keyword not in SUPPORTED_KEYWORDS:
            problems.append(
                f"{where}: keyword {keyword!r} is not supported by the gateway's validator "
                f"(supported: {', '.join(sorted(ASSERTION_KEYWORDS))}; annotations: "
                f"{', '.join(sorted(ANNOTATION_KEYWORDS))})"
            )
    if "type" in schema:
        kind = schema["type"]
        names = kind if isinstance(kind, list) else [kind]
        if (
            not names
            or not all(isinstance(n, str) and n in TYPE_NAMES for n in names)
            or len(set(names)) != len(names)
        ):
            problems.append(
                f"{where}/type: must be one of {sorted(TYPE_NAMES)} or a list of distinct ones"
            )
    if "properties" in schema:
        props = schema["properties"]
        if not isinstance(props, dict):
            problems.append(f"{where}/properties: must be an object of schemas")
        else:
            for name, sub in props.items():
                _check(sub, f"{where}/properties/{name}", depth + 1, problems)
    if "required" in schema:
        req = schema["required"]
        if (
            not isinstance(req, list)
            or not all(isinstance(r, str) for r in req)
            or len(set(req)) != len(req)
        ):
            problems.append(f"{where}/required: must be a list of distinct property names")
    if "additionalProperties" in schema:
        _check(schema["additionalProperties"], f"{where}/additionalProperties", depth + 1, problems)
    if "items" in schema:
        items = schema["items"]
        if isinstance(items, list):
            problems.append(
                f"{where}/items: the array (tuple) form is not supported; use one schema"
            )
        else:
            _check(items, f"{where}/items", depth + 1, problems)
    if "enum" in schema:
        enum = schema["enum"]
        if not isinstance(enum, list) or not enum or not _is_json_value(enum):
            problems.append(f"{where}/enum: must be a non-empty list of JSON values")
    if "const" in schema and not _is_json_value(schema["const"]):
        problems.append(f"{where}/const: must be a JSON value")
    for keyword in _COUNT_KEYWORDS:
        if keyword in schema:
            value = schema[keyword]
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                problems.append(f"{where}/{keyword}: must be a non-negative integer")
    for keyword in _NUMBER_KEYWORDS:
        if keyword in schema:
            value = schema[keyword]
            if not (_is_number(value) and math.isfinite(value)):
                problems.append(f"{where}/{keyword}: must be a number")
    if "format" in schema and not isinstance(schema["format"], str):
        problems.append(f"{where}/format: must be a string")


# --- call-time validation ----------------------------------------------------------------


def validate(schema: Any, instance: Any) -> list[SchemaProblem]:
    """Return why `instance` fails `schema` (empty when it passes), at most `MAX_PROBLEMS`.

    `schema` must have passed `check_schema`; `instance` is decoded JSON (dict, list, str,
    int, float, bool, None).
    """
    problems: list[SchemaProblem] = []
    _validate(schema, instance, "$", problems)
    return problems[:MAX_PROBLEMS]


def is_valid(schema: Any, instance: Any) -> bool:
    return not validate(schema, instance)


def json_type_of(value: Any) -> str:
    """The JSON type name of a decoded value (`integer` for whole numbers)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _has_type(value: Any, name: str) -> bool:
    actual = json_type_of(value)
    # JSON Schema: an integer is also a number; 1.0 is an integer.
    return actual == name or (name == "number" and actual == "integer")


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: `1 == 1.0`, but `true != 1` (unlike Python's `==`)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if type(a) is not type(b):
        return False
    return bool(a == b)


def _child_path(path: str, name: str) -> str:
    if name.isidentifier():
        return f"{path}.{name}"
    return f"{path}[{name!r}]"


def _validate(schema: Any, value: Any, path: str, problems: list[SchemaProblem]) -> None:
    if len(problems) >= MAX_PROBLEMS:
        return
    if schema is True:
        return
    if schema is False:
        problems.append(SchemaProblem(path, "no value is allowed here"))
        return
    assert isinstance(schema, Mapping)

    if "type" in schema:
        kind = schema["type"]
        names = kind if isinstance(kind, list) else [kind]
        if not any(_has_type(value, n) for n in names):
            expected = " or ".join(names)
            problems.append(SchemaProblem(path, f"expected {expected}, got {json_type_of(value)}"))
            # The other keywords would only repeat the type mismatch.
            return
    if "enum" in schema and not any(json_equal(value, e) for e in schema["enum"]):
        problems.append(SchemaProblem(path, f"must be one of {schema['enum']!r}"))
    if "const" in schema and not json_equal(value, schema["const"]):
        problems.append(SchemaProblem(path, f"must equal {schema['const']!r}"))

    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            problems.append(SchemaProblem(path, f"shorter than {schema['minLength']} characters"))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            problems.append(SchemaProblem(path, f"longer than {schema['maxLength']} characters"))
    elif _is_number(value):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(SchemaProblem(path, f"less than the minimum {schema['minimum']}"))
        if "maximum" in schema and value > schema["maximum"]:
            problems.append(SchemaProblem(path, f"greater than the maximum {schema['maximum']}"))
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            problems.append(
                SchemaProblem(path, f"must be greater than {schema['exclusiveMinimum']}")
            )
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            problems.append(SchemaProblem(path, f"must be less than {schema['exclusiveMaximum']}"))
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(SchemaProblem(path, f"fewer than {schema['minItems']} items"))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(SchemaProblem(path, f"more than {schema['maxItems']} items"))
        if "items" in schema:
            for index, item in enumerate(value):
                _validate(schema["items"], item, f"{path}[{index}]", problems)
    elif isinstance(value, dict):
        properties: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                problems.append(SchemaProblem(_child_path(path, name), "is required"))
        for name, item in value.items():
            if name in properties:
                _validate(properties[name], item, _child_path(path, name), problems)
            elif "additionalProperties" in schema:
                extra = schema["additionalProperties"]
                if extra is False:
                    problems.append(
                        SchemaProblem(_child_path(path, name), "is not an allowed property")
                    )
                else:
                    _validate(extra, item, _child_path(path, name), problems)
