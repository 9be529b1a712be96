"""Tool input schemas: what registration accepts (`check_schema`) and how arguments are
validated (`validate`), with `fastjsonschema` (pure Python, loads in Pyodide). Semantics are
JSON Schema 2020-12 for `META_SCHEMA`'s keywords (docs/gateway.md): fastjsonschema's draft-07
agrees once a `$ref` with siblings moves into an `allOf`, `format` is an annotation and `items`
arrays are refused. Registration refuses, by location, what could not be honoured exactly:
unknown keywords, bad values or patterns, a `$ref` outside this document (the library would
fetch it), cycles that never descend, too deep or too large schemas.
"""

from __future__ import annotations

import graphlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any
from urllib.parse import unquote

MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_BYTES = 64 * 1024
MAX_COMPILED = 256
# Enough to show a caller what is wrong without building an unbounded error list.
MAX_PROBLEMS = 20

TYPE_NAMES = ["array", "boolean", "integer", "null", "number", "object", "string"]
# Keywords holding a subschema, a list or a map of them; `_SAME_INSTANCE` and the lists
# apply to the same instance (no descent), so a cycle through them never ends.
_ONE_SCHEMA = ("items", "additionalProperties", "propertyNames", "contains")
_SAME_INSTANCE = ("not", "if", "then", "else")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")

_COUNT = {"type": "integer", "minimum": 0}


def _each(keywords: tuple[str, ...], shape: Any) -> dict[str, Any]:
    return {keyword: shape for keyword in keywords}


# The keywords a tool schema may use and their values' shapes (checked by fastjsonschema).
META_SCHEMA: dict[str, Any] = {
    "type": ["object", "boolean"],
    "additionalProperties": False,
    "properties": {
        "$schema": {
            "enum": [
                "https://json-schema.org/draft/2020-12/schema",
                "https://json-schema.org/draft/2019-09/schema",
                "http://json-schema.org/draft-07/schema#",
                "http://json-schema.org/draft-07/schema",
            ]
        },
        **_each(
            ("$ref", "$comment", "title", "description", "format", "pattern"), {"type": "string"}
        ),
        **_each(("deprecated", "readOnly", "writeOnly", "uniqueItems"), {"type": "boolean"}),
        **_each(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), {"type": "number"}),
        **_each(
            ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"),
            _COUNT,
        ),
        **_each(_ONE_SCHEMA + _SAME_INSTANCE, {"$ref": "#"}),
        **_each(_SCHEMA_LISTS, {"type": "array", "minItems": 1, "items": {"$ref": "#"}}),
        **_each(_SCHEMA_MAPS, {"type": "object", "additionalProperties": {"$ref": "#"}}),
        "default": True,
        "const": True,
        "examples": {"type": "array"},
        "enum": {"type": "array", "minItems": 1},
        "multipleOf": {"type": "number", "exclusiveMinimum": 0},
        "required": {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
        "type": {
            "anyOf": [
                {"enum": TYPE_NAMES},
                {
                    "type": "array",
                    "minItems": 1,
                    "uniqueItems": True,
                    "items": {"enum": TYPE_NAMES},
                },
            ]
        },
    },
}
SUPPORTED_KEYWORDS = frozenset(META_SCHEMA["properties"])

Validator = Callable[[Any], Any]


