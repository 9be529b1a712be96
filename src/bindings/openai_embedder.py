"""An `Embedder` for an OpenAI-compatible `/embeddings` endpoint (a fresh httpx client per
call, as Workers require): ≤ 100 inputs a request, rows by `index`, L2-normalised float32, other
dimensions refused. 429 → rate limited, 503/529 → overloaded, other 4xx → bad request,
timeouts → timeout, anything else `EmbeddingError`; never with the API key.
"""

from __future__ import annotations

from collections.abc import Sequence

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
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    detail = error.get("message") if isinstance(error, dict) else error
    text = detail if isinstance(detail, str) else response.text
    return " ".join(text.split())[:_MAX_DETAIL_CHARS]


class OpenAIEmbedder:
    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        dimensions: int,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key
        self._transport = transport
        self._config = EmbeddingConfig(provider="openai", model=model, dimensions=dimensions)

    @property
    def config(self) -> EmbeddingConfig:
        return self._config

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
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
        message = f"embedding provider answered HTTP {status} for model {self._config.model!r}"
        if detail := _error_detail(response):
            message += f": {detail}"
        kind: type[EmbeddingError] = EmbeddingError
        if status == 429:
            kind = EmbeddingRateLimitedError
        elif status in (503, 529):
            kind = EmbeddingOverloadedError
        elif status < 500:
            kind = EmbeddingBadRequestError
        raise kind(message)

    def _parse(self, response: httpx.Response, expected: int) -> npt.NDArray[np.float32]:
        dims = self._config.dimensions
        try:
            data = response.json()["data"]
            rows = {item.get("index", at): item["embedding"] for at, item in enumerate(data)}
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbeddingError(
                f"embedding response (HTTP {response.status_code}) is not a `data` list of "
                f"embeddings: {response.text[:_MAX_DETAIL_CHARS]!r}"
            ) from None
        if (
            len(data) != expected
            or any(type(index) is not int for index in rows)
            or sorted(rows) != list(range(expected))
        ):
            raise EmbeddingError(f"embedding response rows do not match the {expected} inputs")
        if not all(isinstance(vector, list) for vector in rows.values()):
            raise EmbeddingError("embedding rows must be float lists (base64 is not supported)")
        if (wrong := next((len(v) for v in rows.values() if len(v) != dims), None)) is not None:
            raise EmbeddingError(
                f"model {self._config.model!r} returned {wrong} dimensions, expected {dims}; "
                "fix the configured dimensions (vectors of another size cannot share the index)"
            )
        try:
            out = np.asarray([rows[index] for index in range(expected)], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise EmbeddingError("embedding response holds non-numeric values") from exc
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        if not np.all(np.isfinite(out)) or np.any(norms == 0):
            raise EmbeddingError("embedding response holds a non-finite or all-zero vector")
        return (out / norms).astype(np.float32)  # type: ignore[no-any-return]
