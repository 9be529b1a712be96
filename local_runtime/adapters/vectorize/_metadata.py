"""Vectorize's metadata rules: limits, the `MetadataIndex` declaration and value handling.

Pure functions over JSON-like values (no numpy, no state): which keys a vector's metadata
may hold, which property names an index or a filter may name, what a metadata index of a
given type stores for a value (strings cut to 64 UTF-8 bytes, numbers as floats, booleans),
and the compact JSON Cloudflare measures sizes with.
"""

from __future__ import annotations

import json
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict

from bindings.ports.errors import BindingLimitError

# metadata-filtering.mdx / limits.mdx
VECTORIZE_MAX_METADATA_INDEXES = 10
VECTORIZE_MAX_INDEXED_STRING_BYTES = 64
VECTORIZE_MAX_FILTER_KEY_CHARS = 512

MetadataIndexType = Literal["string", "number", "boolean"]
INDEX_TYPES: tuple[str, ...] = ("string", "number", "boolean")

Scalar = str | int | float | bool | None


class MetadataIndex(BaseModel):
    """A metadata index: `wrangler vectorize create-metadata-index --property-name --type`."""

    model_config = ConfigDict(frozen=True)

    property: str
    type: MetadataIndexType


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def truncate_indexed(text: str) -> str:
    """The first 64 bytes of `text`, cut to the longest well-formed UTF-8 prefix."""
    raw = text.encode("utf-8")
    if len(raw) <= VECTORIZE_MAX_INDEXED_STRING_BYTES:
        return text
    # errors="ignore" drops only the partial character at the cut; the prefix is valid.
    return raw[:VECTORIZE_MAX_INDEXED_STRING_BYTES].decode("utf-8", errors="ignore")


def is_number(value: object) -> bool:
    # JSON booleans are not numbers, although Python's bool subclasses int.
    return isinstance(value, int | float) and not isinstance(value, bool)


def compact_json(value: object) -> str:
    # JS JSON.stringify: no spaces, non-ASCII kept as is.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def is_valid_property(prop: object) -> bool:
    """Whether `prop` may name a metadata index or a filter key (dotted for nested keys)."""
    return (
        isinstance(prop, str)
        and bool(prop)
        and '"' not in prop
        and not prop.startswith("$")
        and len(prop) <= VECTORIZE_MAX_FILTER_KEY_CHARS
        and all(part for part in prop.split("."))
    )


def lookup_path(metadata: dict[str, Any], dotted: str) -> object:
    node: object = metadata
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """{"a.b": 1, "c": 2} -> {"a": {"b": 1}, "c": 2}."""
    out: dict[str, Any] = {}
    for dotted, value in flat.items():
        parts = dotted.split(".")
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return out


def indexed_value(index_type: str, value: object) -> Scalar:
    """What a metadata index of `index_type` stores for `value` (None: not indexed)."""
    if index_type == "string":
        return truncate_indexed(value) if isinstance(value, str) else None
    if index_type == "number":
        return float(cast(float, value)) if is_number(value) else None
    return value if isinstance(value, bool) else None


def check_metadata_keys(node: dict[str, Any], op: str, vector_id: str) -> None:
    for key, value in node.items():
        if not isinstance(key, str) or not key or "." in key or '"' in key or key.startswith("$"):
            raise BindingLimitError(
                f"VECTOR_{op}_ERROR: invalid metadata key {key!r} for vector id={vector_id!r}: "
                'keys cannot be empty, contain "." or \'"\', or start with "$"'
            )
        if isinstance(value, dict):
            check_metadata_keys(value, op, vector_id)
