"""Keys for free text, and the rules that tell an update from a look-alike.

`derive_key` gives each fact the *entity* it is about and the *attribute* it states, and
says how (`FactKey.source`, in order of precedence): `structured` (the caller named a
subject other than `general`), `metadata` (`metadata["entity"]` or `"about"`),
`known_subject` (names an entity the tenant already has facts about), `speaker` (first
person: entity `user`), `named_entity` (a capitalised subject, possessives included:
"Alice's manager"), `sentence_subject` (the head noun phrase before the verb), `none`
(entity '': update detection skips the fact).

`judge_update` decides whether a newer keyed statement replaces an older one: `update`,
`duplicate`, `compatible` or `unsure`; `judge` checks its `update`s against the evidence a
supersession needs, `near_duplicate` is the merge rule (both at the end). Recall reads what
is true now without them (`statements.py`): these rules decide what the reconciler may hide.
Deterministic, no model, no I/O: regular expressions and a small lexicon of general
English; nothing here knows any data set.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

CATCH_ALL_SUBJECT = "general"
FREE_TEXT_PREDICATE = "states"
SPEAKER_ENTITY = "user"
MAX_ENTITY_CHARS = 256
MAX_ATTRIBUTE_CHARS = 128


WORD = re.compile("[A-Za-z0-9][A-Za-z0-9'\u2019\\-]*")
# A title's full stop ends no sentence: "Dr. Patel" is one name, not the entity "dr".
TITLES = frozenset(("Dr", "Mr", "Mrs", "Ms", "Prof", "St"))
SENTENCE_END = re.compile(
    r"(?<=[.!?;])" + "".join(rf"(?<!\b{title}\.)" for title in sorted(TITLES)) + r"\s+"
)


# Nouns that name someone or something in a relation to an owner, who has facts of their own
# ("Marco's *brother* lives in Madrid", "Emma's *cat* eats salmon"), as against what an owner
# has ("Dario's new *place*", "Noah's *budget*"): a closed class of English (family, social
# and work relations, pets), not a list of phrasings.
_RELATION_TEXT = (
    "brother sister sibling siblings mother mom mum father dad parent parents son sons "
    "daughter daughters child children kid kids baby wife husband partner spouse girlfriend "
    "boyfriend fiance fiancee ex friend friends roommate flatmate housemate neighbour neighbor "
    "neighbours neighbors cousin aunt uncle nephew niece grandmother grandma grandfather "
    "grandpa grandparents grandson granddaughter family boss manager colleague colleagues "
    "coworker intern assistant mentor team company employer client customer landlord tenant "
    "doctor dentist teacher coach student cat dog pet puppy kitten horse"
)
RELATIONS = frozenset(_RELATION_TEXT.split())


def split(text: str, sep: str | None = None) -> list[str]:
    return text.split(sep)


# Attribute classes: a verb (any inflection listed) says which attribute a sentence states.
CLASSES: dict[str, list[str]] = {
    "location": split(
        "live lives lived living moved move moves moving relocated relocate relocates "
        "based located resides reside resided residing settled"
    ),
    "preference": split(
        "prefer prefers preferred preferring like likes liked love loves loved enjoy enjoys "
        "enjoyed favor favors favour favours hate hates hated dislike dislikes disliked"
    ),
    "role": split(
        "work works worked working employed job role title position promoted hired joined "
        "leads led manages managed serves served appointed"
    ),
    "plan": split(
        "plan plans planned planning intend intends intended going scheduled will aims aim"
    ),
    "possession": split("has have had owns own owned keeps kept"),
    "state": split("is are was were am be been becomes became become"),
    "usage": split("uses use used using drives drive drove runs run ran"),
    "consumption": split("drinks drink drank eats eat ate"),
    # A change of something ("switched to", "changed plans"): which attribute changed is
    # read from the other statement, so this class matches any attribute.
    "change": split(
        "switched switch switches changed change changes swapped renamed rename upgraded "
        "upgrade downgraded updated postponed rescheduled pushed scaled raised lowered quit "
        "stopped"
    ),
}

CHANGE = "change"
# After a copula, a participle or adjective can name the attribute ("is based in",
# "was promoted to"); these are looked for in the next two words.
COPULA = frozenset(split("is are was were am be been being got gets get"))
VERB_CLASS = {verb: name for name, verbs in CLASSES.items() for verb in verbs}
# One value at a time for an entity: a new value replaces the old one.
SINGLE_VALUED = frozenset({"location", "role"})
AUX = frozenset(split("does do did can could should would may might must shall"))
DETERMINERS = frozenset(split("the a an this that these those his her their its our your"))
FIRST_PERSON = frozenset({"i", "me", "my", "we", "our", "us", "i'm", "i've", "we're"})
OWNERS = frozenset(split("my our your his her their its"))
OBJECT = OWNERS | frozenset(split("the a an"))
NOT_NAMES = frozenset(
    split(
        "the a an this that these those i my we our you your he she it they his her its their "
        "now currently today yesterday tomorrow recently lately also still actually then so but "
        "and or if when after before since as for in on at to from by with"
    )
)

ADVERBS = frozenset(
    split(
        "now currently recently lately actually still also nowadays finally officially just "
        "no longer never really"
    )
)

UPDATE_MARKERS = tuple(
    split(
        "now, no longer, not anymore, anymore, any more, moved to, relocated, changed, "
        "switched, instead, nowadays, these days, from now on, became, has become, "
        "was promoted, got promoted, updated, turned, new, rescheduled, postponed, "
        "moved the, pushed, was changed, has been changed, renamed, upgraded, downgraded, "
        "quit, stopped, went up, went down, was raised, was lowered, was scaled, was moved",
        ", ",
    )
)

ADDITIVE_MARKERS = ("also", "too", "as well", "another", "additionally", "in addition", "besides")
NEGATIONS = frozenset({"not", "no", "never", "n't", "doesn't", "don't", "isn't", "won't"})
STOP = frozenset(
    split(
        "the a an of in on at to for from by with and or but is are was were am be been being "
        "it its this that these those he she they them his her their i me my we our you your "
        "as into than then so very really just about every each all any some there here who "
        "which what when where how do does did will would can could should has have had "
        "best most more much"
    )
)

# A named slot ("Alice's job", "my home") whose noun says the attribute class.
SLOT_NOUNS = {
    "job": "role",
    "role": "role",
    "title": "role",
    "position": "role",
    "home": "location",
    "address": "location",
}

# Where a preference or plan holds ("for every editor", "in May"): same context + new value
# is an update, a different context is another preference.
CONTEXT_PREPOSITIONS = frozenset(split("for in on at during of"))
CONTEXTUAL = frozenset({"preference", "plan"})


def words(text: str) -> list[str]:
    return [w.replace("\u2019", "'") for w in WORD.findall(text)]


def lower(tokens: Sequence[str]) -> list[str]:
    return [t.lower() for t in tokens]


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
            copula = word in COPULA
            if word not in AUX and not copula and VERB_CLASS.get(following) in ("state", "plan"):
                continue  # "Alice's favourite drink is …": a noun before the verb
            return i
    # A verb the lexicon does not know ("Alice speaks French"): the word after the name.
    run = _capitalised_run(tokens)
    named = bool(run) and tokens[: len(run)] == run and len(run) < len(tokens)
    if named and low[len(run)] not in STOP:
        owns = run[-1].endswith("'s") and len(run) + 1 < len(tokens)
        return len(run) + owns  # "Hamid's son *teaches*": after the owned noun
    # "The deploy freeze starts on Friday", "Shipping to Spain costs 9 euros" (a function
    # word is no verb): the first third-person form not right after a determiner.
    for i in range(1, len(low) if low and (low[0] in DETERMINERS or named) else 0):
        word = low[i]
        third_person = (word.endswith("s") and not word.endswith("ss")) or word.endswith("ed")
        if third_person and low[i - 1] not in DETERMINERS and tokens[i][:1].islower():
            return i
        if word not in STOP and " ".join(low[i : i + 2]) in UPDATE_MARKERS:
            return i  # "Shipping to Spain *went up* to 12 euros"
    return None


def _capitalised_run(tokens: list[str]) -> list[str]:
    """The first run of capitalised words that is not a function word ("IT", written in
    capitals, is a name: not "it")."""
    run: list[str] = []
    for token in tokens:
        acronym = len(token) > 1 and token.isupper()
        if token[:1].isupper() and (acronym or token.lower().removesuffix("'s") not in NOT_NAMES):
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
        if VERB_CLASS.get(word) == "location" and low[i + 1 : i + 2] and low[i + 1] in OBJECT:
            # "I moved *my bedtime* to 10:30": the object changed, not where the speaker is.
            noun = list(itertools.takewhile(lambda w: w not in STOP, low[i + 2 :]))
            if noun:
                return SLOT_NOUNS.get(noun[-1], noun[-1])[:MAX_ATTRIBUTE_CHARS]
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
    verb = tokens[verb_at].lower() if verb_at is not None else ""
    acts = bool(verb) and verb not in COPULA  # the subject does something, not "is"
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
            owned = [t.lower() for t in head[i + 1 :] if t.lower() not in DETERMINERS]
            if acts and any(word.removesuffix("'s") in RELATIONS for word in owned):
                # "Marco's brother lives …": the brother is another entity ("Alice's manager
                # is Bob" names a slot of Alice's).
                entity = _norm_phrase([*owner, *head[i + 1 :]], MAX_ENTITY_CHARS)
                attribute = text_attribute
            attribute = SLOT_NOUNS.get(attribute, attribute)
            source: KeySource = "known_subject" if entity in known_entities else "named_entity"
            return FactKey(entity, attribute or text_attribute, source)
    speaker_at = next((i for i, w in enumerate(low_head) if w in FIRST_PERSON), None)
    if speaker_at is not None and not _capitalised_run(head[:speaker_at]):
        # "I …", "My budget …", "These days I …": the speaker.
        rest = [t for t in head[speaker_at + 1 :] if t.lower() not in DETERMINERS]
        if rest and acts and verb not in VERB_CLASS:
            # "Our Paris office opens at 9": the speaker's office acts, so it is the entity
            # and its verb the slot ("our office is on Main Street" names a slot of ours,
            # and a verb of a class, "our standup moved to 10am", changes or fills one).
            return FactKey(_norm_phrase(rest, MAX_ENTITY_CHARS), text_attribute, "speaker")
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


Decision = Literal["update", "duplicate", "compatible", "unsure"]


@dataclass(frozen=True)
class Judgement:
    decision: Decision
    reason: str


@lru_cache(maxsize=4_096)
def _words(text: str) -> tuple[str, ...]:
    """The lower-cased words of `text`, memoised: the reconciler judges each fact against
    several others, and tokenising was most of a judgement's cost."""
    return tuple(lower(words(text)))


