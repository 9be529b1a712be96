"""The evidence a supersession needs (issue 25): when two keyed statements are about
different things however alike they read, and when two are one statement said twice.

A supersession is a claim that the older statement is no longer true. `judge` asks the
wording rules (`keys.judge_update`) and then refuses any `update` or `unsure` the words
cannot back, answering `compatible` with the reason:

* `distinct_identifier`: the two name different codes (INV-1001 / INV-1005, SUP-4001,
  web-01, a token like 9f3ab2), or differ in two or more numbers (a counter and a token).
  A code that changes *with* an update marker ("Alice's flight is now UA-512") is a value.
* `distinct_subject`: the words before the verb tell two things apart beyond the key
  entity ("Order 1117 shipped …" / "Order 1118 …", "Alice from accounting" / "Alice
  from sales").
* `time_bounded`: the newer statement holds for a while only ("until Friday", "this
  week"): it does not end the older one.

`near_duplicate` is the merge rule (ADR-0051 step 1) for two statements whose embeddings
are close: the same key entity, the same names, numbers and codes, and no change stated.
Deterministic, no I/O; general English only.
"""

from __future__ import annotations

import re

from agent_memory.tiers.semantic.keys import (
    ADVERBS,
    DETERMINERS,
    FIRST_PERSON,
    NOT_NAMES,
    STOP,
    UPDATE_MARKERS,
    FactKey,
    Judgement,
    _first_sentence,
    _has_marker,
    _verb_index,
    judge_update,
    words,
)

# Digits with a unit, an ordinal, a time of day, a version or a quarter are values, not codes.
_VALUE_SHAPE = re.compile(
    r"^(v?\d+|\d+(st|nd|rd|th|am|pm|s|k|m|h|x|km|kg|mb|gb|tb|yo|mph|kph|min|hrs?)|q[1-4]|h[12])$"
)
TIME_BOUNDS = (
    "until",
    "till",
    "through",
    "temporarily",
    "for now",
    "this week",
    "this weekend",
    "next week",
    "for the week",
    "for the weekend",
    "for a week",
    "for two weeks",
    "for a few days",
    "while",
    "during",
)
_MARKER_WORDS = frozenset(w for m in UPDATE_MARKERS for w in m.split()) | {"these", "days"}


def codes(text: str) -> frozenset[str]:
    """Tokens that name one thing: letters and digits mixed (INV-1001, web-01, 9f3ab2)."""
    out = set()
    for token in words(text):
        low = token.lower().strip("-'")
        has_digit = any(c.isdigit() for c in low)
        if has_digit and any(c.isalpha() for c in low) and not _VALUE_SHAPE.match(low):
            out.add(low)
    return frozenset(out)


def numbers(text: str) -> frozenset[str]:
    return frozenset(t for t in (w.lower() for w in words(text)) if t.isdigit())


def marks(text: str) -> frozenset[str]:
    """What tells one statement's things from another's: names (capitalised words),
    numbers and codes, lower-cased."""
    out = set()
    for token in words(text):
        low = token.lower().removesuffix("'s")
        if any(c.isdigit() for c in low) or (token[:1].isupper() and low not in NOT_NAMES):
            out.add(low)
    return frozenset(out)


def head_words(text: str, entity: str) -> frozenset[str]:
    """The words before the main verb that qualify the entity ("from accounting", "1117"):
    no entity words, function words, adverbs or update markers."""
    tokens = words(_first_sentence(text))
    verb_at = _verb_index(tokens)
    head = tokens[:verb_at] if verb_at is not None else []
    skip = set(entity.split()) | _MARKER_WORDS | ADVERBS | DETERMINERS | FIRST_PERSON | STOP
    return frozenset(
        low
        for low in (t.lower().removesuffix("'s") for t in head)
        if low not in skip and low not in NOT_NAMES
    )


def bounded(text: str) -> bool:
    return _has_marker(text, TIME_BOUNDS) is not None


def separate(older_text: str, newer_text: str, entity: str) -> str | None:
    """Why the two statements are about different things, or None when nothing says so."""
    marked = _has_marker(newer_text, UPDATE_MARKERS) is not None
    if codes(older_text) != codes(newer_text) and not marked:
        return "distinct_identifier"
    if len(numbers(older_text) ^ numbers(newer_text)) >= 3 and not marked:
        return "distinct_identifier"  # a counter and a token, not one quantity
    a, b = head_words(older_text, entity), head_words(newer_text, entity)
    if a and b and a != b:
        return "distinct_subject"
    if bounded(newer_text) and not bounded(older_text):
        return "time_bounded"
    return None


def judge(older_text: str, older: FactKey, newer_text: str, newer: FactKey) -> Judgement:
    """`keys.judge_update`, with every `update` or `unsure` checked against `separate`."""
    verdict = judge_update(older_text, older, newer_text, newer)
    if verdict.decision in ("update", "unsure"):
        reason = separate(older_text, newer_text, older.entity)
        if reason is not None:
            return Judgement("compatible", reason)
    return verdict


def near_duplicate(
    a_text: str, a_entity: str, b_text: str, b_entity: str, *, states_a_change: bool
) -> str | None:
    """Why two close statements are not one said twice, or None when they are."""
    if a_entity and b_entity and a_entity != b_entity:
        return "different_entity"
    if marks(a_text) != marks(b_text):
        return "distinct_marks"
    if states_a_change:
        return "states_a_change"
    return None
