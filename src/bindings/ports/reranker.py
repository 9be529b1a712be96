"""Reranker port: scores each (question, passage) pair jointly, over a short candidate list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class RerankError(Exception):
    """The reranking call failed; recall keeps its fused order."""


class Reranker(Protocol):
    @property
    def model(self) -> str: ...

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text, in order; higher is more relevant. Scores compare
        only within one call."""