def _has_marker(text: str, markers: tuple[str, ...]) -> str | None:
    low = " " + " ".join(_words(text)) + " "
    for marker in markers:
        if f" {marker} " in low:
            return marker
    return None


def _negated(text: str) -> bool:
    return any(w in NEGATIONS or w.endswith("n't") for w in _words(text))


@lru_cache(maxsize=4_096)
def content_words(text: str, entity: str) -> frozenset[str]:
    """The words that carry a statement's value: no stop words, entity, verbs or markers."""
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


def _context_words(text: str, entity: str) -> frozenset[str]:
    """The content words after the first preposition ("for every editor" → {editor}), with
    temporal and additive markers removed first."""
    low = " " + " ".join(_words(text)) + " "
    for marker in (*UPDATE_MARKERS, *ADDITIVE_MARKERS, "these days"):
        low = low.replace(f" {marker} ", " ")
    tokens = low.split()
    for i, token in enumerate(tokens):
        if i > 0 and token in CONTEXT_PREPOSITIONS:
            return content_words(" ".join(tokens[i + 1 :]), entity)
    return frozenset()


def _numbers(tokens: frozenset[str]) -> set[str]:
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
    # A change verb changes whatever the older statement states, except that the speaker
    # states many things: "we switched coffee suppliers" changes nothing of the build server.
    changes = CHANGE in (older.attribute, newer.attribute) and (
        older.entity != SPEAKER_ENTITY or bool(shared)
    )
    same_attribute = bool(older.attribute) and (
        (older.attribute == newer.attribute != CHANGE) or changes
    )
    additive = _has_marker(newer_text, ADDITIVE_MARKERS)
    if additive is not None:
        return Judgement("compatible", f"additive_marker:{additive}")
    if _negated(older_text) != _negated(newer_text) and overlap >= 0.5:
        return Judgement("update", "negation")
    marker = _has_marker(newer_text, UPDATE_MARKERS)
    # A copula ("is in Boston", "is called Bluebird") names no attribute of its own.
    loose = same_attribute or "state" in (older.attribute, newer.attribute)
    # A named slot ("Maya's tablet", "Gus's brother") changes only where the change names
    # it: "updated her phone" says nothing of the tablet.
    slot = older.attribute not in CLASSES and _names_slot(older_text, older.attribute)
    if slot and older.attribute not in " ".join(_words(newer_text)):
        return Judgement("compatible", "other_slot")
    if marker is not None and (loose or overlap >= 0.34):
        return Judgement("update", f"temporal_marker:{marker}")
    if marker is not None:  # a change of something about the entity, but of what?
        return Judgement("unsure", f"marker_other_attribute:{marker}")
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


