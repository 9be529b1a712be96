"""Embedder port. A vector is only comparable with vectors of the same `EmbeddingConfig`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:  # numpy only for annotations: bare Pyodide (tests/pyodide) lacks it
    import numpy as np
    import numpy.typing as npt

# (n, dimensions) rows: an array, or plain lists (Workers AI's: a few small vectors need no numpy).
Vectors: TypeAlias = "npt.NDArray[np.float32] | list[list[float]]"


@dataclass(frozen=True, slots=True)
class EmbeddingConfig:
    provider: str
    model: str
    dimensions: int

    @property
    def key(self) -> str:
        """A compact identifier used in vector metadata filters."""
        return f"{self.provider}:{self.model}:{self.dimensions}"


class EmbeddingError(Exception):
    """Base class: the embedding call failed."""


class EmbeddingRateLimitedError(EmbeddingError):
    """The provider rate-limited us (HTTP 429); retry later."""


class EmbeddingOverloadedError(EmbeddingError):
    """The provider is overloaded or unavailable (HTTP 503/529); retry later."""


class EmbeddingBadRequestError(EmbeddingError):
    """The provider rejected the input (other 4xx); do not retry."""


class EmbeddingTimeoutError(EmbeddingError):
    """The provider did not answer in time."""


class Embedder(Protocol):
    @property
    def config(self) -> EmbeddingConfig: ...

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Return len(texts) rows of `dimensions` values (`Vectors`), L2-normalised."""