class UnsupportedSchemaError(ValueError):
    """A schema the gateway cannot honour exactly; `problems`: each reason with its location."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


# Why an instance fails: `{"path": "$.items[2].name" (JSONPath-like), "problem": ...}`.
SchemaProblem = dict[str, str]


def _compile(schema: Any, *, detailed: bool = True) -> Validator:
    """fastjsonschema's validator for a checked `schema` (no defaults written, formats not
    asserted)."""
    import fastjsonschema  # when first needed: most requests never compile a schema

    # In every subschema, a `$ref` with siblings moves into `allOf` (appended, so JSON
    # pointers still resolve) and `$schema` goes (the library picks its draft from it).
    copy = json.loads(json.dumps(schema))  # deep: the library rewrites `$ref` strings
    todo = [copy]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            todo.extend(sub for _, _, sub in _subschemas(node, ""))
            node.pop("$schema", None)
            if "$ref" in node and len(node) > 1:
                node["allOf"] = [*node.get("allOf", []), {"$ref": node.pop("$ref")}]
    return fastjsonschema.compile(
        copy,
        handlers={},
        use_default=False,
        use_formats=False,
        detailed_exceptions=detailed,
        fast_fail=not detailed,
    )


@cache
def _meta_validator(detailed: bool) -> Validator:
    # The plain one compiles in a fifth of the time; the detailed one only explains refusals.
    return _compile(META_SCHEMA, detailed=detailed)


class _Compiled:
    """Validators per isolate by schema identity (the hot path: no serialising per call),
    else by canonical JSON (a config re-read from KV); both LRU."""

    def __init__(self) -> None:
        self._by_text: OrderedDict[str, Validator] = OrderedDict()
        # id -> (the schema, held so its id cannot be reused, and its validator)
        self._by_id: OrderedDict[int, tuple[Any, Validator]] = OrderedDict()

    def get(self, schema: Any) -> Validator:
        held = self._by_id.get(id(schema))
        if held is None or held[0] is not schema:
            text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
            held = (schema, self._by_text.get(text) or _compile(schema))
            self._by_text[text] = held[1]
            self._by_text.move_to_end(text)
            if len(self._by_text) > MAX_COMPILED:
                self._by_text.popitem(last=False)
        self._by_id[id(schema)] = held
        self._by_id.move_to_end(id(schema))
        if len(self._by_id) > MAX_COMPILED:
            self._by_id.popitem(last=False)
        return held[1]

    def clear(self) -> None:
        self._by_text.clear()
        self._by_id.clear()


COMPILED = _Compiled()


def check_schema(schema: Any) -> None:
    """Raise `UnsupportedSchemaError` listing why `schema` cannot be honoured; else compile it."""
    if not isinstance(schema, dict | bool):
        raise UnsupportedSchemaError(["#: a schema must be an object or a boolean"])
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_SCHEMA_BYTES:
        raise UnsupportedSchemaError([f"#: the schema is {size} bytes; at most {MAX_SCHEMA_BYTES}"])
    # Every `$ref` anywhere, data values included: the library resolves one it meets while
    # writing an error message, wherever it sits.
    remote: set[str] = set()
    stack = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise UnsupportedSchemaError(
                [f"#: schema nested deeper than {MAX_SCHEMA_DEPTH} levels of JSON"]
            )
        if isinstance(node, dict) and not str(node.get("$ref", "#")).startswith("#"):
            remote.add(repr(node["$ref"]))
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        stack.extend((child, depth + 1) for child in children)
    if remote:
        names = ", ".join(sorted(remote))
        raise UnsupportedSchemaError(
            [f"#: $ref {names} points outside this schema; only `#...` is allowed"]
        )
    problems = _meta_problems(schema) or _structure_problems(schema)
    if not problems:
        try:
            COMPILED.get(schema)
        except Exception as exc:  # the library's refusal: JsonSchemaDefinitionException...
            problems = [f"#: the validator cannot compile this schema: {exc}"]
    if problems:
        raise UnsupportedSchemaError(problems)


def _message(error: Any) -> str:
    """The library's message without its leading `data.x.y` name."""
    message = str(error.message)
    if error.name and message.startswith(error.name):
        message = message[len(error.name) :].strip()
    return message


def _errors(validator: Validator, instance: Any) -> list[Any]:
    """The library's errors for `instance`: empty when it passes."""
    from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException

    try:
        validator(instance)
    except JsonSchemaValuesException as exc:
        return list(exc.errors)
    except JsonSchemaValueException as exc:
        return [exc]
    return []


def _meta_problems(schema: Any) -> list[str]:
    """Keywords and their values, checked by fastjsonschema against `META_SCHEMA`."""
    if not _errors(_meta_validator(False), schema):
        return []
    problems = []
    for error in _errors(_meta_validator(True), schema)[:MAX_PROBLEMS]:
        # `data.properties.a` as the JSON pointer `#/properties/a`.
        where = "#" + re.sub(
            r"\.|\[(\d+)\]", lambda m: f"/{m[1] or ''}", (error.name or "data")[4:]
        )
        if error.rule == "additionalProperties" and isinstance(error.value, dict):
            unknown = ", ".join(repr(k) for k in sorted(set(error.value) - SUPPORTED_KEYWORDS))
            supported = ", ".join(sorted(SUPPORTED_KEYWORDS))
            message = (
                f"keyword {unknown} is not supported by the gateway's validator "
                f"(supported: {supported})"
            )
        elif where.endswith("/type") and error.rule == "anyOf":
            message = f"must be one of {TYPE_NAMES} or a list of distinct ones"
        elif where.endswith("/items") and isinstance(error.value, list):
            message = "the array (tuple) form is not supported; use one schema"
        else:
            message = _message(error)
        problems.append(f"{where}: {message}")
    return problems or ["#: refused by the meta-schema"]  # both run the same checks


