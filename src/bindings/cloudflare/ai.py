"""`bindings.ports.embedder.Embedder` over the Workers AI binding (`env.AI`).

Docs: workers-ai-models/bge-{small,base,large}-en-v1.5.json (input `{text, pooling}`,
output `{shape, data, pooling}`, at most 100 texts per call), workers-ai/platform/errors.

Pooling is pinned to **cls**. The model schema says cls "will generate more accurate
embeddings on larger inputs" and that Cloudflare "highly suggest[s] using the new cls
pooling", and BAAI's own sentence-transformers config for bge uses the CLS token; `mean`
is only the default for backwards compatibility. cls and mean vectors are not comparable,
so the pooling is part of `config.model` (`@cf/baai/bge-small-en-v1.5#pooling=cls`):
vectors written with one pooling are never queried with the other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from bindings.cloudflare import ffi
from bindings.ports.embedder import (
    EmbeddingBadRequestError,
    EmbeddingConfig,
    EmbeddingError,
    EmbeddingOverloadedError,
    EmbeddingRateLimitedError,
    EmbeddingTimeoutError,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

BGE_SMALL = "@cf/baai/bge-small-en-v1.5"
BGE_DIMENSIONS = {
    "@cf/baai/bge-small-en-v1.5": 384,
    "@cf/baai/bge-base-en-v1.5": 768,
    "@cf/baai/bge-large-en-v1.5": 1024,
}
MAX_TEXTS_PER_CALL = 100
Pooling = Literal["cls", "mean"]
DEFAULT_POOLING: Pooling = "cls"

# Internal codes from workers-ai/platform/errors (the message reads "3040: ...").
_RATE_LIMITED = {3036}  # account limited (daily allocation used up)
_OVERLOADED = {3040}  # out of capacity: no more data centers to forward to
_TIMEOUT = {3007, 3008}  # request timeout / aborted
_BAD_REQUEST = {5007, 5004, 3039, 3003, 5018, 5016, 3023, 3041, 5019, 5005, 3042, 3006}
_CODE = re.compile(r"(?<!\d)([35]\d{3}):")


class WorkersAIEmbedder:
    """Implements `Embedder` with a bge model on Workers AI; rows are L2-normalised."""

    def __init__(
        self,
        ai: Any,
        model: str = BGE_SMALL,
        dimensions: int = 384,
        pooling: Pooling = DEFAULT_POOLING,
    ) -> None:
        expected = BGE_DIMENSIONS.get(model)
        if expected is not None and expected != dimensions:
            raise ValueError(f"{model} produces {expected}-dimensional vectors, not {dimensions}")
        self._ai = ai
        self._raw = ffi.is_raw(ai)
        self._model = model
        self._pooling = pooling
        self._config = EmbeddingConfig(
            provider="workers-ai", model=f"{model}#pooling={pooling}", dimensions=dimensions
        )

    @property
    def config(self) -> EmbeddingConfig:
        return self._config

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """`embed_rows` as the port's float32 array (numpy is imported here, not at module
        level, so the adapter loads where numpy does not: tests/pyodide runs it in bare
        Pyodide)."""
        import numpy as np

        rows = await self.embed_rows(texts)
        if not rows:
            return np.zeros((0, self._config.dimensions), dtype=np.float32)
        return np.asarray(rows, dtype=np.float32)

    async def embed_rows(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector (a plain list) per text, in order.

        Refuses, before any call, what bge models reject: an empty text (Workers AI fails
        the whole batch without naming the text), with `EmbeddingBadRequestError` naming
        the positions.
        """
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        items = list(texts)
        if any(not isinstance(text, str) for text in items):
            raise TypeError("embed() takes strings only")
        empty = [index for index, text in enumerate(items) if not text]
        if empty:
            raise EmbeddingBadRequestError(
                f"Workers AI {self._model} rejects empty texts; the texts at positions "
                f"{empty} are empty"
            )
        rows: list[list[float]] = []
        for start in range(0, len(items), MAX_TEXTS_PER_CALL):
            rows.extend(await self._embed_batch(items[start : start + MAX_TEXTS_PER_CALL]))
        return [_normalised(row) for row in rows]

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        inputs = {"text": batch, "pooling": self._pooling}
        try:
            response = ffi.to_py(await self._ai.run(self._model, ffi.to_js_arg(inputs, self._raw)))
        except ffi.JsException as exc:
            raise _ai_error(exc) from exc
        if not isinstance(response, dict) or not isinstance(response.get("data"), list):
            raise EmbeddingError(f"Workers AI returned no embeddings for {self._model}")
        pooling = response.get("pooling")
        if pooling is not None and pooling != self._pooling:
            raise EmbeddingError(f"asked for {self._pooling} pooling, got {pooling}")
        data = response["data"]
        if len(data) != len(batch):
            raise EmbeddingError(f"sent {len(batch)} texts, got {len(data)} embeddings")
        rows = []
        for row in data:
            values = [float(v) for v in row]
            if len(values) != self._config.dimensions:
                raise EmbeddingError(
                    f"expected {self._config.dimensions} dimensions, got {len(values)}"
                )
            rows.append(values)
        return rows


def _normalised(row: list[float]) -> list[float]:
    norm = math.sqrt(math.fsum(value * value for value in row))
    if not math.isfinite(norm) or norm == 0:
        raise EmbeddingError("Workers AI returned a zero or non-finite embedding")
    return [value / norm for value in row]


def _ai_error(exc: BaseException) -> EmbeddingError:
    message = f"Workers AI: {ffi.error_message(exc)}"
    found = _CODE.search(ffi.error_message(exc))
    code = int(found.group(1)) if found else None
    lowered = message.lower()
    if code in _RATE_LIMITED or "rate limit" in lowered or "too many requests" in lowered:
        return EmbeddingRateLimitedError(message)
    if code in _OVERLOADED or "capacity" in lowered or "overloaded" in lowered:
        return EmbeddingOverloadedError(message)
    if code in _TIMEOUT or "timeout" in lowered or "timed out" in lowered:
        return EmbeddingTimeoutError(message)
    if code in _BAD_REQUEST:
        return EmbeddingBadRequestError(message)
    return EmbeddingError(message)
