"""The word lists and small text helpers the key derivation (`keys`) and the update rules
(`update_rules`) share: general English (verbs of residence, preference, work, plans,
possession; temporal and additive markers; stop words). Nothing here knows any data set.
Private to `agent_memory.tiers.semantic`.
"""

from __future__ import annotations

import re

CATCH_ALL_SUBJECT = "general"
FREE_TEXT_PREDICATE = "states"
SPEAKER_ENTITY = "user"
MAX_ENTITY_CHARS = 256
MAX_ATTRIBUTE_CHARS = 128

WORD = re.compile("[A-Za-z0-9][A-Za-z0-9'\u2019\\-]*")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def split(text: str) -> list[str]:
    return text.split()


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
    "change": split("switched switch switches changed change changes swapped"),
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
UPDATE_MARKERS = (
    "now",
    "no longer",
    "not anymore",
    "anymore",
    "any more",
    "moved to",
    "relocated",
    "changed",
    "switched",
    "instead",
    "nowadays",
    "these days",
    "from now on",
    "became",
    "has become",
    "was promoted",
    "got promoted",
    "updated",
    "turned",
    "new",
    "rescheduled",
    "postponed",
    "moved the",
    "pushed",
    "was changed",
    "has been changed",
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
CONTEXT_PREPOSITIONS = frozenset(split("for in on at during"))
CONTEXTUAL = frozenset({"preference", "plan"})


def words(text: str) -> list[str]:
    return [w.replace("\u2019", "'") for w in WORD.findall(text)]


def lower(tokens: list[str]) -> list[str]:
    return [t.lower() for t in tokens]
