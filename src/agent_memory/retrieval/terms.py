"""Query terms for the keyword and exact-match channels of semantic recall.

* `fts5_match_expression(text)`: user text → an FTS5 MATCH expression that can never be a
  syntax error. Every term is a double-quoted FTS5 string (a `"` inside is doubled), so
  operators (`AND`, `OR`, `NOT`, `NEAR`), column filters (`col:`), prefixes (`*`), `^`,
  parentheses and any punctuation in the text are searched for as words, never parsed.
  Terms are joined with `OR` and ranked by `bm25()`, so a fact need not contain every word.
* `content_terms(text)`: the distinct informative words of a text (stopwords dropped);
  the scorer's density signal and the keyword query both use it.
* `exact_match_candidates(text)`: strings the query might name a subject or predicate by
  exactly (`contact:hubspot_id:123456`, `Caroline`, `responded_positively_to`).

Words are split the way FTS5's `unicode61` tokenizer splits them (runs of Unicode letters
and digits; `_` and punctuation separate), so what we count is what the index holds.
"""

from __future__ import annotations

import re

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
    seen: dict[str, None] = {}
    for word in words(text):
        if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        seen.setdefault(word, None)
    return list(seen)


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
    """Strings to compare with `subject` / `predicate` for equality, best first.

    In order: the whole query; each whitespace token with surrounding punctuation trimmed
    (as written, lower-cased and capitalised, since SQL equality is case-sensitive and
    subjects keep their spelling); then snake_case joins of 2-4 consecutive words
    (predicates are usually written `responded_positively_to`). At most
    `MAX_EXACT_CANDIDATES`, so the subject and predicate lookups (each with the tenant and
    up to five filter values) fit in one statement under D1's 100 bound parameters.
    """
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
