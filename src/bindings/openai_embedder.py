"""An `Embedder` for any OpenAI-compatible `/embeddings` endpoint, over httpx (on Workers and
under CPython; a fresh `httpx.AsyncClient` per call, as Workers require).

* `POST {base_url}/embeddings` with `{"model", "input": [...], "encoding_format": "float"}`,
  at most 100 inputs per request, sequentially, rows re-ordered by each item's `index`.
* The result has shape `(len(texts), dimensions)`, float32, every row L2-normalised; a
  provider row of another length is an `EmbeddingError` (a vector of the wrong dimensions
  must never reach the vector index).
* Errors: 429 -> `EmbeddingRateLimitedError`; 503/529 -> `EmbeddingOverloadedError`; other
  4xx -> `EmbeddingBadRequestError`; httpx timeouts -> `EmbeddingTimeoutError`; other 5xx,
  connection failures and a body that is not the documented JSON -> `EmbeddingError`.
  Messages never contain the API key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from bindings.ports.embedder import (
    EmbeddingBadRequestError,
    EmbeddingConfig,
    EmbeddingError,
    EmbeddingOverloadedError,
    EmbeddingRateLimitedError,
    EmbeddingTimeoutError,
)

MAX_INPUTS_PER_REQUEST = 100
TIMEOUT_SECONDS = 30.0
_MAX_DETAIL_CHARS = 300


def _error_detail(response: httpx.Response) -> str:
    """The provider's error message (OpenAI: `{"error": {"message": ...}}`), shortened."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        detail = error["message"]
    elif isinstance(error, str):
        detail = error
    else:
        detail = response.text
    return " ".join(detail.split())[:_MAX_DETAIL_CHARS]


class OpenAIEmbedder:
    """Embeds texts with an OpenAI-compatible API. See the module docstring for the contract."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        dimensions: int,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if dimensions <= 0:
            raise ValueError("dimensions must be positive")
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key
        self._transport = transport
        self._config = EmbeddingConfig(provider="openai", model=model, dimensions=dimensions)

    @property
    def config(self) -> EmbeddingConfig:
        return self._config

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed `texts` in order; shape `(len(texts), dimensions)`, rows L2-normalised."""
        if not texts:
            return np.zeros((0, self._config.dimensions), dtype=np.float32)
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        rows: list[npt.NDArray[np.float32]] = []
        async with httpx.AsyncClient(transport=self._transport, timeout=TIMEOUT_SECONDS) as client:
            for start in range(0, len(texts), MAX_INPUTS_PER_REQUEST):
                batch = list(texts[start : start + MAX_INPUTS_PER_REQUEST])
                payload = {"model": self._config.model, "input": batch, "encoding_format": "float"}
                try:
                    response = await client.post(self._url, json=payload, headers=headers)
                except httpx.TimeoutException as exc:
                    raise EmbeddingTimeoutError(
                        f"embedding request to {self._url} timed out ({type(exc).__name__})"
                    ) from exc
                except httpx.HTTPError as exc:
                    raise EmbeddingError(
                        f"could not reach the embedding provider at {self._url}: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
                self._raise_for_status(response)
                rows.append(self._parse(response, len(batch)))
        return np.concatenate(rows, axis=0)

    def _raise_for_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        what = f"embedding provider answered HTTP {status} for model {self._config.model!r}"
        detail = _error_detail(response)
        message = f"{what}: {detail}" if detail else what
        if status == 429:
            raise EmbeddingRateLimitedError(message)
        if status in (503, 529):
            raise EmbeddingOverloadedError(message)
        if status < 500:
            raise EmbeddingBadRequestError(message)
        raise EmbeddingError(message)

    def _parse(self, response: httpx.Response, expected: int) -> npt.NDArray[np.float32]:
        dims = self._config.dimensions
        try:
            body: Any = response.json()
        except ValueError as exc:
            raise EmbeddingError(
                f"embedding provider returned a body that is not JSON (HTTP "
                f"{response.status_code}): {response.text[:_MAX_DETAIL_CHARS]!r}"
            ) from exc
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise EmbeddingError("embedding response has no `data` list")
        if len(data) != expected:
            raise EmbeddingError(f"embedding response has {len(data)} rows for {expected} inputs")
        out = np.empty((expected, dims), dtype=np.float32)
        seen: set[int] = set()
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise EmbeddingError(f"embedding response row {position} is not an object")
            index = item.get("index", position)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < expected:
                raise EmbeddingError(f"embedding response row has an invalid index {index!r}")
            if index in seen:
                raise EmbeddingError(f"embedding response repeats index {index}")
            seen.add(index)
            vector = item.get("embedding")
            if not isinstance(vector, list):
                raise EmbeddingError(
                    f"embedding response row {index} has no float `embedding` list "
                    "(base64 encoding is not supported)"
                )
            if len(vector) != dims:
                raise EmbeddingError(
                    f"model {self._config.model!r} returned {len(vector)} dimensions, expected "
                    f"{dims}; fix the configured dimensions (vectors of another size cannot "
                    "share the index)"
                )
            try:
                out[index] = np.asarray(vector, dtype=np.float32)
            except (TypeError, ValueError) as exc:
                raise EmbeddingError(
                    f"embedding response row {index} holds non-numeric values"
                ) from exc
        if not np.all(np.isfinite(out)):
            raise EmbeddingError("embedding response holds non-finite values")
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        if np.any(norms == 0):
            raise EmbeddingError("embedding response holds an all-zero vector")
        normalised: npt.NDArray[np.float32] = (out / norms).astype(np.float32)
        return normalised