# ----------------------------------------------------------- the evidence a supersession needs
# A supersession claims the older statement is no longer true (issue 25). `judge` asks
# `judge_update` and then refuses any `update` or `unsure` the words cannot back, answering
# `compatible` with the reason: `distinct_context` (values for different contexts: "for
# search" / "for ads"), `distinct_identifier` (different codes such as INV-1001 /
# INV-1005, or two or more numbers differ; a code that changes *with* an update marker is a
# value), `distinct_subject` (the words before the verb tell two things apart beyond the key
# entity: "Alice from accounting" / "Alice from sales"), `time_bounded` (the newer statement
# holds for a while only: "until Friday"). `near_duplicate` is the merge rule (ADR-0051
# step 1) for two close statements: same key entity, names, numbers and codes, no change.

# Digits with a unit, an ordinal, a time of day, a version or a quarter are values, not codes.
_VALUE_SHAPE = re.compile(
    r"^(v?\d+|\d+(st|nd|rd|th|am|pm|s|k|m|h|x|km|kg|mb|gb|tb|yo|mph|kph|min|hrs?)|q[1-4]|h[12])$"
)
TIME_BOUNDS = tuple(
    split(
        "until, till, through, temporarily, for now, this week, this weekend, next week, "
        "for the week, for the weekend, for a week, for two weeks, for a few days, while, during",
        ", ",
    )
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


@lru_cache(maxsize=8_192)
def _clause(text: str) -> tuple[tuple[str, ...], int | None]:
    """The first sentence's words and where its main verb is (`_verb_index`), read once for
    the readings `separate` takes of one statement."""
    tokens = words(_first_sentence(text))
    return tuple(tokens), _verb_index(tokens)


def head_words(text: str, entity: str) -> frozenset[str]:
    """The words before the main verb that qualify the entity ("from accounting", "1117"):
    no entity words, function words, adverbs or update markers."""
    tokens, verb_at = _clause(text)
    head = tokens[:verb_at] if verb_at is not None else ()
    skip = set(entity.split()) | _MARKER_WORDS | ADVERBS | DETERMINERS | FIRST_PERSON | STOP
    return frozenset(
        low
        for low in (t.lower().removesuffix("'s") for t in head)
        if low not in skip and low not in NOT_NAMES
    )


def _owned_owners(text: str) -> frozenset[str]:
    """The owners before the main verb that are themselves owned ("Sam's *wife's* number",
    "my *sister's* flight"): each names another entity than the first owner."""
    tokens, verb_at = _clause(text)
    low = lower(tokens if verb_at is None else tokens[:verb_at])
    return frozenset(
        w.removesuffix("'s").removesuffix("'")
        for i, w in enumerate(low)
        if i > 0
        and w.endswith(("'s", "'"))
        and (low[i - 1].endswith(("'s", "'")) or low[i - 1] in OWNERS)
    )


def _object(text: str) -> frozenset[str]:
    """The words of the definite noun phrase the main verb acts on ("waters *the ferns*"), or
    none: a thing acted on, not a value ("drives *a* Tesla" has none)."""
    tokens, verb_at = _clause(text)
    if verb_at is None:
        return frozenset()
    # (the verb found may be an adverb before it: "Nora *now* waters")
    after = [t for t in tokens[verb_at:] if t.lower() not in ADVERBS][1:]
    if not after or after[0].lower() not in OWNERS | {"the"}:
        return frozenset()
    run = itertools.takewhile(lambda t: t.islower() and t.isalpha() and t not in STOP, after[1:])
    return frozenset(t.removesuffix("s") for t in run)


def _named_kinds(text: str) -> dict[str, str]:
    """{noun: name} for each name that qualifies the common noun after it ("20 *Figma*
    licenses"), past the first word: a kind of thing, not a value."""
    tokens = words(text)
    return {
        b.lower(): a.lower()
        for a, b in itertools.pairwise(tokens[1:])
        if a[:1].isupper()
        and a.lower() not in NOT_NAMES
        and b.isalpha()
        and b.islower()
        and b not in STOP
        and b not in ADVERBS
    }


def _another_owner(a_text: str, b_text: str) -> bool:
    """Whether one statement's subject is owned by someone the other never names."""
    a, b = (
        frozenset(w.removesuffix("'s").removesuffix("'") for w in _words(t))
        for t in (a_text, b_text)
    )
    return bool(_owned_owners(a_text) - b or _owned_owners(b_text) - a)


def bounded(text: str) -> bool:
    return _has_marker(text, TIME_BOUNDS) is not None


NEAR_COPY = 0.5  # the least share of words two near-copies of one sentence have in common
SWAP_SPAN = 4  # the longest phrase that stands in place of another in a near-copy


def swapped_spans(a: Sequence[str], b: Sequence[str]) -> list[tuple[int, int, int, int]]:
    """Where two near-copies (word sequences sharing at least `NEAR_COPY` of their words, not
    two sentences that share "the … to") have a phrase of at most `SWAP_SPAN` words in place
    of another between words they share: `(i1, i2, j1, j2)`, the phrases `a[i1:i2]` and
    `b[j1:j2]`; none for sequences less alike. A phrase missing from one is not a swap."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.ratio() < NEAR_COPY:
        return []
    return [
        (i1, i2, j1, j2)
        for op, i1, i2, j1, j2 in matcher.get_opcodes()
        if op == "replace"
        and 0 not in (i1, j1)
        and i2 < len(a)
        and j2 < len(b)
        and max(i2 - i1, j2 - j1) <= SWAP_SPAN
    ]


def swapped_phrase(a_text: str, b_text: str) -> bool:
    """Whether one statement is a near-copy of the other with a phrase in place of another
    (`swapped_spans`), no number in either: "the Riverside *Cycling* Club" / "the Riverside
    *Running* Club" may name two clubs, as "Priya's favourite *colour* is blue" / "Priya's
    favourite *food* is pasta" name two slots. A value told anew most often sits at the end
    ("lives in Lisbon" / "in Porto") or is a number ("at 9am")."""
    a, b = _words(a_text), _words(b_text)
    return any(
        not any(c.isdigit() for w in (*a[i1:i2], *b[j1:j2]) for c in w)
        and any(w not in STOP for w in a[i1:i2])
        and any(w not in STOP for w in b[j1:j2])
        for i1, i2, j1, j2 in swapped_spans(a, b)
    )


def separate(older_text: str, newer_text: str, entity: str) -> str | None:
    """Why the two statements are about different things, or None when nothing says so."""
    marked = _has_marker(newer_text, UPDATE_MARKERS) is not None
    if codes(older_text) != codes(newer_text) and not marked:
        return "distinct_identifier"
    if len(numbers(older_text) ^ numbers(newer_text)) >= 3 and not marked:
        return "distinct_identifier"  # a counter and a token, not one quantity
    a, b = head_words(older_text, entity), head_words(newer_text, entity)
    if (a and b and a != b) or _another_owner(older_text, newer_text):
        return "distinct_subject"
    oa, ob = _object(older_text), _object(newer_text)
    if oa and ob and not oa & ob:
        return "distinct_object"  # "waters the cactus" / "now waters the ferns"
    ka, kb = _named_kinds(older_text), _named_kinds(newer_text)
    if any(ka[noun] != kb[noun] for noun in ka.keys() & kb.keys()) and not marked:
        return "distinct_kind"  # "20 *Figma* licenses" / "20 *Notion* licenses"
    if bounded(newer_text) and not bounded(older_text):
        return "time_bounded"
    # "… the product owner *for search*" / "… *for ads*": a value for another context.
    ca, cb = (_context_words(t, entity) - marks(t) for t in (older_text, newer_text))
    if ca - cb and cb - ca and not marked:
        return "distinct_context"
    return None


def judge(older_text: str, older: FactKey, newer_text: str, newer: FactKey) -> Judgement:
    """`keys.judge_update`, with every `update` or `unsure` checked against `separate`."""
    verdict = judge_update(older_text, older, newer_text, newer)
    if verdict.decision in ("update", "unsure"):
        reason = separate(older_text, newer_text, older.entity)
        if reason is not None:
            return Judgement("compatible", reason)
    # One phrase in place of another, no change marked: two things or a new value, the words
    # cannot say which ("the Riverside *Cycling* Club" / "the Riverside *Running* Club"), so
    # nothing is superseded on the rules' word; the adjudicator, where there is one, decides.
    marked = _has_marker(newer_text, UPDATE_MARKERS) is not None
    if verdict.decision == "update" and not marked and swapped_phrase(older_text, newer_text):
        return Judgement("unsure", "swapped_phrase")
    return verdict


def near_duplicate(
    a_text: str, a_entity: str, b_text: str, b_entity: str, *, states_a_change: bool
) -> str | None:
    """Why two close statements are not one said twice, or None when they are."""
    if (a_entity and b_entity and a_entity != b_entity) or _another_owner(a_text, b_text):
        return "different_entity"
    if marks(a_text) != marks(b_text):
        return "distinct_marks"
    if states_a_change:
        return "states_a_change"
    return None
