"""Local stand-in for a Cloudflare Vectorize index: numpy cosine search over SQLite.

Vectorize has no local simulator (`wrangler dev` only binds it remotely), so this adapter
and `tests/contracts/test_vectorize_contract.py` are the local specification. Behaviour
follows the Cloudflare docs (cloudflare-docs `src/content/docs/vectorize/`:
`reference/client-api.mdx`, `reference/metadata-filtering.mdx`, `platform/limits.mdx`,
`best-practices/insert-vectors.mdx`):

* Ids are unique per *index*, not per namespace: `getByIds`/`deleteByIds` take no
  namespace, and insert-vectors.mdx says "if the same vector id is inserted twice in a
  Vectorize index, the index would reflect the vector that was added first". So `insert`
  skips an id that exists in any namespace, and `upsert` replaces the whole vector
  (values, metadata *and* namespace).
* Values are stored and returned as float32 ("Vectorize stores and restitutes vector
  dimensions as Float32").
* A query with a namespace searches only that namespace; a query without one searches the
  whole index (namespaces are a pre-filter, insert-vectors.mdx "Namespaces").
* Filters: implicit `$eq`, `$eq $ne $in $nin $lt $lte $gt $gte`; dotted keys address nested
  metadata; the compact JSON must be < 2048 bytes; a range may combine one lower bound
  (`$gt`/`$gte`) with one upper bound (`$lt`/`$lte`) and nothing else; range operands are
  strings (ordered lexicographically) or numbers.
* Metadata indexes (`create_metadata_index`, like `wrangler vectorize
  create-metadata-index`): at most 10; types string/number/boolean. A vector is indexed on
  the properties whose index existed when it was written; vectors written earlier must be
  re-upserted. Only the first 64 bytes of a string are indexed (cut on a UTF-8 boundary);
  filter operands are cut the same way. `return_metadata="indexed"` returns only indexed
  properties, with strings cut to 64 bytes.

Deliberate, documented choices where Cloudflare's behaviour is undocumented:

* A filter naming a property **without a metadata index raises** `BindingLimitError`. The
  docs only say a metadata index is needed to filter on a property; Cloudflare does not
  reject such a query (it simply cannot use the property), so the real service would give
  silently empty or wrong results. Failing loudly here catches the missing
  `wrangler vectorize create-metadata-index` before deployment.
* A vector without an indexed value for a property (absent, null, a value of another type
  than the index, or written before the index existed) is treated as **null**:
  `{"p": None}` / `{"p": {"$in": [None]}}` match it, `$ne` / `$nin` with a non-null operand
  match it, `$eq` and ranges do not. (Unverified against Cloudflare: callers that filter
  with `$ne`/`$nin` should write an explicit value on every vector to be safe either way.)
* Zero vectors (cosine undefined) and non-finite values are rejected on write and on query.
* Empty namespace names (`""`) are rejected; `None` means "no namespace".
* `VectorMutation.count` is the number of vectors actually written (insert: new ids only)
  or actually deleted. Writes are visible immediately (Cloudflare: after a few seconds).

Storage: one SQLite file (or in-memory database) holds the vectors as float32 blobs with
their metadata JSON; in memory each namespace keeps a float32 matrix, inverse norms and one
column per metadata index (dictionary-encoded strings, float64 numbers, booleans) so a query
is one matrix-vector product, vectorised masks and an `argpartition`.

Layout: `_index` (`LocalVectorIndex`, the binding) over `_validation` (arguments checked
against the limits), `_store` (the SQLite file), `_partition` (one namespace's matrix),
`_filters` (filter compiler and evaluator), `_columns` (metadata indexes and their columns)
and `_metadata` (value rules and limits).
"""

from local_runtime.adapters.vectorize._index import LocalVectorIndex
from local_runtime.adapters.vectorize._metadata import (
    VECTORIZE_MAX_FILTER_KEY_CHARS,
    VECTORIZE_MAX_INDEXED_STRING_BYTES,
    VECTORIZE_MAX_METADATA_INDEXES,
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
