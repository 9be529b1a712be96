"""Opaque pagination cursors: a small JSON value in unpadded base64url; a cursor this code
did not produce raises `InvalidCursorError` (callers answer 422 `invalid_cursor`)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any


class InvalidCursorError(ValueError):
    """A pagination cursor that this API did not produce."""


def encode_cursor_value(value: Any) -> str:
    """`value` (JSON-serialisable) as an opaque, URL-safe cursor."""
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return base64.urlsafe_b64encode(raw.encode()).rstrip(b"=").decode("ascii")


def decode_cursor_value(cursor: str) -> Any:
    """The value `encode_cursor_value` wrapped; `InvalidCursorError` for anything else."""
    try:
        return json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError, TypeError):
        raise InvalidCursorError("cursor is not one this API returned") from None
