"""Identifiers and content hashes.

ULIDs: 26 Crockford base32 characters, 48-bit millisecond timestamp then 80 random bits, so
ids sort by creation time (useful for cursors) and are unique without coordination. They
are generated per call, never at import time (Workers snapshots forbid entropy in globals).
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_PATTERN = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def new_ulid(now_seconds: float) -> str:
    """A new ULID for time `now_seconds` (epoch seconds, from the Clock port)."""
    millis = int(now_seconds * 1000)
    if not 0 <= millis < 2**48:
        raise ValueError(f"timestamp out of ULID range: {now_seconds}")
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def ulid_time_ms(ulid: str) -> int:
    """The millisecond timestamp a ULID was minted at."""
    value = 0
    for char in ulid[:10]:
        value = value * 32 + _CROCKFORD.index(char)
    return value


def is_ulid(value: str) -> bool:
    return bool(ULID_PATTERN.fullmatch(value))


def normalize_content(text: str) -> str:
    """Canonical form for hashing: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def content_hash(text: str) -> str:
    """SHA-256 (hex) of the normalised content: equal for trivially different spellings."""
    return hashlib.sha256(normalize_content(text).encode("utf-8")).hexdigest()


def sha256_hex(data: str | bytes) -> str:
    """SHA-256 (hex) of exact bytes (no normalisation), e.g. for `memory_written` events."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()
