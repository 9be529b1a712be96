"""The cold tier on disk: `LocalObjectStore` implements `bindings.ports.object_store.ObjectStore`
under the state folder's `cold/`, standing in for the R2 bucket `COLD`.

A key's `/`-separated segments become directories (browsable and `zcat`-able as R2 lists them),
each percent-encoded (all but letters, digits and `-_.~=+,`; `.`/`..` with encoded dots, an empty
segment as `@`), so any key maps to one path inside the root. An object is `<segment>@o` (the
bytes) and `<segment>@m.json` (size, etag, upload time, custom metadata); `@` never occurs in an
encoded segment, so keys `a` and `a/b` do not collide. Kept from R2: atomic writes (temporary
file, then rename), `list` in UTF-8 byte order with an opaque cursor and at most 1000 keys a
page, deletes of missing keys ignored, etag = MD5 of the bytes, the documented limits. Metadata
whose etag does not match the bytes (a crash between the two renames) is ignored. One local
limit: an encoded segment over 240 bytes cannot be a file name and raises `BindingLimitError`.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import quote, unquote

from bindings.ports.clock import Clock, SystemClock
from bindings.ports.errors import BindingLimitError
from bindings.ports.object_store import (
    OBJECT_STORE_MAX_LIST_LIMIT,
    ObjectBody,
    ObjectInfo,
    ObjectList,
    check_custom_metadata,
    check_key,
)

DATA_SUFFIX = "@o"
META_SUFFIX = "@m.json"
EMPTY_SEGMENT = "@"
MAX_ENCODED_SEGMENT = 240
_SAFE = "-_.~=+,"


def encode_segment(segment: str) -> str:
    if segment == "":
        return EMPTY_SEGMENT
    encoded = quote(segment, safe=_SAFE)
    if encoded in (".", ".."):
        encoded = encoded.replace(".", "%2E")
    if len(encoded.encode("ascii")) > MAX_ENCODED_SEGMENT:
        raise BindingLimitError(
            f"the local object store cannot hold a key segment of {len(encoded)} encoded "
            f"bytes (file names are limited); R2 itself would accept it"
        )
    return encoded


def decode_segment(encoded: str) -> str:
    return "" if encoded == EMPTY_SEGMENT else unquote(encoded)


def _encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii")


def _decode_cursor(cursor: str) -> str:
    try:
        return base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise BindingLimitError("list cursor is not one this bucket returned") from None


class LocalObjectStore:
    """An R2-like bucket in a directory."""

    def __init__(self, root: Path | str, *, clock: Clock | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._clock = clock or SystemClock()

    # --- paths ----------------------------------------------------------------------

    def _paths(self, key: str) -> tuple[Path, Path]:
        segments = [encode_segment(s) for s in check_key(key).split("/")]
        directory = self.root.joinpath(*segments[:-1])
        return directory / (segments[-1] + DATA_SUFFIX), directory / (segments[-1] + META_SUFFIX)

    @staticmethod
    def _write_atomically(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    # --- the port -------------------------------------------------------------------

    async def put(
        self, key: str, data: bytes, *, custom_metadata: Mapping[str, str] | None = None
    ) -> ObjectInfo:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError("object data must be bytes")
        payload = bytes(data)
        metadata = check_custom_metadata(custom_metadata)
        data_path, meta_path = self._paths(key)
        info = ObjectInfo(
            key=key,
            size=len(payload),
            etag=hashlib.md5(payload, usedforsecurity=False).hexdigest(),
            uploaded_ms=int(self._clock.now() * 1000),
            custom_metadata=metadata,
        )
        # Metadata first (it names the etag of the bytes it belongs to), then the bytes:
        # a crash in between leaves the old bytes with metadata that `_info` rejects.
        self._write_atomically(meta_path, json.dumps(dataclasses.asdict(info)).encode("utf-8"))
        self._write_atomically(data_path, payload)
        return info

    async def get(self, key: str) -> ObjectBody | None:
        data_path, meta_path = self._paths(key)
        try:
            payload = data_path.read_bytes()
        except FileNotFoundError:
            return None
        info = self._info(key, payload, meta_path)
        return ObjectBody(**dataclasses.asdict(info), data=payload)

    def _info(self, key: str, payload: bytes, meta_path: Path) -> ObjectInfo:
        etag = hashlib.md5(payload, usedforsecurity=False).hexdigest()
        try:
            stored = ObjectInfo(**json.loads(meta_path.read_bytes()))
        except (FileNotFoundError, ValueError, TypeError):
            stored = None  # missing or malformed (we write it, so only a damaged file)
        if stored is None or stored.etag != etag:
            return ObjectInfo(key=key, size=len(payload), etag=etag)
        return dataclasses.replace(stored, key=key, size=len(payload))

    async def list(
        self,
        *,
        prefix: str = "",
        cursor: str | None = None,
        limit: int = OBJECT_STORE_MAX_LIST_LIMIT,
    ) -> ObjectList:
        if not 1 <= limit <= OBJECT_STORE_MAX_LIST_LIMIT:
            raise BindingLimitError(
                f"list limit must be between 1 and {OBJECT_STORE_MAX_LIST_LIMIT}, got {limit}"
            )
        after = _decode_cursor(cursor) if cursor else None
        keys = self.keys(prefix)
        if after is not None:
            after_bytes = after.encode("utf-8")
            keys = [k for k in keys if k.encode("utf-8") > after_bytes]
        page = keys[:limit]
        objects: list[ObjectInfo] = []
        for key in page:
            data_path, meta_path = self._paths(key)
            try:
                payload = data_path.read_bytes()
            except FileNotFoundError:  # deleted while listing
                continue
            objects.append(self._info(key, payload, meta_path))
        truncated = len(keys) > limit
        return ObjectList(
            objects=objects,
            truncated=truncated,
            cursor=_encode_cursor(page[-1]) if truncated and page else None,
        )

    async def delete(self, keys: str | Sequence[str]) -> None:
        for key in [keys] if isinstance(keys, str) else list(keys):
            data_path, meta_path = self._paths(key)
            data_path.unlink(missing_ok=True)
            meta_path.unlink(missing_ok=True)

    # --- local helpers (tests, CLI) -------------------------------------------------

    def keys(self, prefix: str = "") -> builtins.list[str]:
        """Every key under `prefix`, in order (no paging)."""
        # Walk only the directory the prefix's complete segments name (temporary files,
        # `.tmp-*`, never end in DATA_SUFFIX).
        start = self.root.joinpath(*[encode_segment(s) for s in prefix.split("/")[:-1]])
        found: builtins.list[str] = []
        for dirpath, _, filenames in os.walk(start):
            base = [decode_segment(part) for part in Path(dirpath).relative_to(self.root).parts]
            found += [
                "/".join([*base, decode_segment(name.removesuffix(DATA_SUFFIX))])
                for name in filenames
                if name.endswith(DATA_SUFFIX)
            ]
        return sorted((k for k in found if k.startswith(prefix)), key=lambda k: k.encode("utf-8"))

    def __repr__(self) -> str:
        return f"LocalObjectStore({str(self.root)!r})"
