"""Keys for free text, and the rules that tell an update from a look-alike.

Most facts arrive as free text with no subject or predicate (`store_memory` from MCP
clients and agents). On write, `derive_key` gives each one a key — the *entity* it is about
and the *attribute* it states — and says how it was derived (`FactKey.source`):

* `structured`: the caller named a subject (not the catch-all `general`); its predicate is
  the attribute unless it is the free-text `states`, then the attribute comes from the text;
* `metadata`: `metadata["entity"]` (or `"about"`) names it;
* `known_subject`: the sentence names an entity the tenant already has facts about;
* `speaker`: the sentence is in the first person ("I", "my") — the entity is `user`;
* `named_entity`: the sentence's subject is a capitalised name ("Alice", "Project Apollo"),
  possessives included ("Alice's manager" → entity `alice`, attribute `manager`);
* `sentence_subject`: the head word of the subject before the verb ("the budget is …");
* `none`: nothing usable (entity `''`: the update step and recall's guard skip the fact).

Deterministic, no model, no I/O: a few regular expressions and a small lexicon of general
English (verbs of residence, preference, work, plans, possession; temporal and additive
markers). Nothing here knows any data set.

`update_rules.judge_update` reads two keyed statements and decides whether the newer
replaces the older; the word lists both use are in `_lexicon`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from agent_memory.tiers.semantic._lexicon import (
    ADVERBS,
    AUX,
    CATCH_ALL_SUBJECT,
    COPULA,
    DETERMINERS,
    FIRST_PERSON,
    FREE_TEXT_PREDICATE,
    MAX_ATTRIBUTE_CHARS,
    MAX_ENTITY_CHARS,
    NEGATIONS,
    NOT_NAMES,
    SENTENCE_END,
    SLOT_NOUNS,
    SPEAKER_ENTITY,
    VERB_CLASS,
    lower,
    words,
)

KeySource = Literal[
    "structured",
    "metadata",
    "known_subject",
    "speaker",
    "named_entity",
    "sentence_subject",
    "none",
]


@dataclass(frozen=True)
class FactKey:
    """What a fact is about (`entity`) and what it states (`attribute`), and how that was
    derived. `entity == ''` means no key: the fact takes no part in update detection."""

    entity: str
    attribute: str
    source: KeySource


def _norm_phrase(tokens: list[str], limit: int) -> str:
    return " ".join(t.lower().removesuffix("'s") for t in tokens)[:limit].strip()


def _first_sentence(text: str) -> str:
    parts = SENTENCE_END.split(text.strip(), maxsplit=1)
    return parts[0] if parts else text


def _verb_index(tokens: list[str]) -> int | None:
    """Where the sentence's main verb is: the first word (after the first) that the lexicon
    knows, an auxiliary, or a negation; None when none is found."""
    low = lower(tokens)
    for i, word in enumerate(low):
        if (
            i == 0
            and word not in FIRST_PERSON
            and not (word in VERB_CLASS and tokens[0][:1].islower())
        ):
            continue  # a capitalised first word is the subject, not the verb
        if word in VERB_CLASS or word in AUX or word in NEGATIONS or word.endswith("n't"):
            following = low[i + 1] if i + 1 < len(low) else ""
            if word not in AUX and VERB_CLASS.get(following) in ("state", "plan"):
                continue  # "Alice's favourite drink is …": a noun before the verb
            return i
    # A verb the lexicon does not know ("Alice speaks French"): the word after the name.
    run = _capitalised_run(tokens)
    if run and tokens[: len(run)] == run and len(run) < len(tokens):
        return len(run)
    # "The deploy freeze starts on Friday": the first third-person form not right after a
    # determiner, in a sentence that starts with one.
    for i in range(1, len(low) if low and low[0] in DETERMINERS else 0):
        word = low[i]
        third_person = word.endswith("s") and not word.endswith("ss")
        if third_person and low[i - 1] not in DETERMINERS and tokens[i][:1].islower():
            return i
    return None


def _capitalised_run(tokens: list[str]) -> list[str]:
    """The first run of capitalised words that is not a function word."""
    run: list[str] = []
    for token in tokens:
        if token[:1].isupper() and token.lower().removesuffix("'s") not in NOT_NAMES:
            run.append(token)
            if token.endswith("'s"):
                break
        elif run:
            break
    return run


def entity_candidates(text: str) -> list[str]:
    """Lower-cased capitalised runs in the text: names the tenant may already know."""
    out: list[str] = []
    current: list[str] = []
    for token in [*words(text), "."]:
        if token[:1].isupper() and token.lower().removesuffix("'s") not in NOT_NAMES:
            current.append(token)
            continue
        if current:
            out.append(_norm_phrase(current, MAX_ENTITY_CHARS))
            current = []
    return list(dict.fromkeys(c for c in out if c))


def _attribute_after(tokens: list[str], verb_at: int | None) -> str:
    if verb_at is None:
        return ""
    low = lower(tokens)
    for i, word in enumerate(low[verb_at:], verb_at):
        if word in COPULA:
            ahead = [w for w in low[i + 1 : i + 4] if w not in ADVERBS][:2]
            for next_word in ahead:
                named = VERB_CLASS.get(next_word) or VERB_CLASS.get(next_word + "d")
                if named is not None and named != "state":
                    return named
        if word in VERB_CLASS:
            return VERB_CLASS[word]
        if word in AUX or word in NEGATIONS or word in ADVERBS or word.endswith("n't"):
            continue
        return word.removesuffix("s")[:MAX_ATTRIBUTE_CHARS]
    return ""


def derive_key(
    content: str,
    *,
    subject: str = CATCH_ALL_SUBJECT,
    predicate: str = FREE_TEXT_PREDICATE,
    metadata: Mapping[str, Any] | None = None,
    known_entities: Collection[str] = (),
) -> FactKey:
    """The key of one fact (see the module docstring for the order of the sources)."""
    sentence = _first_sentence(content)
    tokens = words(sentence)
    verb_at = _verb_index(tokens)
    text_attribute = _attribute_after(tokens, verb_at)
    if subject != CATCH_ALL_SUBJECT:
        attribute = predicate if predicate != FREE_TEXT_PREDICATE else text_attribute
        return FactKey(
            subject.lower()[:MAX_ENTITY_CHARS], attribute[:MAX_ATTRIBUTE_CHARS], "structured"
        )
    named = (metadata or {}).get("entity", (metadata or {}).get("about"))
    if isinstance(named, str) and named.strip():
        return FactKey(named.strip().lower()[:MAX_ENTITY_CHARS], text_attribute, "metadata")
    head = tokens[:verb_at] if verb_at is not None else tokens
    head = [t for t in head if t.lower() not in ADVERBS]
    low_head = lower(head)
    # "Alice's favourite drink is …": the entity owns the attribute.
    for i, token in enumerate(head):
        if token.endswith("'s") and i + 1 < len(head):
            owner = [t for t in head[: i + 1] if t.lower() not in DETERMINERS]
            attribute = _norm_phrase(
                [t for t in head[i + 1 :] if t.lower() not in DETERMINERS], MAX_ATTRIBUTE_CHARS
            )
            entity = _norm_phrase(owner, MAX_ENTITY_CHARS)
            attribute = SLOT_NOUNS.get(attribute, attribute)
            source: KeySource = "known_subject" if entity in known_entities else "named_entity"
            return FactKey(entity, attribute or text_attribute, source)
    speaker_at = next((i for i, w in enumerate(low_head) if w in FIRST_PERSON), None)
    if speaker_at is not None and not _capitalised_run(head[:speaker_at]):
        # "I …", "My budget …", "These days I …": the speaker.
        rest = [t for t in head[speaker_at + 1 :] if t.lower() not in DETERMINERS]
        attribute = _norm_phrase(rest, MAX_ATTRIBUTE_CHARS) if rest else text_attribute
        return FactKey(SPEAKER_ENTITY, attribute, "speaker")
    lowered = content.lower()
    known_here = [e for e in known_entities if e and re.search(rf"\b{re.escape(e)}\b", lowered)]
    run = _capitalised_run(head)
    if run:
        entity = _norm_phrase(run, MAX_ENTITY_CHARS)
        return FactKey(
            entity, text_attribute, "known_subject" if entity in known_entities else "named_entity"
        )
    if known_here:
        return FactKey(sorted(known_here, key=len)[-1], text_attribute, "known_subject")
    nouns = [t for t in head if t.lower() not in DETERMINERS]
    if nouns and verb_at is not None:
        # The whole noun phrase: "the backend team" and "the frontend team" are two.
        return FactKey(_norm_phrase(nouns, MAX_ENTITY_CHARS), text_attribute, "sentence_subject")
    run = _capitalised_run(tokens)
    if run:
        return FactKey(_norm_phrase(run, MAX_ENTITY_CHARS), text_attribute, "named_entity")
    return FactKey("", text_attribute, "none")
