"""Tool input schemas: what the gateway accepts at registration and how it validates —
fastjsonschema underneath, JSON Schema 2020-12 semantics, checked against the `jsonschema`
package's Draft 2020-12 validator as an oracle."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agent_memory.agent.memory_tools import MEMORY_TOOLS
from gateway.json_schema import (
    COMPILED,
    MAX_PROBLEMS,
    UnsupportedSchemaError,
    check_schema,
    validate,
)


def is_valid(schema: Any, instance: Any) -> bool:
    return not validate(schema, instance)


def refusal(schema: Any) -> str:
    with pytest.raises(UnsupportedSchemaError) as caught:
        check_schema(schema)
    return str(caught.value)


# --- what registration refuses, naming it -----------------------------------------------


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"prefixItems": [{"type": "string"}]}, "keyword 'prefixItems' is not supported"),
        ({"unevaluatedProperties": False}, "keyword 'unevaluatedProperties' is not supported"),
        ({"dependentRequired": {"a": ["b"]}}, "keyword 'dependentRequired' is not supported"),
        ({"dependencies": {"a": ["b"]}}, "keyword 'dependencies' is not supported"),
        ({"$dynamicRef": "#x"}, "keyword '$dynamicRef' is not supported"),
        ({"$id": "https://x.example/s"}, "keyword '$id' is not supported"),
        ({"type": "object", "properties": {"a": {"minLenght": 1}}}, "#/properties/a: keyword"),
        ({"type": "str"}, "#/type"),
        ({"type": ["string", "string"]}, "#/type"),
        ({"minLength": -1}, "#/minLength"),
        ({"maximum": "10"}, "#/maximum"),
        ({"multipleOf": 0}, "#/multipleOf"),
        ({"items": [{"type": "string"}]}, "tuple"),
        ({"required": "a"}, "#/required"),
        ({"enum": []}, "#/enum"),
        ({"properties": []}, "#/properties"),
        ({"anyOf": []}, "#/anyOf"),
        ("object", "a schema must be an object or a boolean"),
        ({"$ref": "https://evil.example/schema.json"}, "points outside this schema"),
        ({"$ref": "other.json#/a"}, "points outside this schema"),
        # The library resolves `$ref`s it meets in data too, while writing error messages.
        ({"const": {"$ref": "http://169.254.169.254/"}}, "points outside this schema"),
        ({"$ref": "#/$defs/missing"}, "must point into this schema"),
        ({"$ref": "#/properties", "properties": {}}, "must point into this schema"),
        ({"$ref": "#anchor"}, "must point into this schema"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "$ref cycle"),
        ({"anyOf": [{"$ref": "#"}]}, "$ref cycle"),
        ({"type": "string", "pattern": "(unclosed"}, "is not a valid regex"),
        ({"patternProperties": {"[": {}}}, "is not a valid regex"),
        ({"$schema": "http://json-schema.org/draft-04/schema#"}, "#/$schema"),
        ({"required": ["a"], "additionalProperties": False}, "cannot compile"),
    ],
)
def test_registration_names_what_the_validator_cannot_honour(schema: Any, fragment: str) -> None:
    assert fragment in refusal(schema)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(UnsupportedSchemaError) as caught:
        check_schema({"oneOf": [], "properties": {"a": {"nope": {}}, "b": {"minItems": 1.5}}})
    assert len(caught.value.problems) == 3


def test_absurd_nesting_and_size_are_refused() -> None:
    schema: dict[str, Any] = {"type": "array"}
    for _ in range(40):
        schema = {"type": "array", "items": schema}
    assert "deeper" in refusal(schema)
    big = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(4000)}}
    assert "bytes" in refusal(big)


# --- what now registers and validates (issue 23: anyOf, pattern, $ref were refused) ------


def test_any_of_pattern_and_refs_to_defs_register_and_validate() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "repo": {"type": "string", "pattern": "^[a-z0-9-]+/[a-z0-9-]+$"},
            "id": {"anyOf": [{"type": "integer", "minimum": 1}, {"$ref": "#/$defs/ulid"}]},
            "labels": {"type": "array", "items": {"$ref": "#/$defs/label"}, "uniqueItems": True},
        },
        "required": ["repo", "id"],
        "additionalProperties": False,
        "$defs": {
            "ulid": {"type": "string", "pattern": "^[0-9A-HJKMNP-TV-Z]{26}$"},
            "label": {"type": "string", "minLength": 1, "maxLength": 50},
        },
    }
    check_schema(schema)
    assert is_valid(schema, {"repo": "octo/hello", "id": 7, "labels": ["bug"]})
    assert is_valid(schema, {"repo": "octo/hello", "id": "01J0000000000000000000000Z"})
    problems = {
        (p["path"], p["problem"])
        for p in validate(schema, {"repo": "Octo/Hello!", "id": 0, "labels": ["", "bug", "bug"]})
    }
    assert {path for path, _ in problems} == {"$.repo", "$.id", "$.labels", "$.labels[0]"}
    # `$` matches only at the very end (ECMA-262), so a trailing newline does not pass.
    assert not is_valid(schema, {"repo": "octo/hello\n", "id": 1})


def test_a_ref_with_siblings_applies_both_as_2020_12_says() -> None:
    schema = {"$ref": "#/$defs/n", "minimum": 5, "$defs": {"n": {"type": "integer"}}}
    check_schema(schema)
    assert is_valid(schema, 7)
    assert not is_valid(schema, 3)  # draft-07 would ignore `minimum` beside `$ref`
    assert not is_valid(schema, "x")


def test_recursive_schemas_through_the_instance_validate() -> None:
    tree = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "children": {"items": {"$ref": "#"}}},
        "required": ["name"],
    }
    check_schema(tree)
    deep: dict[str, Any] = {"name": "leaf"}
    for depth in range(30):
        deep = {"name": f"n{depth}", "children": [deep]}
    assert is_valid(tree, deep)
    broken = {"name": "a", "children": [{"name": "b", "children": [{"nom": "c"}]}]}
    assert [p["path"] for p in validate(tree, broken)] == ["$.children[0].children[0].name"]


def test_pydantic_style_schemas_register() -> None:
    """What `model_json_schema()` writes: `$defs`, `$ref` with a description beside it,
    `anyOf` for optional fields, titles."""
    schema = {
        "$defs": {
            "Owner": {
                "properties": {"login": {"title": "Login", "type": "string"}},
                "required": ["login"],
                "title": "Owner",
                "type": "object",
            }
        },
        "properties": {
            "owner": {"$ref": "#/$defs/Owner", "description": "who owns it"},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        "required": ["owner"],
        "title": "Args",
        "type": "object",
    }
    check_schema(schema)
    assert is_valid(schema, {"owner": {"login": "octo"}, "limit": None})
    assert [p["path"] for p in validate(schema, {"owner": {}})] == ["$.owner.login"]


def test_annotations_are_accepted_and_format_is_not_enforced() -> None:
    schema = {
        "type": "string",
        "format": "email",
        "description": "d",
        "default": "x",
        "examples": ["a@b.c"],
        "deprecated": False,
        "$comment": "c",
    }
    check_schema(schema)
    assert is_valid(schema, "not an email")


def test_the_memory_tools_schemas_are_accepted() -> None:
    # The memory core defines them (pydantic); the gateway validates calls with them.
    for tool in MEMORY_TOOLS.values():
        check_schema(tool.input_schema())


# --- call-time problems (the shape clients see in details.problems) ----------------------


def test_types() -> None:
    assert is_valid({"type": "integer"}, 3)
    assert is_valid({"type": "integer"}, 3.0)  # JSON Schema: a whole number is an integer
    assert not is_valid({"type": "integer"}, 3.5)
    assert not is_valid({"type": "integer"}, True)  # booleans are not numbers
    assert is_valid({"type": "number"}, 3)
    assert not is_valid({"type": "number"}, False)
    assert is_valid({"type": ["string", "null"]}, None)
    assert not is_valid({"type": "object"}, [])
    assert [(p["path"], p["problem"]) for p in validate({"type": "string"}, 5)] == [
        ("$", "must be string")
    ]


def test_enum_and_const_use_json_equality() -> None:
    assert is_valid({"enum": [1, "a"]}, 1.0)
    assert not is_valid({"enum": [1]}, True)
    assert not is_valid({"const": False}, 0)
    assert is_valid({"const": {"a": [1, None]}}, {"a": [1.0, None]})


def test_objects_report_each_failing_property_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 2},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
            "nested": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}},
            "id": {"type": "integer"},
        },
        "required": ["name", "id"],
        "additionalProperties": False,
    }
    value = {"name": "a", "tags": ["x", 1, "z"], "nested": {"n": -1}, "weird key": 1}
    check_schema(schema)
    paths = {p["path"] for p in validate(schema, value)}
    assert paths == {"$.id", "$.name", "$.tags", "$.tags[1]", "$.nested.n", "$['weird key']"}
    messages = {p["path"]: p["problem"] for p in validate(schema, value)}
    assert messages["$.id"] == "is required"
    assert messages["$['weird key']"] == "is not an allowed property"


def test_problem_list_is_bounded() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    assert len(validate(schema, list(range(1000)))) == MAX_PROBLEMS


def test_compiled_validators_are_reused_by_identity_and_by_content() -> None:
    COMPILED.clear()
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}}
    check_schema(schema)
    first = COMPILED.get(schema)
    assert COMPILED.get(schema) is first
    # The same schema read again from KV (another dict) finds the same compiled validator.
    assert (
        COMPILED.get({"properties": {"a": {"pattern": "^x", "type": "string"}}, "type": "object"})
        is first
    )


# --- differential check against the reference implementation (test-only dependency) -------

jsonschema = pytest.importorskip("jsonschema")

_strings = st.sampled_from(["", "a", "ab", "abc", "é", "A1", "x-y", "1"])
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([0.5, -1.5, 2.0]),
    _strings,
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c", "x1"]), inner, max_size=3),
    ),
    max_leaves=8,
)
_type_names = st.sampled_from(["null", "boolean", "object", "array", "number", "string", "integer"])
_names = st.sampled_from(["a", "b", "c"])
_patterns = st.sampled_from(["^a", "b", "^[a-z]+$", "\\d", "^.{2}$", "^x"])
_DEFS = {
    "short": {"type": "string", "maxLength": 1},
    "small": {"type": "integer", "maximum": 2},
    "pair": {"type": "array", "minItems": 2, "maxItems": 2},
}


def _schemas() -> st.SearchStrategy[Any]:
    def node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        keywords: dict[str, st.SearchStrategy[Any]] = {
            "type": st.one_of(
                _type_names, st.lists(_type_names, min_size=1, max_size=3, unique=True)
            ),
            "properties": st.dictionaries(_names, children, max_size=3),
            "patternProperties": st.dictionaries(_patterns, children, max_size=2),
            "propertyNames": children,
            "required": st.lists(_names, unique=True, max_size=3),
            "additionalProperties": children,
            "minProperties": st.integers(0, 3),
            "maxProperties": st.integers(0, 3),
            "items": children,
            "contains": children,
            "uniqueItems": st.booleans(),
            "enum": st.lists(_json, min_size=1, max_size=3),
            "const": _json,
            "minLength": st.integers(0, 3),
            "maxLength": st.integers(0, 3),
            "pattern": _patterns,
            "minItems": st.integers(0, 3),
            "maxItems": st.integers(0, 3),
            "minimum": st.integers(-3, 3),
            "maximum": st.sampled_from([-1, 0, 1.5, 3]),
            "exclusiveMinimum": st.integers(-3, 3),
            "exclusiveMaximum": st.integers(-3, 3),
            "multipleOf": st.sampled_from([1, 2, 0.5]),
            "anyOf": st.lists(children, min_size=1, max_size=3),
            "allOf": st.lists(children, min_size=1, max_size=2),
            "oneOf": st.lists(children, min_size=1, max_size=3),
            "not": children,
            "if": children,
            "then": children,
            "else": children,
            "$ref": st.sampled_from([f"#/$defs/{name}" for name in _DEFS]),
            "description": st.just("annotation"),
            "format": st.just("email"),
        }
        # A few keywords per subschema: drawing all of them every time is what is slow.
        chosen = st.lists(st.sampled_from(sorted(keywords)), max_size=4, unique=True)
        return chosen.flatmap(lambda names: st.fixed_dictionaries({k: keywords[k] for k in names}))

    return st.recursive(st.one_of(st.booleans(), node(st.booleans())), node, max_leaves=6)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(schema=_schemas(), instance=_json)
def test_agrees_with_jsonschema_draft_2020_12(schema: Any, instance: Any) -> None:
    if isinstance(schema, dict):
        schema = {**schema, "$defs": _DEFS}
    try:
        check_schema(schema)
    except UnsupportedSchemaError as exc:
        # fastjsonschema refuses a `required` name that `additionalProperties: false` forbids
        # (a schema no object can satisfy): refused at registration, so nothing to compare.
        assert "are required but not allowed" in str(exc), exc
        assume(False)
    expected = jsonschema.Draft202012Validator(schema).is_valid(instance)
    assert is_valid(schema, instance) == expected


_REF_SIBLINGS: dict[str, st.SearchStrategy[Any]] = {
    "type": _type_names,
    "minimum": st.integers(-1, 3),
    "maxLength": st.integers(0, 2),
    "pattern": _patterns,
    "enum": st.lists(_scalars, min_size=1, max_size=3),
    "not": st.sampled_from([{"type": "string"}, {"$ref": "#/$defs/small"}, True]),
    "anyOf": st.lists(st.sampled_from([{"$ref": f"#/$defs/{n}"} for n in _DEFS]), min_size=1),
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ref=st.sampled_from([f"#/$defs/{name}" for name in _DEFS]),
    siblings=st.lists(
        st.sampled_from(sorted(_REF_SIBLINGS)), min_size=1, max_size=2, unique=True
    ).flatmap(lambda names: st.fixed_dictionaries({k: _REF_SIBLINGS[k] for k in names})),
    instance=_json,
)
def test_refs_beside_other_keywords_agree_with_jsonschema(
    ref: str, siblings: dict[str, Any], instance: Any
) -> None:
    """2020-12 applies the keywords beside a `$ref`; draft-07 (fastjsonschema's) ignored
    them, which the gateway undoes: the oracle must agree where it matters most."""
    schema = {"$ref": ref, **siblings, "$defs": _DEFS}
    check_schema(schema)
    expected = jsonschema.Draft202012Validator(schema).is_valid(instance)
    assert is_valid(schema, instance) == expected
