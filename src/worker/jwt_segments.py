"""The base64url segments of a JWT (RFC 7515 §2: URL-safe alphabet, no padding).

Both tokens the Worker reads — Cloudflare Access assertions (`worker.access`) and agent
memory tokens (`worker.memory_tokens`) — and the tokens the local runtime mints encode their
header, payload and signature this way. `decode_segment` refuses anything outside the
alphabet (the standard decoder would silently skip it) with `ValueError`; each caller turns
that into its own error.
"""

from __future__ import annotations

import base64
import binascii
import re

_SEGMENT = re.compile(r"[A-Za-z0-9_-]*")


def encode_segment(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def decode_segment(segment: str) -> bytes:
    if not _SEGMENT.fullmatch(segment):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError):
        raise ValueError("not base64url") from None
