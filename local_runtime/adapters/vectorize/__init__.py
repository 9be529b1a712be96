"""Local stand-in for a Cloudflare Vectorize index (the package's public names)."""

from local_runtime.adapters.vectorize._index import (
    VECTORIZE_MAX_FILTER_KEY_CHARS,
    VECTORIZE_MAX_INDEXED_STRING_BYTES,
    VECTORIZE_MAX_METADATA_INDEXES,
    LocalVectorIndex,
    MetadataIndex,
    MetadataIndexType,
)

__all__ = [
    "VECTORIZE_MAX_FILTER_KEY_CHARS",
    "VECTORIZE_MAX_INDEXED_STRING_BYTES",
    "VECTORIZE_MAX_METADATA_INDEXES",
    "LocalVectorIndex",
    "MetadataIndex",
    "MetadataIndexType",
]
