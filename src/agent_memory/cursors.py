"""Opaque pagination cursors: a small JSON value in unpadded base64url; a cursor this code
did not produce raises `InvalidCursorError` (422 `invalid_cursor`).

A cursor's numbers are bound into SQL, so an integer beyond `MAX_STORED_INT` (which D1
would refuse as a BigInt) makes the cursor one this code did not produce."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from http_messages import MAX_STORED_INT, CodedError


class InvalidCursorError(CodedError, ValueError):
    """A pagination cursor that this API did not produce."""

    status, code = 422, "invalid_cursor"


def encode_cursor_value(value: Any) -> str:
    """`value` (JSON-serialisable) as an opaque, URL-safe cursor."""
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode("ascii")


def _stored_int(text: str) -> int:
    value = int(text)
    if not -MAX_STORED_INT <= value <= MAX_STORED_INT:
        raise InvalidCursorError("cursor is not one this API returned")
    return value


def decode_cursor_value(cursor: str) -> Any:
    """The value `encode_cursor_value` wrapped; `InvalidCursorError` for anything else
    (also for an integer storage could not bind: module docstring)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return json.loads(raw, parse_int=_stored_int)
    except (binascii.Error, ValueError, TypeError):
        raise InvalidCursorError("cursor is not one this API returned") from None


def decode_pair(cursor: str, number: str, text: str) -> tuple[int, str]:
    """The (int, str) under keys `number` and `text` of a cursor wrapping such an object."""
    value = decode_cursor_value(cursor)
    found = (value.get(number), value.get(text)) if isinstance(value, dict) else (None, None)
    if type(found[0]) is not int or not isinstance(found[1], str):  # (a bool is no int)
        raise InvalidCursorError("cursor is not one this API returned")
    return found[0], found[1]
