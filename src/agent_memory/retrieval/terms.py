"""Words, terms and keyword relevance: what a text says, in the form the keyword index holds.

* `words` / `content_terms`: case-folded words split as FTS5's `unicode61` splits them, and
  the distinct informative ones (no stopwords, no single letters); density and lexical
  relevance use them. `exact_match_candidates`: strings a query might name a subject or
  predicate by exactly. `fts5_match_expression`: user text as a MATCH expression that can
  never be a syntax error.
* `term_counts` / `query_terms` / `date_terms`: the keyword index's terms, stemmed by the
  Snowball English stemmer, and a memory's date as people write it ("May", "2023").
* `bm25f`: BM25F (Robertson & Zaragoza 2009) over two fields (own text 1, context
  `context_weight`) with Lucene's never-negative idf over the *tenant's* statistics, so a
  tenant's ranking depends on its data only.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache

import snowballstemmer  # type: ignore[import-untyped]

# Runs of letters and digits: `\w` minus `_`, like unicode61's token characters.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# Whitespace-separated tokens keep identifiers such as `contact:hubspot_id:123456` whole.
_TRIM = "\"'`.,;!?()[]{}<>"


MAX_QUERY_TERMS = 64
MAX_EXACT_CANDIDATES = 40
MAX_NGRAM = 4


# A general English stopword list (function words only). Dropping them keeps an OR query
# from matching nearly every fact on "the" or "did"; when a query has nothing else (e.g.
# "who is it?") the full list of words is used instead.
_STOPWORD_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only or
    other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t d ll m o re ve y
"""

STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    """Case-folded words of `text`, in order (FTS5 unicode61-style splitting)."""
    return _WORD.findall(text.casefold())


def content_terms(text: str) -> list[str]:
    """Distinct informative words, in first-seen order: no stopwords, no single letters
    (single digits are kept: "3 kids" says something)."""
    return list(dict.fromkeys(word for word in words(text) if _keep(word)))


def fts5_quote(term: str) -> str:
    """An FTS5 string literal: `"` doubled inside double quotes (fts5.html §3.1)."""
    return '"' + term.replace('"', '""') + '"'


def fts5_match_expression(text: str) -> str | None:
    """A safe MATCH expression for `text`, or None when it has no searchable word."""
    terms = content_terms(text) or list(dict.fromkeys(words(text)))
    if not terms:
        return None
    return " OR ".join(fts5_quote(term) for term in terms[:MAX_QUERY_TERMS])


def exact_match_candidates(text: str) -> list[str]:
    """Strings to compare with `subject` / `predicate` for equality, best first: the whole
    query; each trimmed token as written, lower-cased and capitalised (SQL equality is
    case-sensitive); snake_case joins of 2-4 words (`responded_positively_to`). At most
    `MAX_EXACT_CANDIDATES`, so both lookups fit one statement under D1's 100 parameters."""
    out: dict[str, None] = {}

    def add(value: str) -> None:
        if value and len(value) <= 256:
            out.setdefault(value, None)

    add(text.strip())
    for raw in text.split():
        token = raw.strip(_TRIM)
        if not token or token.casefold() in STOPWORDS:
            continue
        add(token)
        add(token.casefold())
        add(token[:1].upper() + token[1:].casefold())
    tokens = words(text)
    for size in range(2, MAX_NGRAM + 1):
        for start in range(len(tokens) - size + 1):
            gram = tokens[start : start + size]
            # An n-gram made only of stopwords names nothing.
            if all(word in STOPWORDS for word in gram):
                continue
            add("_".join(gram))
    return list(out)[:MAX_EXACT_CANDIDATES]


_STEMMER = snowballstemmer.stemmer("english")

_MONTHS = "january february march april may june july august september october november december"
MONTHS = _MONTHS.split()


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The Snowball English stem of a case-folded word (memoised: ~60 µs uncached)."""
    return str(_STEMMER.stemWord(word))


def _keep(word: str) -> bool:
    return word not in STOPWORDS and (len(word) > 1 or word.isdigit())


def term_counts(text: str) -> dict[str, int]:
    """Index terms of `text` → occurrences, in first-seen order."""
    return dict(Counter(stem(word) for word in words(text) if _keep(word)))


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
    return dict(sum((Counter(part) for part in parts), Counter()))


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
