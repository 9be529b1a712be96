"""The rules adjudicator's decision: does a newer statement replace an older one?

`judge_update(older_text, older_key, newer_text, newer_key)` → `Judgement(decision,
reason)`, decision one of `update`, `duplicate`, `compatible`, `unsure`. No model, no I/O:
temporal markers ("now", "no longer", "moved to", "changed"), negation, a new value of the
same attribute. It lives in the semantic tier, below the lifecycle, because recall uses it
too: until the reconciler has run, a stale statement must not outrank a newer one about
the same key. `agent_memory.lifecycle.adjudicator.RulesAdjudicator` wraps it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from agent_memory.tiers.semantic._lexicon import (
    ADDITIVE_MARKERS,
    ADVERBS,
    CHANGE,
    CLASSES,
    CONTEXT_PREPOSITIONS,
    CONTEXTUAL,
    NEGATIONS,
    SINGLE_VALUED,
    STOP,
    UPDATE_MARKERS,
    VERB_CLASS,
    lower,
    words,
)
from agent_memory.tiers.semantic.keys import FactKey

Decision = Literal["update", "duplicate", "compatible", "unsure"]


@dataclass(frozen=True)
class Judgement:
    decision: Decision
    reason: str


@lru_cache(maxsize=4_096)
def _words(text: str) -> tuple[str, ...]:
    """The lower-cased words of `text`, memoised: recall's stale-statement guard judges each
    candidate against several others, and tokenising was most of a judgement's cost."""
    return tuple(lower(words(text)))


def _has_marker(text: str, markers: tuple[str, ...]) -> str | None:
    low = " " + " ".join(_words(text)) + " "
    for marker in markers:
        if f" {marker} " in low:
            return marker
    return None


def _negated(text: str) -> bool:
    return any(w in NEGATIONS or w.endswith("n't") for w in _words(text))


def content_words(text: str, entity: str) -> set[str]:
    """The words that carry a statement's value: no stop words, entity, verbs or markers."""
    return set(_content_words(text, entity))


@lru_cache(maxsize=4_096)
def _content_words(text: str, entity: str) -> frozenset[str]:
    skip = set(entity.split()) | {e.removesuffix("'s") for e in entity.split()}
    out: set[str] = set()
    for word in _words(text):
        base = word.removesuffix("'s")
        if base in STOP or base in skip or base in VERB_CLASS or base in ADVERBS:
            continue
        if base in NEGATIONS or base.endswith("n't") or base in {"longer", "anymore"}:
            continue
        out.add(base)
    return frozenset(out)


def _context_words(text: str, entity: str) -> set[str]:
    """The content words after the first preposition ("for every editor" → {editor}), with
    temporal and additive markers removed first."""
    low = " " + " ".join(_words(text)) + " "
    for marker in (*UPDATE_MARKERS, *ADDITIVE_MARKERS, "these days"):
        low = low.replace(f" {marker} ", " ")
    tokens = low.split()
    for i, token in enumerate(tokens):
        if i > 0 and token in CONTEXT_PREPOSITIONS:
            return content_words(" ".join(tokens[i + 1 :]), entity)
    return set()


def _numbers(tokens: set[str]) -> set[str]:
    return {t for t in tokens if any(c.isdigit() for c in t)}


def _names_slot(text: str, attribute: str) -> bool:
    """Whether the attribute is a named slot of the entity ("Alice's manager", "my budget")
    rather than a verb ("speaks"), which may hold many values."""
    low = " ".join(_words(text)).replace("'s ", " 's ")
    return any(f"{owner} {attribute}" in low for owner in ("'s", "my", "our"))


def judge_update(older_text: str, older: FactKey, newer_text: str, newer: FactKey) -> Judgement:
    """Does the newer statement replace the older one (rules only, no model)?

    `duplicate`: same words. `compatible`: different entities or attributes, an additive
    marker ("also", "too"), or different topics. `update`: a temporal marker ("now", "no
    longer", "moved to", "changed", …) on the same attribute or topic; a negation flip on
    the same topic; a new value for a single-valued attribute (residence, role, a named
    attribute like "Alice's manager"); a changed number with the same context; or the same
    preference with a different object. `unsure`: related but none of those hold."""
    if " ".join(_words(older_text)) == " ".join(_words(newer_text)):
        return Judgement("duplicate", "same_words")
    if not older.entity or older.entity != newer.entity:
        return Judgement("compatible", "different_entity")
    a, b = content_words(older_text, older.entity), content_words(newer_text, newer.entity)
    union, shared = a | b, a & b
    overlap = len(shared) / len(union) if union else 1.0
    # Two words or more in common that make up most of the shorter statement: the same
    # topic even when one value has more words ("high contrast mode" vs "dark mode").
    if len(shared) >= 2 and a and b:
        overlap = max(overlap, len(shared) / min(len(a), len(b)) - 0.1)
    same_attribute = bool(older.attribute) and (
        older.attribute == newer.attribute or CHANGE in (older.attribute, newer.attribute)
    )
    additive = _has_marker(newer_text, ADDITIVE_MARKERS)
    if additive is not None:
        return Judgement("compatible", f"additive_marker:{additive}")
    if _negated(older_text) != _negated(newer_text) and overlap >= 0.5:
        return Judgement("update", "negation")
    marker = _has_marker(newer_text, UPDATE_MARKERS)
    if marker is not None and (same_attribute or overlap >= 0.34):
        return Judgement("update", f"temporal_marker:{marker}")
    if not same_attribute:
        return Judgement("compatible", "different_attribute")
    if a == b:
        return Judgement("compatible", "same_value")
    na, nb = _numbers(a), _numbers(b)
    if (na or nb) and na != nb and (a - na) == (b - nb):
        return Judgement("update", "quantity_changed")
    if older.attribute in CONTEXTUAL:
        context = _context_words(older_text, older.entity)
        if context and context == _context_words(newer_text, newer.entity):
            return Judgement("update", "same_context_new_value")
    # A named attribute ("Alice's manager", "my budget") holds one value at a time.
    named_slot = older.attribute not in CLASSES and _names_slot(older_text, older.attribute)
    if older.attribute in SINGLE_VALUED or named_slot:
        return Judgement("update", "same_attribute_new_value")
    if overlap >= 0.5:
        return Judgement("update", "same_topic_new_value")
    if overlap >= 0.25:
        return Judgement("unsure", "related_same_attribute")
    return Judgement("compatible", "different_topic")
