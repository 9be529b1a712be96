"""Tool input schemas: what the gateway accepts at registration, and how it validates the
arguments of every call — by `fastjsonschema`, a maintained pure-Python validator that
compiles a schema into a Python function (it loads in Pyodide: docs/pyodide.md).

**Semantics are JSON Schema 2020-12** for the keywords below. fastjsonschema implements
draft-07, which agrees with 2020-12 on them once three differences are dealt with here:
a `$ref` beside other keywords (draft-07 ignores the siblings; 2020-12 applies them) is
handed to the validator inside an `allOf`, so they apply; `format` is an annotation, as
2020-12 has it by default (`use_formats=False`); and the array form of `items` (draft-07's
tuple validation, 2020-12's `prefixItems`) is refused. `tests/gateway/test_json_schema.py`
compares the verdicts with the `jsonschema` package's Draft 2020-12 validator.

* Assertions and applicators: `type`, `enum`, `const`, `properties`, `required`,
  `additionalProperties`, `patternProperties`, `propertyNames`, `minProperties`,
  `maxProperties`, `items` (one schema), `contains`, `minItems`, `maxItems`,
  `uniqueItems`, `minLength`, `maxLength`, `pattern`, `minimum`, `maximum`,
  `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `allOf`, `anyOf`, `oneOf`, `not`,
  `if`/`then`/`else`, `$ref` to this document (`#`, `#/$defs/...`, any JSON pointer to a
  subschema), with `$defs`/`definitions` to hold the targets.
* Annotations, never enforced: `title`, `description`, `default`, `examples`, `$comment`,
  `deprecated`, `readOnly`, `writeOnly`, `format`, `$schema` (2020-12, 2019-09 or draft-07).
* Patterns are Python regular expressions searched anywhere in the string (as ECMA-262's
  `test`), except that `$` in `pattern` matches only at the very end, as in ECMA-262.

**Registration refuses** (`check_schema` raises `UnsupportedSchemaError` naming every
problem at once) whatever the validator could not honour — never a silently ignored
constraint: any other keyword (2019-09/2020-12's `prefixItems`, `unevaluatedProperties`,
`dependentRequired`, `$anchor`, `$dynamicRef`..., draft-07's `dependencies`, typos), a
keyword whose value is malformed, a `$ref` that is not a JSON pointer into this document
(a remote one would make the validator fetch a URL), `$id`, a pattern Python cannot
compile, a cycle of `$ref`s (or combinators) that never descends into the instance (it
would recurse forever), nesting deeper than `MAX_SCHEMA_DEPTH`, a schema over
`MAX_SCHEMA_BYTES`.

**The hot path** (`validate`, on every tool call) reuses compiled validators: an isolate
keeps up to `MAX_COMPILED` of them, found by the schema object itself first (no hashing
per call) and by the schema's canonical JSON after a config is re-read from KV. Compiling
happens at registration and on the first call after an isolate starts.

Size: one room for the gateway's use of JSON Schema — the meta-schema (data), the
registration checks, the compiled-validator cache and the problem report share the keyword
tables and the library's error objects; split, each half would import the other.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

# JSON nesting of the schema document (each `properties` map and subschema is a level).
MAX_SCHEMA_DEPTH = 32
MAX_SCHEMA_BYTES = 64 * 1024
MAX_COMPILED = 256
# Enough to show a caller what is wrong without building an unbounded error list.
MAX_PROBLEMS = 20

TYPE_NAMES = ["array", "boolean", "integer", "null", "number", "object", "string"]
DIALECTS = [
    "https://json-schema.org/draft/2020-12/schema",
    "https://json-schema.org/draft/2019-09/schema",
    "http://json-schema.org/draft-07/schema#",
    "http://json-schema.org/draft-07/schema",
]
# Keywords whose value is one subschema, a list of them, or a map of them: the structure
# `$ref` targets and cycles are checked over.
_ONE_SCHEMA = ("items", "additionalProperties", "propertyNames", "contains", "not")
_CONDITIONAL = ("if", "then", "else")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")

_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0}
_NUMBER: dict[str, Any] = {"type": "number"}
_SUBSCHEMA: dict[str, Any] = {"$ref": "#"}
_SCHEMA_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"$ref": "#"}}
_SCHEMA_LIST: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"$ref": "#"}}
# The keywords a tool schema may use and the shape of each value, as a (draft-07)
# meta-schema that fastjsonschema itself checks tool schemas against.
META_SCHEMA: dict[str, Any] = {
    "type": ["object", "boolean"],
    "properties": {
        "$schema": {"enum": DIALECTS},
        "$ref": {"type": "string"},
        "$comment": {"type": "string"},
        "$defs": _SCHEMA_MAP,
        "definitions": _SCHEMA_MAP,
        "title": {"type": "string"},
        "description": {"type": "string"},
        "default": True,
        "examples": {"type": "array"},
        "deprecated": {"type": "boolean"},
        "readOnly": {"type": "boolean"},
        "writeOnly": {"type": "boolean"},
        "format": {"type": "string"},
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
        "enum": {"type": "array", "minItems": 1},
        "const": True,
        "multipleOf": {"type": "number", "exclusiveMinimum": 0},
        "minimum": _NUMBER,
        "maximum": _NUMBER,
        "exclusiveMinimum": _NUMBER,
        "exclusiveMaximum": _NUMBER,
        "minLength": _COUNT,
        "maxLength": _COUNT,
        "pattern": {"type": "string"},
        "items": _SUBSCHEMA,
        "contains": _SUBSCHEMA,
        "minItems": _COUNT,
        "maxItems": _COUNT,
        "uniqueItems": {"type": "boolean"},
        "properties": _SCHEMA_MAP,
        "patternProperties": _SCHEMA_MAP,
        "additionalProperties": _SUBSCHEMA,
        "propertyNames": _SUBSCHEMA,
        "required": {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
        "minProperties": _COUNT,
        "maxProperties": _COUNT,
        "allOf": _SCHEMA_LIST,
        "anyOf": _SCHEMA_LIST,
        "oneOf": _SCHEMA_LIST,
        "not": _SUBSCHEMA,
        "if": _SUBSCHEMA,
        "then": _SUBSCHEMA,
        "else": _SUBSCHEMA,
    },
    "additionalProperties": False,
}
SUPPORTED_KEYWORDS = frozenset(META_SCHEMA["properties"])

Validator = Callable[[Any], Any]


class UnsupportedSchemaError(ValueError):
    """A schema the gateway cannot validate with exactly its meaning; `problems` names each
    reason with its location (`#/properties/a/minLength: ...`)."""

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


# --- compiling (the library) ---------------------------------------------------------------


def _compile(schema: Any, *, detailed: bool = True) -> Validator:
    """fastjsonschema's validator for `schema` (already checked): every error collected
    (with its path, rule and value when `detailed`), defaults never written into the
    arguments, formats not asserted, no remote `$ref`."""
    import fastjsonschema  # when first needed: most requests never validate a schema

    return fastjsonschema.compile(
        _for_draft_07(schema),
        handlers={},
        use_default=False,
        use_formats=False,
        detailed_exceptions=detailed,
        fast_fail=not detailed,
    )


def _for_draft_07(schema: Any) -> Any:
    """A copy with 2020-12's meaning under draft-07: in every subschema, a `$ref` with
    siblings moves into `allOf` (appended, so every JSON pointer into the document still
    resolves) and `$schema` goes (fastjsonschema picks its draft from it). Values of
    `const`, `enum`, `default`... are data and stay as they are."""
    copy = json.loads(json.dumps(schema))  # deep: the library rewrites `$ref` strings
    todo = [copy]
    while todo:
        node = todo.pop()
        if not isinstance(node, dict):
            continue
        todo.extend(sub for _, _, sub in _subschemas(node, ""))
        node.pop("$schema", None)
        if "$ref" in node and len(node) > 1:
            node["allOf"] = [*node.get("allOf", []), {"$ref": node.pop("$ref")}]
    return copy


class _Compiled:
    """Validators by schema identity (the hot path's lookup) and by canonical JSON."""

    def __init__(self) -> None:
        self._by_text: OrderedDict[str, Validator] = OrderedDict()
        # id -> (the schema object, held so its id cannot be reused, and its validator)
        self._by_id: OrderedDict[int, tuple[Any, Validator]] = OrderedDict()

    def get(self, schema: Any) -> Validator:
        held = self._by_id.get(id(schema))
        if held is not None and held[0] is schema:
            self._by_id.move_to_end(id(schema))
            return held[1]
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        validator = self._by_text.get(text)
        if validator is None:
            validator = _compile(schema)
            self._by_text[text] = validator
        self._by_text.move_to_end(text)
        self._by_id[id(schema)] = (schema, validator)
        while len(self._by_text) > MAX_COMPILED:
            self._by_text.popitem(last=False)
        while len(self._by_id) > MAX_COMPILED:
            self._by_id.popitem(last=False)
        return validator

    def clear(self) -> None:
        self._by_text.clear()
        self._by_id.clear()


COMPILED = _Compiled()
# The meta-schema's validators: a plain one (a fifth of the compile time of a detailed
# one), and the detailed one, compiled only to explain a refusal.
_META: dict[bool, Validator] = {}


# --- registration-time check -------------------------------------------------------------


def check_schema(schema: Any) -> None:
    """Raise `UnsupportedSchemaError` listing every reason `schema` cannot be honoured
    exactly (module docstring); otherwise compile it, ready for `validate`."""
    if not isinstance(schema, dict | bool):
        raise UnsupportedSchemaError(["#: a schema must be an object or a boolean"])
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_SCHEMA_BYTES:
        raise UnsupportedSchemaError([f"#: the schema is {size} bytes; at most {MAX_SCHEMA_BYTES}"])
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise UnsupportedSchemaError(
            [f"#: schema nested deeper than {MAX_SCHEMA_DEPTH} levels of JSON"]
        )
    remote = sorted({repr(ref) for ref in _refs(schema) if not str(ref).startswith("#")})
    if remote:
        raise UnsupportedSchemaError(
            [f"#: $ref {', '.join(remote)} points outside this schema; only `#...` is allowed"]
        )
    problems = _meta_problems(schema)
    if not problems:
        problems = _structure_problems(schema)
    if not problems:
        try:
            COMPILED.get(schema)
        except Exception as exc:  # the library's refusal: JsonSchemaDefinitionException...
            problems = [f"#: the validator cannot compile this schema: {exc}"]
    if problems:
        raise UnsupportedSchemaError(problems)


def _depth(value: Any) -> int:
    """The JSON nesting depth of `value`, counted up to just past `MAX_SCHEMA_DEPTH`."""
    stack, deepest = [(value, 0)], 0
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_SCHEMA_DEPTH:
            break
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _refs(value: Any) -> Iterator[Any]:
    """Every `$ref` value anywhere in the document, data values included (the library
    resolves a `$ref` it meets while writing an error message, wherever it sits)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "$ref" in node:
                yield node["$ref"]
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _pointer(name: str) -> str:
    """fastjsonschema's `data.properties.a` as the JSON pointer `#/properties/a`."""
    rest = name[len("data") :]
    return "#" + re.sub(r"\.|\[(\d+)\]", lambda m: f"/{m.group(1)}" if m.group(1) else "/", rest)


def _meta_problems(schema: Any) -> list[str]:
    """Keywords and their values, checked by fastjsonschema against `META_SCHEMA`."""
    from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException

    if False not in _META:
        _META[False] = _compile(META_SCHEMA, detailed=False)
    try:
        _META[False](schema)
        return []
    except JsonSchemaValueException:
        pass
    if True not in _META:
        _META[True] = _compile(META_SCHEMA, detailed=True)
    try:
        _META[True](schema)
    except JsonSchemaValuesException as exc:
        return [_meta_message(error) for error in exc.errors[:MAX_PROBLEMS]]
    except JsonSchemaValueException as exc:
        return [_meta_message(exc)]
    return ["#: refused by the meta-schema"]  # both validators run the same code


def _meta_message(error: Any) -> str:
    where = _pointer(error.name or "data")
    if error.rule == "additionalProperties" and isinstance(error.value, dict):
        unknown = sorted(set(error.value) - SUPPORTED_KEYWORDS)
        names = ", ".join(repr(k) for k in unknown)
        return (
            f"{where}: keyword {names} is not supported by the gateway's validator "
            f"(supported: {', '.join(sorted(SUPPORTED_KEYWORDS))})"
        )
    if where.endswith("/type") and error.rule == "anyOf":
        return f"{where}: must be one of {TYPE_NAMES} or a list of distinct ones"
    if where.endswith("/items") and isinstance(error.value, list):
        return f"{where}: the array (tuple) form is not supported; use one schema"
    message = error.message
    if error.name and message.startswith(error.name):
        message = message[len(error.name) :].strip()
    return f"{where}: {message}"


def _subschemas(node: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """(keyword, location, subschema) for every subschema directly under `node`."""
    if not isinstance(node, dict):
        return
    for keyword in (*_ONE_SCHEMA, *_CONDITIONAL):
        if keyword in node:
            yield keyword, f"{where}/{keyword}", node[keyword]
    for keyword in _SCHEMA_LISTS:
        for index, item in enumerate(node.get(keyword, ())):
            yield keyword, f"{where}/{keyword}/{index}", item
    for keyword in _SCHEMA_MAPS:
        for name, item in node.get(keyword, {}).items():
            yield keyword, f"{where}/{keyword}/{_escape(name)}", item


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _structure_problems(schema: Any) -> list[str]:
    """`$ref` targets, cycles that never descend into the instance, and patterns."""
    nodes: dict[str, Any] = {}
    todo = [("#", schema)]
    while todo:
        where, node = todo.pop()
        nodes[where] = node
        todo.extend((at, sub) for _, at, sub in _subschemas(node, where))
    problems: list[str] = []
    # Edges to the subschemas that apply to the same instance (no descent into it).
    same_instance: dict[str, list[str]] = {}
    for where, node in nodes.items():
        if not isinstance(node, dict):
            continue
        edges = same_instance.setdefault(where, [])
        for keyword, at, _ in _subschemas(node, where):
            if keyword in (*_SCHEMA_LISTS, *_CONDITIONAL, "not"):
                edges.append(at)
        ref = node.get("$ref")
        if ref is not None:
            # As the library reads it: the fragment percent-decoded once, then a JSON pointer.
            target = "#" + unquote(ref[1:])
            if target not in nodes:
                problems.append(
                    f"{where}/$ref: {ref!r} must point into this schema (`#` or a JSON "
                    "pointer such as `#/$defs/name`) at a subschema"
                )
            else:
                edges.append(target)
        for pattern in [node.get("pattern"), *node.get("patternProperties", {})]:
            if isinstance(pattern, str):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    problems.append(f"{where}: pattern {pattern!r} is not a valid regex: {exc}")
    cycle = _cycle(same_instance)
    if cycle:
        problems.append(
            f"{cycle[0]}: $ref cycle that never descends into the value: {' -> '.join(cycle)}"
        )
    return problems


def _cycle(edges: dict[str, list[str]]) -> list[str] | None:
    """A cycle in `edges` (depth-first search, iterative), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if state.get(start):
            continue
        path, stack = [start], [iter(edges.get(start, ()))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(edges.get(nxt, ())))
    return None


# --- call-time validation ----------------------------------------------------------------


def validate(schema: Any, instance: Any) -> list[SchemaProblem]:
    """Why `instance` fails `schema` (empty when it passes), at most `MAX_PROBLEMS`.

    `schema` must have passed `check_schema`; `instance` is decoded JSON.
    """
    from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException

    try:
        COMPILED.get(schema)(instance)
    except JsonSchemaValuesException as exc:
        errors = exc.errors
    except JsonSchemaValueException as exc:
        errors = [exc]
    else:
        return []
    problems: list[SchemaProblem] = []
    for error in errors:
        problems.extend(_problems(error))
        if len(problems) >= MAX_PROBLEMS:
            break
    return problems[:MAX_PROBLEMS]


def is_valid(schema: Any, instance: Any) -> bool:
    return not validate(schema, instance)


def _path(name: str | None) -> str:
    return "$" + (name or "data")[len("data") :]


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if name.isidentifier() else f"{path}[{name!r}]"


def _problems(error: Any) -> list[SchemaProblem]:
    """One library error as the gateway's problems: a missing or extra property is
    reported at its own path, as clients of the gateway have always seen it."""
    path, definition, value = _path(error.name), error.definition, error.value
    if isinstance(definition, dict) and isinstance(value, dict):
        if error.rule == "required":
            missing = [n for n in definition.get("required", ()) if n not in value]
            return [SchemaProblem(_child(path, name), "is required") for name in missing]
        if error.rule == "additionalProperties":
            known = definition.get("properties", {})
            patterns = [re.compile(p) for p in definition.get("patternProperties", {})]
            extra = [
                name
                for name in value
                if name not in known and not any(p.search(name) for p in patterns)
            ]
            return [SchemaProblem(_child(path, n), "is not an allowed property") for n in extra]
    message = str(error.message)
    if error.name and message.startswith(error.name):
        message = message[len(error.name) :].strip()
    return [SchemaProblem(path, message)]
