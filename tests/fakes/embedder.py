"""`HashingEmbedder`: a tiny deterministic `Embedder` for unit tests of other modules.

No model, no I/O: each lower-cased word is hashed (blake2b, stable across processes, unlike
`hash()`) to a dimension and a sign, the counts are summed and the row L2-normalised. Texts
sharing words therefore have a higher cosine than texts sharing none (collisions aside).
It knows nothing about meaning: use the real `LocalMiniLMEmbedder` to test paraphrases.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from bindings.ports.embedder import EmbeddingConfig

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Bag-of-words hashed into `dimensions`; config provider="test", model="hashing-bow"."""

    def __init__(self, dimensions: int = 384) -> None:
        if dimensions < 2:
            raise ValueError("dimensions must be at least 2")
        self._config = EmbeddingConfig(provider="test", model="hashing-bow", dimensions=dimensions)
        self.calls: list[list[str]] = []

    @property
    def config(self) -> EmbeddingConfig:
        return self._config

    def _slot(self, token: str) -> tuple[int, float]:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "big")
        return value % self._config.dimensions, 1.0 if (value >> 63) & 1 else -1.0

    def embed_sync(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self._config.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            tokens = _WORD.findall(text.lower()) or ["\x00empty"]  # never a zero vector
            for token in tokens:
                slot, sign = self._slot(token)
                out[row, slot] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:  # opposite-sign collisions cancelled out
                slot, _ = self._slot(text)
                out[row, slot] = 1.0
                norm = 1.0
            out[row] /= norm
        return out

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Shape `(len(texts), dimensions)`, rows L2-normalised; records each call."""
        self.calls.append(list(texts))
        return self.embed_sync(texts)