def _subschemas(node: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """(keyword, location, subschema) for every subschema directly under `node`."""
    if not isinstance(node, dict):
        return
    for keyword in _ONE_SCHEMA + _SAME_INSTANCE:
        if keyword in node:
            yield keyword, f"{where}/{keyword}", node[keyword]
    for keyword in _SCHEMA_LISTS:
        for index, item in enumerate(node.get(keyword, ())):
            yield keyword, f"{where}/{keyword}/{index}", item
    for keyword in _SCHEMA_MAPS:
        for name, item in node.get(keyword, {}).items():
            escaped = name.replace("~", "~0").replace("/", "~1")
            yield keyword, f"{where}/{keyword}/{escaped}", item


def _structure_problems(schema: Any) -> list[str]:
    """`$ref` targets, cycles that never descend into the instance, and patterns."""
    nodes: dict[str, Any] = {}
    todo = [("#", schema)]
    while todo:
        where, node = todo.pop()
        nodes[where] = node
        todo.extend((at, sub) for _, at, sub in _subschemas(node, where))
    problems: list[str] = []
    # Edges to the subschemas that apply to the same instance.
    same_instance: dict[str, list[str]] = {}
    for where, node in nodes.items():
        if not isinstance(node, dict):
            continue
        edges = same_instance.setdefault(where, [])
        edges.extend(
            at for kw, at, _ in _subschemas(node, where) if kw in _SCHEMA_LISTS + _SAME_INSTANCE
        )
        ref = node.get("$ref")
        if ref is not None:
            # As the library reads it: the fragment percent-decoded once, then a JSON pointer.
            target = "#" + unquote(ref[1:])
            if target in nodes:
                edges.append(target)
            else:
                problems.append(
                    f"{where}/$ref: {ref!r} must point into this schema (`#` or a JSON "
                    "pointer such as `#/$defs/name`) at a subschema"
                )
        for pattern in [node.get("pattern"), *node.get("patternProperties", {})]:
            if isinstance(pattern, str):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    problems.append(f"{where}: pattern {pattern!r} is not a valid regex: {exc}")
    try:
        graphlib.TopologicalSorter(same_instance).prepare()
    except graphlib.CycleError as exc:
        cycle = exc.args[1][::-1]  # graphlib walks the edges backwards
        problems.append(
            f"{cycle[0]}: $ref cycle that never descends into the value: {' -> '.join(cycle)}"
        )
    return problems


def validate(schema: Any, instance: Any) -> list[SchemaProblem]:
    """Why `instance` fails `schema` (checked): empty when it passes, at most `MAX_PROBLEMS`."""
    problems: list[SchemaProblem] = []
    for error in _errors(COMPILED.get(schema), instance):
        problems.extend(_problems(error))
        if len(problems) >= MAX_PROBLEMS:
            break
    return problems[:MAX_PROBLEMS]


def _problems(error: Any) -> list[SchemaProblem]:
    """One library error as problems; a missing or extra property at its own path."""
    path = "$" + (error.name or "data")[len("data") :]
    definition, value = error.definition, error.value
    if isinstance(definition, dict) and isinstance(value, dict):
        if error.rule == "required":
            names = [n for n in definition.get("required", ()) if n not in value]
            message = "is required"
        elif error.rule == "additionalProperties":
            known = definition.get("properties", {})
            patterns = [re.compile(p) for p in definition.get("patternProperties", {})]
            names = [n for n in value if n not in known and not any(p.search(n) for p in patterns)]
            message = "is not an allowed property"
        else:
            names = []
        if names:
            return [
                {
                    "path": f"{path}.{n}" if n.isidentifier() else f"{path}[{n!r}]",
                    "problem": message,
                }
                for n in names
            ]
    return [{"path": path, "problem": _message(error)}]
