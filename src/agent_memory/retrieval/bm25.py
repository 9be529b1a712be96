"""Keyword relevance: index terms of a text and BM25F over two fields (own text, context).

* `term_counts(text)`: the index terms of a text with their counts — words split the way
  FTS5's `unicode61` splits them (`terms.words`), stopwords and single letters dropped
  (`terms.content_terms`' rule), each reduced by the Snowball English stemmer
  ("painting", "paints" → "paint"), so a query word finds its inflections.
* `query_terms(text)`: the distinct terms of a query (all words, stemmed, when it has no
  content word).
* `date_terms(epoch_s)`: how people write the date of a memory — the month's name and the
  year ("May", "2023") — as index terms, so "what did she do in May 2023?" matches it.
* `Bm25Params` / `bm25f`: BM25F (Robertson & Zaragoza 2009): a term's frequency is the
  weighted sum over the fields (own text 1, context `context_weight`), likewise the
  document length; `idf = ln(1 + (N - df + 0.5) / (df + 0.5))` (Lucene's, never negative).
  N, the average length and df are the *tenant's* statistics (migration 0009), so a
  tenant's ranking depends on its own data only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped]

from agent_memory.retrieval.terms import STOPWORDS, words

_STEMMER = snowballstemmer.stemmer("english")
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The Snowball English stem of a case-folded word (memoised: ~60 µs uncached)."""
    return str(_STEMMER.stemWord(word))


def _keep(word: str) -> bool:
    return word not in STOPWORDS and (len(word) > 1 or word.isdigit())


def term_counts(text: str) -> dict[str, int]:
    """Index terms of `text` → occurrences, in first-seen order."""
    counts: dict[str, int] = {}
    for word in words(text):
        if _keep(word):
            term = stem(word)
            counts[term] = counts.get(term, 0) + 1
    return counts


def query_terms(text: str, limit: int = 64) -> list[str]:
    """Distinct index terms of a query, in order (every word when none is a content word)."""
    kept = [w for w in words(text) if _keep(w)] or words(text)
    return list(dict.fromkeys(stem(w) for w in kept))[:limit]


def date_terms(epoch_s: float) -> list[str]:
    """The month name and year of a UTC time, as index terms (`["may", "2023"]`)."""
    when = datetime.fromtimestamp(epoch_s, tz=UTC)
    return [stem(MONTHS[when.month - 1]), str(when.year)]


def merge_counts(*parts: Mapping[str, int]) -> dict[str, int]:
    """Term counts added up."""
    out: dict[str, int] = {}
    for part in parts:
        for term, n in part.items():
            out[term] = out.get(term, 0) + n
    return out


@dataclass(frozen=True, slots=True)
class Bm25Params:
    """BM25F constants: saturation `k1`, length normalisation `b`, the context field's
    weight relative to the memory's own text."""

    k1: float = 1.2
    b: float = 0.75
    context_weight: float = 0.4


@dataclass(frozen=True, slots=True)
class TenantStats:
    """A tenant's keyword statistics: indexed facts and their total field lengths."""

    docs: int
    total_length: int
    total_context_length: int

    def average_length(self, params: Bm25Params) -> float:
        if self.docs <= 0:
            return 1.0
        weighted = self.total_length + params.context_weight * self.total_context_length
        return max(1.0, weighted / self.docs)


def idf(df: int, docs: int) -> float:
    """`ln(1 + (N - df + 0.5) / (df + 0.5))`: positive, larger for rarer terms."""
    df = max(0, min(df, docs))
    return math.log(1.0 + (docs - df + 0.5) / (df + 0.5))


def bm25f(
    postings: Iterable[tuple[str, int, int]],
    length: int,
    context_length: int,
    idfs: Mapping[str, float],
    average_length: float,
    params: Bm25Params,
) -> float:
    """BM25F of one document from its postings `(term, tf, context_tf)` of the query's terms."""
    weighted_length = length + params.context_weight * context_length
    norm = params.k1 * (1.0 - params.b + params.b * weighted_length / average_length)
    total = 0.0
    for term, tf, context_tf in postings:
        freq = tf + params.context_weight * context_tf
        if freq > 0:
            total += idfs.get(term, 0.0) * freq * (params.k1 + 1.0) / (freq + norm)
    return total
