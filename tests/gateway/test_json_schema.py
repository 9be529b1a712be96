"""The gateway's JSON-schema subset: what it accepts at registration and how it validates."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.json_schema import UnsupportedSchemaError, check_schema, is_valid, validate


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"$ref": "#/$defs/x"}, "'$ref' is not supported"),
        ({"anyOf": [{"type": "string"}]}, "'anyOf' is not supported"),
        ({"type": "string", "pattern": "^a"}, "'pattern' is not supported"),
        ({"type": "object", "properties": {"a": {"uniqueItems": True}}}, "#/properties/a"),
        ({"type": "str"}, "#/type"),
        ({"type": ["string", "string"]}, "#/type"),
        ({"minLength": -1}, "#/minLength: must be a non-negative integer"),
        ({"maximum": "10"}, "#/maximum: must be a number"),
        ({"items": [{"type": "string"}]}, "tuple"),
        ({"required": "a"}, "#/required"),
        ({"enum": []}, "#/enum"),
        ({"properties": []}, "#/properties"),
        ("object", "a schema must be an object or a boolean"),
    ],
)
def test_check_schema_names_what_is_unsupported(schema: Any, fragment: str) -> None:
    with pytest.raises(UnsupportedSchemaError) as caught:
        check_schema(schema)
    assert fragment in str(caught.value)


def test_check_schema_reports_every_problem_at_once() -> None:
    with pytest.raises(UnsupportedSchemaError) as caught:
        check_schema({"oneOf": [], "properties": {"a": {"not": {}}, "b": {"minItems": 1.5}}})
    assert len(caught.value.problems) == 3


def test_check_schema_refuses_absurd_nesting() -> None:
    schema: dict[str, Any] = {"type": "array"}
    for _ in range(40):
        schema = {"type": "array", "items": schema}
    with pytest.raises(UnsupportedSchemaError, match="deeper"):
        check_schema(schema)


def test_annotations_are_accepted_but_format_is_not_enforced() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "string",
        "format": "email",
        "description": "d",
        "default": "x",
        "examples": ["a@b.c"],
    }
    check_schema(schema)
    assert is_valid(schema, "not an email")


def test_types() -> None:
    assert is_valid({"type": "integer"}, 3)
    assert is_valid({"type": "integer"}, 3.0)  # JSON Schema: a whole number is an integer
    assert not is_valid({"type": "integer"}, 3.5)
    assert not is_valid({"type": "integer"}, True)  # booleans are not numbers
    assert is_valid({"type": "number"}, 3)
    assert not is_valid({"type": "number"}, False)
    assert is_valid({"type": ["string", "null"]}, None)
    assert not is_valid({"type": "object"}, [])
    assert [p.message for p in validate({"type": "string"}, 5)] == ["expected string, got integer"]


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
        },
        "required": ["name", "id"],
        "additionalProperties": False,
    }
    value = {"name": "a", "tags": ["x", 1, "z"], "nested": {"n": -1}, "weird key": 1}
    problems = {(p.path, p.message) for p in validate(schema, value)}
    assert problems == {
        ("$.id", "is required"),
        ("$.name", "shorter than 2 characters"),
        ("$.tags", "more than 2 items"),
        ("$.tags[1]", "expected string, got integer"),
        ("$.nested.n", "less than the minimum 0"),
        ("$['weird key']", "is not an allowed property"),
    }


def test_additional_properties_schema_and_boolean_subschemas() -> None:
    schema = {
        "type": "object",
        "properties": {"ok": True, "never": False},
        "additionalProperties": {"type": "integer"},
    }
    assert is_valid(schema, {"ok": [1], "extra": 2})
    assert not is_valid(schema, {"extra": "x"})
    assert not is_valid(schema, {"never": 1})


def test_problem_list_is_bounded() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    assert len(validate(schema, list(range(1000)))) == 20


# --- differential check against the reference implementation (test-only dependency) -------

jsonschema = pytest.importorskip("jsonschema")

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([0.5, -1.5, 2.0]),
    st.sampled_from(["", "a", "ab", "abc", "é"]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    ),
    max_leaves=8,
)
_type_names = st.sampled_from(["null", "boolean", "object", "array", "number", "string", "integer"])


def _schemas() -> st.SearchStrategy[Any]:
    def node(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        keywords = st.fixed_dictionaries(
            {},
            optional={
                "type": st.one_of(
                    _type_names, st.lists(_type_names, min_size=1, max_size=3, unique=True)
                ),
                "properties": st.dictionaries(
                    st.sampled_from(["a", "b", "c"]), children, max_size=3
                ),
                "required": st.lists(st.sampled_from(["a", "b", "c"]), unique=True, max_size=3),
                "additionalProperties": children,
                "items": children,
                "enum": st.lists(_json, min_size=1, max_size=3),
                "const": _json,
                "minLength": st.integers(0, 3),
                "maxLength": st.integers(0, 3),
                "minItems": st.integers(0, 3),
                "maxItems": st.integers(0, 3),
                "minimum": st.integers(-3, 3),
                "maximum": st.sampled_from([-1, 0, 1.5, 3]),
                "exclusiveMinimum": st.integers(-3, 3),
                "exclusiveMaximum": st.integers(-3, 3),
                "description": st.just("annotation"),
            },
        )
        return keywords

    return st.recursive(st.one_of(st.booleans(), node(st.booleans())), node, max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_schemas(), instance=_json)
def test_agrees_with_jsonschema_draft_2020_12(schema: Any, instance: Any) -> None:
    check_schema(schema)
    expected = jsonschema.Draft202012Validator(schema).is_valid(instance)
    assert is_valid(schema, instance) == expected
