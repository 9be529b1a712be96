"""What a statement is about, and whether two statements answer the same question: read
from the words at recall time, with no model and no word list keyed to cases.

**The entity.** A question names what it asks about: names ("Marco"), the first person
("I", "my": the user) and the nouns of its noun phrases ("the staging database", "my flight").
A statement mentions one of them *plainly* ("Marco moved to Berlin", "we upgraded the staging
database") or only as part of *another* entity: a possessive that owns something the question
does not name ("Marco's brother", "my sister's flight", "Emma's cat") or a modifier the
question does not have ("the internal API" for "the API", "the production database" for "the
staging database"). `about` says `asked`, `other` (some named thing is mentioned, and only as
part of another entity) or `none`.

**The slot.** Two statements about the asked entity answer the same question when both
align with it about as well and they say the same kind of thing: their words compared with
the values masked (numbers, dates and times, names and codes are values), or a value of the
kind the question asks for ("when" → a date or time, "how many" → a number, "who" → a name).
`answers_alike` compares two.

`current_first` applies both to a ranked head: a statement about another entity is placed
below the matching statements about the asked one, and among statements about the asked
entity that answer the question alike, the newest comes first (the older stays, just below).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, TypeGuard

from agent_memory.retrieval import STOPWORDS, CurrentConfig, sentences, stem
from agent_memory.tiers.semantic.keys import RELATIONS, TITLES, head_words, swapped_spans

_TOKEN = re.compile("[#@\\w][\\w'\u2019.@:/#-]*\\w|[#@\\w]")
_LABEL = re.compile(r"^\s*([^\W\d][\w'\-]*(?: [^\W\d][\w'\-]*){0,2}):\s")  # "user: …", "Ana: …"


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


DETERMINERS = _set("the a an this that these those each every")
POSSESSIVE_PRONOUNS = _set("my our your his her their its")
FIRST_PERSON = _set(
    "i me my mine myself we us our ours ourselves i'm i've i'd i'll we're we've we'd we'll"
)
FIRST_PERSON_OWNERS = frozenset({"my", "our"})
_AUX = _set(
    "do does did is are was were am be been can could will would should shall may might "
    "must has have had"
)
_WH = _set("what which who whom whose when where why how")
_OTHER = _set("other another")
# Words that date a thing rather than tell it apart: "Lena got a *new* number" is her number.
_DATING = _set("new old current latest updated former previous present original")
_PAST = frozenset(("old", "former", "previous"))  # as written, not stems
_NOW = frozenset(("new", "current", "latest"))


def _current(text: str) -> bool:
    """Whether the statement marks a thing as the current one ("Dario's *new* favourite",
    "my *current* phone"): the word right after an owner or determiner."""
    toks = tokens(text)
    return any(
        t.low in _NOW and (o.owner or o.low in POSSESSIVE_PRONOUNS or o.low in DETERMINERS)
        for o, t in itertools.pairwise(toks)
    )


# Units of time: "these *days* Tariq …", "last *week* the board …" open a sentence with when,
# not with a qualifier of the noun after them (a closed class of English).
_TIME_UNITS = _set(
    "second seconds minute minutes hour hours day days week weeks weekend weekends month "
    "months year years morning mornings afternoon evening evenings night nights time season"
)
_MONTHS = _set(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
_MONTH_STEMS = frozenset(map(stem, _MONTHS))
_WEEKDAYS = _set(
    "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays "
    "thursdays fridays saturdays sundays"
)
_NUMBER_WORDS = _set(
    "zero single one two three four five six seven eight nine ten eleven twelve fifteen "
    "twenty thirty forty fifty hundred thousand million billion dozen half twice double"
)
_ORDINALS = _set("first second third last")
# When a thing holds: parts of the day and days of the week, as stems.
_OCCASIONS = frozenset(
    map(stem, ["morning", "afternoon", "evening", "night", "weekend", "weekday", "tonight"])
) | frozenset(map(stem, _WEEKDAYS))
_WHEN = _MONTHS | _WEEKDAYS | _TIME_UNITS
# Adverbs that qualify a verb, not what a number counts ("changed *again* to 7305").
_ADVERBS = _set("again now still already also just even back instead")
_TIME = re.compile(r"^(\d{1,2}(:\d\d)?(am|pm)|\d{1,2}:\d\d|\d{1,2}(st|nd|rd|th))$")
_YEAR = re.compile(r"^(19|20)\d\d$")

Wants = Literal["date", "number", "name", "any"]
About = Literal["asked", "other", "none"]


@dataclass(frozen=True)
class Token:
    text: str  # as written
    low: str  # case-folded, possessive stripped
    owner: bool  # written with a possessive ("Marco's", "parents'")
    capital: bool  # capitalised, not a sentence's first word
    start: bool  # a sentence's (or a label's) first word
    pause: bool = False  # written after a comma: "at the AGM, *Mireille* was elected"


def _fold(word: str) -> tuple[str, bool]:
    low = word.casefold().replace("\u2019", "'")
    if low.endswith("'s"):
        return low[:-2], True
    if low.endswith("s'"):
        return low[:-1], True
    return low, False


@lru_cache(maxsize=8_192)
def tokens(text: str) -> tuple[Token, ...]:
    """The words of `text` (a speaker label such as "Ana: " is dropped), each with its
    case-folded form and whether it is capitalised mid-sentence or owns what follows."""
    label = _LABEL.match(text)
    body = text[label.end() :] if label else text
    out: list[Token] = []
    start, pause = True, False
    for match in _TOKEN.finditer(body):
        word = match.group()
        after = body[match.end() : match.end() + 1]
        if after in ("'", "\u2019") and word[-1:] in ("s", "S"):
            word += "'"  # "the kids' school": a plural possessive
        low, owner = _fold(word)
        out.append(Token(word, low, owner, word[:1].isupper() and not start, start, pause))
        # The next word starts a sentence when this one ended one ("Dr." ends none).
        start = after in ("!", "?", ":", ";") or (after == "." and word not in TITLES)
        pause = after == ","
    return tuple(out)


def _content(word: str) -> bool:
    return word not in STOPWORDS and word not in _AUX and len(word) > 1


def _stems(toks: Sequence[Token]) -> frozenset[str]:
    return frozenset(stem(t.low) for t in toks if _content(t.low))


@dataclass(frozen=True)
class Question:
    """What a question asks about: its subject (`subject`, the stems of the noun phrase the
    question is about: "the staging database", "Gina's dentist appointment", "the name of the
    boat"), the last word of each of its noun phrases its `heads`, its owner `possessor`
    (`~person` for "my"); `names`
    (capitalised words) and `person` (the first person) anywhere in it; the stems of all its
    content words (`words`); the kind of value it asks for (`wants`)."""

    subject: frozenset[str]
    heads: frozenset[str]
    required: frozenset[str]  # the head of "for search" in "the product owner for search"
    possessor: str
    names: frozenset[str]
    person: bool
    words: frozenset[str]
    wants: Wants
    yes_no: bool  # "Does Ivo smoke?", "Is the pool open?"
    # A name or code right after a word ("Invoice INV-1002", "Alice Jones"): a mention
    # followed by another one is another thing.
    followers: Mapping[str, str]
    owners: frozenset[str]  # words that own something in the question ("Mara's flight")
    periods: frozenset[str]  # periods named relative to now ("this week"): `_periods`

    @property
    def anchored(self) -> bool:
        return bool(self.names or self.person or self.subject or self.followers)


def _wants(low: Sequence[str]) -> Wants:
    head = " ".join(low[:3])
    if re.match(r"(when|what (time|day|date|month|year)|which (day|date|month|year))\b", head):
        return "date"
    if re.match(r"how (many|much|old|long|often|far|big|fast)\b", head):
        return "number"
    if re.match(r"(who|whom|whose)\b", head):
        return "name"
    return "any"


_OF = frozenset(("of", "for", "on", "at", "in", "to"))
_RELATION_STEMS = frozenset(map(stem, RELATIONS))
_QUALIFY = frozenset(("from", "in", "at"))
_PLACE = _QUALIFY | {"by", "with"}  # what places a thing: "the wifi *in* the garage", "*by* bike"
_PURPOSE = frozenset(("for", "to"))
_STRANDED = (_OF | _PLACE | {"into"}) - {"of"}  # what a question can end with
_BREAK = Token("", "", owner=False, capital=False, start=False)  # between two noun phrases


def _time_phrase(toks: Sequence[Token], at: int) -> bool:
    """A determiner that opens a time ("*these* days", "*this* week"), not a noun phrase
    ("the *morning* standup")."""
    unit = at + 1 < len(toks) and toks[at + 1].low in _TIME_UNITS
    return unit and not (at + 2 < len(toks) and _content(toks[at + 2].low))


def _subject(toks: Sequence[Token], nested: bool = False) -> list[Token]:
    """The noun phrase a question is about: the one after its auxiliary ("where does *Marco*
    live", "what is *the API rate limit*", "is *the pool* open"), else the first after its
    verb ("who leads *the growth team*"). A run of a name, or of the words after a
    determiner or possessive (owners included: "Gina's dentist appointment"); when it runs
    to the question's end in a do- or yes-no question, its last word is the verb or the
    predicate ("when does the sprint *end*", "is the pool *open*")."""
    low = [t.low for t in toks]
    aux = None if nested else next((i for i, w in enumerate(low) if w in _AUX), None)
    start = aux + 1 if aux is not None and (aux == 0 or low[0] in _WH) else int(not nested)
    while start < len(toks) and not (
        (nested and _content(toks[start].low))
        or (toks[start].low in DETERMINERS and not _time_phrase(toks, start))
        or toks[start].low in POSSESSIVE_PRONOUNS
        or toks[start].low in FIRST_PERSON
        or toks[start].text[:1].isupper()
        or toks[start].owner
    ):
        start += 1
    bare = False
    if start >= len(toks) and not nested and low and low[0] in _WH:
        # A bare noun: "when is *standup*", "who handles *payroll*" (after the verb).
        after = aux + 1 if aux is not None else 2
        start = next((i for i in range(after, len(toks)) if _content(low[i])), len(toks))
        bare = True
    if start >= len(toks):
        return []
    first = toks[start]
    if first.low in FIRST_PERSON and first.low not in FIRST_PERSON_OWNERS:
        # "where can I find *the API key*": what the speaker acts on, where the verb takes
        # a noun phrase; else the speaker ("where do *I* live")
        obj = toks[start + 2] if start + 2 < len(toks) and not nested else None
        if obj is not None and (
            obj.low in DETERMINERS or obj.low in POSSESSIVE_PRONOUNS or obj.text[:1].isupper()
        ):
            return _subject([toks[0], *toks[start + 2 :]]) or [first]
        return [first]
    named = first.text[:1].isupper() and first.low not in DETERMINERS
    keep = (
        named
        or first.owner
        or first.low in FIRST_PERSON
        or ((nested or bare) and _content(first.low))
    )
    run = [first] if keep else []
    j = start + 1
    while j < len(toks) and _content(toks[j].low) and toks[j].low not in _WH:
        if named and not toks[j].text[:1].isupper() and not any(t.owner for t in run):
            break  # a name's run ends at its last capitalised word, unless the name owns
        if run and _participle(toks, j):
            # "how often is the database *backed up*": the predicate, not the noun; a place
            # after it still qualifies the noun ("the network called *in the Leeds office*")
            if j + 1 < len(toks) and toks[j + 1].low in _QUALIFY:
                j += 1
            break
        run.append(toks[j])
        j += 1
    does = aux is not None and low[aux] in ("do", "does", "did")
    question_like = does or aux == 0
    words = [t for t in run if t.low not in FIRST_PERSON]
    verb_last = len(words) > 1 and not words[-1].text[:1].isupper()
    # "what does Hannah's team *use* for tracking": in a do-question the run's last word is
    # the verb, and what follows it belongs to the verb, not to the noun phrase.
    # ("does the nightly backup *of* the billing database run": "of" follows a noun)
    if does and verb_last and j < len(toks) and toks[j].low in _OF - {"of"} and not nested:
        run.pop()
        return run
    # "the name *of the boat*", "the venue *for the workshop*": one more noun phrase.
    # ("the hours *on a Saturday*": a time, not a noun phrase)
    timed = j + 2 < len(toks) and {toks[j + 1].low, toks[j + 2].low} & _WHEN
    # ("the key *to the front door*"; not "the place *to eat*": "to" before a verb)
    following = toks[j + 1] if j + 1 < len(toks) else None
    infinitive = (
        following is not None
        and toks[j].low == "to"
        and following.text.islower()
        and following.low not in DETERMINERS | POSSESSIVE_PRONOUNS
    )
    if following is not None and toks[j].low in _OF and not nested and not timed and not infinitive:
        tail = _subject(toks[j + 1 :], nested=True)
        if does and len(tail) > 1 and tail[-1] is toks[-1] and tail[-1].text.islower():
            tail.pop()  # "does the backup of the billing database *run*": the verb
        return [*run, _BREAK, *tail] if tail else run
    if question_like and j >= len(toks) and verb_last:
        if does and len(words) > 2 and words[-1].low.endswith("ing"):
            run.pop()  # "when does the car lease *need renewing*": the verb's complement
        run.pop()
    return run


# English's irregular past participles that are not also common nouns ("set", "run", "cut").
_IRREGULAR_PARTICIPLES = _set(
    "written taken given driven broken chosen frozen hidden spoken stolen eaten forgotten "
    "gotten known shown grown thrown drawn worn done gone seen made kept held built sent "
    "spent paid sold told bought brought thought caught taught won begun understood"
)


def _participle(toks: Sequence[Token], at: int) -> bool:
    """A lower-case -ed word (or irregular participle) that no noun follows: a passive's
    participle ("is the database *backed* up", "where is my car *parked*", "which language
    is the billing service *written* in"), not an adjective ("the *preferred* editor")."""
    word, following = toks[at], toks[at + 1].low if at + 1 < len(toks) else ""
    passive = word.low.endswith("ed") or word.low in _IRREGULAR_PARTICIPLES
    return passive and not word.text[:1].isupper() and not _content(following)


@lru_cache(maxsize=1_024)
def read_question(text: str) -> Question:
    """What `text` asks about (`Question`)."""
    toks = tokens(text)
    low = [t.low for t in toks]
    subject = _subject(toks)
    parts: list[list[Token]] = [[]]
    for t in subject:
        if t is _BREAK:
            parts.append([])
        elif _content(t.low) and t.low not in FIRST_PERSON:
            parts[-1].append(t)
    nouns = [t for part in parts for t in part]
    # The last owner: "my brother's wedding" is the brother's.
    owner = next((t for t in reversed(subject) if t.owner or t.low in FIRST_PERSON_OWNERS), None)
    # "What car does Fiona have?": the question asks about something Fiona owns.
    owners = {stem(t.low) for t in toks if t.owner and _content(t.low)}
    wh_noun = len(low) > 2 and low[0] in _WH and _content(low[1]) and low[1] not in _WH
    # "Which city does Ngozi live *in*?": a preposition left at the end takes the wh-noun as
    # its object, a place or a time, not a thing the subject has.
    wh_noun = wh_noun and low[-1] not in _STRANDED
    if wh_noun and subject and subject[0].text[:1].isupper() and not subject[0].owner:
        owners.add(stem(subject[0].low))
    return Question(
        subject=frozenset(stem(t.low) for t in nouns),
        heads=frozenset(stem(p[-1].low) for p in parts if p and not p[-1].owner),
        required=frozenset(stem(p[-1].low) for p in parts[1:] if p),
        possessor=""
        if owner is None
        else ("~person" if owner.low in FIRST_PERSON else stem(owner.low)),
        names=frozenset(
            stem(t.low) for t in toks if t.capital and t.low != "i" and _content(t.low)
        ),
        person=any(t.low in FIRST_PERSON for t in toks),
        words=_stems(toks),
        wants=_wants(low),
        yes_no=bool(low) and low[0] in _AUX,
        owners=frozenset(owners),
        periods=_periods(toks),
        followers={
            **{
                stem(a.low): b.low
                for i, (a, b) in enumerate(itertools.pairwise(toks))
                if _content(a.low)
                and not a.owner
                and _identifies(b)
                and not (i == 1 and low[0] == "who")  # "who *coaches* Jake's team": a verb
            },
            **{
                stem(t.low): f"{toks[i + 1].low} {qualifier}"
                for i, t in enumerate(toks[:-2])
                if t.capital and (qualifier := _qualifier(toks, i))
            },
        },
    )


def _qualifier(toks: Sequence[Token], at: int) -> str:
    """The word of a place or group that qualifies the name at `at` ("Tom *from accounting*",
    "Sara *in Berlin*", "Emma from *the design* team"), as a stem, or ""."""
    if toks[at + 1].low not in _QUALIFY:
        return ""
    rest = itertools.dropwhile(lambda t: t.low in DETERMINERS, toks[at + 2 : at + 4])
    word = next(rest, None)
    if word is None or any(c.isdigit() for c in word.low) or word.low in _WHEN:
        return ""  # "Alex *on 7/10*", "Sara in May": when, not who
    named = _content(word.low) or word.text.isupper()  # "from IT"
    return stem(word.low) if named else ""


def _identifies(t: Token) -> bool:
    """A word that names one thing when it follows another: a code, a number, a name."""
    return any(c.isdigit() for c in t.low) or (t.text[:1].isupper() and _content(t.low))


def _followed_foreign(toks: Sequence[Token], at: int, q: Question) -> bool:
    """Whether the mention at `at` is followed by a name or code other than the question's
    ("Invoice INV-1001" when the question asks about "Invoice INV-1002"), or qualified by
    another place or group ("Tom from sales" when it asks about Tom from accounting)."""
    wanted = q.followers.get(stem(toks[at].low))
    after = toks[at + 1] if at + 1 < len(toks) else None
    if wanted is None or after is None:
        return False
    if " " in wanted:
        prep, _, word = wanted.partition(" ")
        return after.low == prep and _qualifier(toks, at) not in ("", word)
    return _identifies(after) and after.low != wanted


def _owns_another(toks: Sequence[Token], at: int, q: Question) -> bool:
    """Whether the word at `at` owns something the question does not ask about: a relation
    noun among the next words of its noun phrase ("Keiko's old *roommate*", "my *sister's*"),
    or, where the question has the same owner own one thing, another ("Mara's *train*" when
    it asks about "Mara's flight"; "our *CFO*" when it asks about "our CEO")."""
    parallel = stem(toks[at].low) in q.owners or (
        toks[at].low in FIRST_PERSON_OWNERS and q.possessor == "~person" and bool(q.heads)
    )
    for t in toks[at + 1 : at + 4]:
        if t.low in _OTHER and t.low not in q.words:
            return True  # "Hannah's *other* team": not the one asked about
        if t.low == "own" or t.low in _DATING:
            continue  # "Priyanka's *own* one-on-one", "Tariq's *old* laptop": the same thing
        if not _content(t.low) or stem(t.low) in q.words:
            return False
        if t.low in RELATIONS or parallel:
            return True
        if t.owner:
            return False
    return False


def _own_subject_elsewhere(text: str, q: Question) -> bool:
    """Whether the statement's own subject (the content words before its main verb) is a
    thing the question never names ("*the file server* is backed up weekly" for "how often
    is the database backed up")."""
    subject = {stem(w) for w in head_words(text, "") if _content(w)}
    return bool(subject) and not subject & q.words


def _subject_elsewhere(text: str, q: Question) -> bool:
    """`_own_subject_elsewhere`, unless the statement names the speaker the question asks
    about."""
    return _own_subject_elsewhere(text, q) and not (q.person and "~person" in mentions(text))


def _placed_elsewhere(toks: Sequence[Token], at: int, q: Question) -> bool:
    """The head at `at` placed by a noun the question lacks, where the question qualifies it
    ("the wifi *in the garage*" when "the living room wifi" is asked); placed by a name, or
    said to be for something ("for" / "to"), only where the statement also lacks the
    question's own name or qualifier."""
    qualified = q.subject - q.heads - q.owners
    after = [t for t in toks[at + 1 : at + 4] if t.low not in DETERMINERS]
    placed = (
        bool(qualified)
        and toks[at].low not in _MONTHS  # "March *from the lab*": a time is not placed
        and len(after) > 1
        and _content(after[1].low)
        and stem(after[1].low) not in q.words
    )
    if not placed or after[0].low not in _PLACE | _PURPOSE:
        return False
    if after[0].low == "to" and any(_past_tense(t.low) for t in toks[max(0, at - 5) : at]):
        return False  # "I've *moved* the spare keys *to* the lockbox": where it went
    lacking = qualified - _stems(toks)
    # ("the invoice *for April*" when March's is asked; "moved *to June*" is a new value)
    month = after[0].low == "for" and after[1].low in _MONTHS
    if not (after[1].text.islower() or month):
        # "the gig *at the Fleece* in Bath" when "the Bristol gig" is asked: a name placing
        # it, where the statement lacks the question's own name.
        return after[0].low in _PLACE and bool(lacking & q.names)
    # "the budget *for marketing*" when "the sales budget" is asked: what a thing is for
    # makes another one only where the statement lacks the question's own qualifier.
    return after[0].low in _PLACE or bool(lacking)


def _compound_elsewhere(toks: Sequence[Token], at: int, q: Question) -> bool:
    """The head at `at` followed by a noun the question lacks, and then by the question's
    own verb: it qualifies that noun ("the *intern* coordinator starts at 8" when "when do
    the interns start" is asked)."""
    if at + 2 >= len(toks):
        return False
    noun, verb = toks[at + 1], toks[at + 2]
    return (
        toks[at].text.islower()
        and noun.text.islower()
        and verb.text.islower()
        and _content(noun.low)
        and not _past_tense(noun.low)
        and stem(noun.low) not in q.words
        and stem(verb.low) in q.words - q.subject
    )


def _other_possessor(toks: Sequence[Token], at: int, q: Question) -> bool:
    """The head at `at` owned by a name the question does not own it by ("*Daniel's*
    manager" when Maya's is asked)."""
    owner = toks[at - 1] if at > 0 else None
    return (
        q.possessor in q.names
        and owner is not None
        and owner.owner
        and owner.capital
        and stem(owner.low) != q.possessor
    )


def _past_tense(word: str) -> bool:
    """A word read as a verb's past form ("raised", "changed"), not a noun ("bed")."""
    return len(word) > 4 and word.endswith("ed")


def _owned_foreign(toks: Sequence[Token], at: int, words: frozenset[str]) -> bool:
    """Whether the word at `at` owns a content word the question does not name."""
    following = toks[at + 1] if at + 1 < len(toks) else None
    return (
        following is not None
        and _content(following.low)
        and not _past_tense(following.low)  # "the gym *raised* my membership"
        and following.low not in FIRST_PERSON
        and stem(following.low) not in words
    )


def _modified_foreign(toks: Sequence[Token], at: int, q: Question) -> bool:
    """Whether the word at `at` is qualified, inside its noun phrase, by a word the question
    does not have: the words back to a determiner or possessive ("the *internal* API",
    "my *son's* dentist appointment"), or by another owner than the question's ("*my*
    appointment" when it asks about Gina's). Numbers and codes there are values."""
    modifiers: list[Token] = []
    proper = toks[at].capital and not toks[at].text.isupper()  # "Acme", not "API"
    # "the old office", "our *first* apartment": not the new one, not the current one
    dating = any(stem(w) in q.words for w in _DATING | _ORDINALS)
    for back in range(at - 1, max(-1, at - 4), -1):
        t = toks[back]
        if toks[back + 1].start or toks[back + 1].pause:
            # a noun phrase does not run back across a sentence's start, a colon or a comma
            # ("… got that wrong: *Thandiwe* was born", "at the AGM, *Mireille* was elected")
            return False
        if t.low in _OTHER and t.low not in q.words:
            return True  # "the *other* office"
        if t.low == "own":
            continue  # "my *own* dentist": whose it is, said twice
        if t.low in DETERMINERS:
            break
        if t.low in POSSESSIVE_PRONOUNS:
            if t.low in FIRST_PERSON_OWNERS and q.possessor not in ("", "~person"):
                return True
            break
        if t.owner:
            modifiers.append(t)
            # The owner's own qualifier: "the *blue* team's sprint" is not the red team's.
            qualifier = toks[back - 1] if back > 1 else None
            if (
                qualifier is not None
                and _content(qualifier.low)
                and qualifier.low not in _TIME_UNITS  # "these *days* Tariq's …"
                and toks[back - 2].low in DETERMINERS
            ):
                modifiers.append(qualifier)
            break
        # A unit of time right before a common noun qualifies it ("the *night* shift", "the
        # *second* floor bathroom"), elsewhere it says when ("these *days* Marco …").
        timed = t.low in _TIME_UNITS and not toks[back + 1].text.islower()
        if proper and not _content(t.low) and modifiers:
            break  # "on *Main* Street": a name's phrase starts after a preposition too
        if t.start and back == at - 1 and _content(t.low) and not timed and not proper:
            # a sentence that opens with a bare noun phrase ("*Orchestra* rehearsal is on
            # Wednesday"), not a verb ("*Moved* rehearsal …")
            if not _past_tense(t.low) and t.low not in _DATING:
                modifiers.append(t)
            break
        if not _content(t.low) or t.start or timed:
            return False  # not inside a noun phrase that starts with a determiner
        if proper and t.text.islower():
            return False  # "after the layoffs Acme", "my cousin Maria": a name is not qualified
        if t.low not in _DATING or dating:
            modifiers.append(t)
    else:
        return False
    # A code or a month there is a value ("the 9:15 flight", "the *September* board
    # meeting"), unless the question qualifies by one of its own: then another is another
    # thing ("the Q4 target" when Q3's is asked).
    codes = any(any(c.isdigit() for c in w) for w in q.words)
    months = bool(q.words & _MONTH_STEMS)
    return any(
        stem(m.low) not in q.words
        for m in modifiers
        if _content(m.low)
        and (codes or not any(c.isdigit() for c in m.low))
        and (months or m.low not in _MONTHS)
    )


@lru_cache(maxsize=16_384)
def about(question: str, text: str, strict: bool = True) -> About:
    """Whether `text` is about what `question` asks about (module docstring). Not `strict`:
    a qualifier the question does not have leaves the mention plain (when no statement
    mentions the subject unqualified, "the community pool" is "the pool" asked about)."""
    q = read_question(question)
    if not q.anchored:
        return "none"
    toks = tokens(text)
    # {anchor: [foreign?, …]} over the anchor's mentions in the text.
    seen: dict[str, list[bool]] = {}
    # "the *team* standup" for "when is the team lunch": with the question's head nowhere in
    # the statement, a qualifier of it that opens a noun phrase and is followed by a word the
    # question lacks qualifies another thing.
    headless = strict and not any(stem(t.low) in q.heads for t in toks)
    for i, t in enumerate(toks):
        word = stem(t.low)
        if not _content(t.low) and t.low not in FIRST_PERSON:
            continue
        if q.person and t.low in FIRST_PERSON:
            owns = t.low in FIRST_PERSON_OWNERS and _owns_another(toks, i, q)
            seen.setdefault("~person", []).append(owns)
        elif word in q.heads or (word in q.names and word in q.subject):
            # The subject itself: another owner, qualifier or code makes another thing.
            foreign = (
                (t.owner and _owns_another(toks, i, q))
                or (strict and _modified_foreign(toks, i, q))
                or _followed_foreign(toks, i, q)
                or _other_possessor(toks, i, q)
                or (strict and _placed_elsewhere(toks, i, q))
                or (strict and _compound_elsewhere(toks, i, q))
            )
            seen.setdefault(word, []).append(foreign)
        elif word in q.names or word in q.followers:
            foreign = (t.owner and _owns_another(toks, i, q)) or _followed_foreign(toks, i, q)
            seen.setdefault(word, []).append(foreign)
        elif word in q.subject:
            # "the kids' *football* practice", "Pete's favourite *book*": an owner, or a word
            # an owner qualifies, followed by a word the question does not have.
            owned = i > 0 and (toks[i - 1].owner or toks[i - 1].low in POSSESSIVE_PRONOUNS)
            opens = headless and i > 0 and toks[i - 1].low in DETERMINERS
            foreign = ((t.owner or owned or opens) and _owned_foreign(toks, i, q.words)) or (
                # the question's head nowhere: the word stands for it ("my *personal* email"
                # when "my primary email address" is asked)
                headless and _modified_foreign(toks, i, q)
            )
            seen.setdefault(word, []).append(foreign)
    # A statement that never names the question's named owner ("Gina's appointment") is not
    # about it, however alike its words.
    # ("The admin dashboard repo runs on *Node* 18" for "which Node version is
    # checkout-service on": a name outside the question's subject is no anchor for it.)
    subjectless = q.subject and not seen.keys() & (q.subject | {"~person"})
    if (not seen or subjectless) and _subject_elsewhere(text, q):
        return "other"
    if not seen or not q.required <= seen.keys():
        return "none"
    # "Sven *teaches* history" when what Sven's *sister* teaches is asked: the owner does
    # what the question asks of the relative ("Maya reports to Daniel" still answers "who
    # is Maya's manager", which asks nothing to be done).
    relatives = {h for h in q.heads if h in _RELATION_STEMS} - seen.keys()
    done = (q.words - q.subject) & _stems(toks)
    if relatives and done and q.possessor in seen and not any(t.owner for t in toks):
        return "other"
    named_owners = q.owners & q.names  # "*Harriet's* parents' evening": Harriet's
    if (q.possessor in q.names and q.possessor not in seen) or (
        named_owners and not named_owners & seen.keys()
    ):
        # "Daniel's manager" for "who is Maya's manager": the head another name owns.
        heads = [flags for word, flags in seen.items() if word in q.heads]
        return "other" if heads and all(all(flags) for flags in heads) else "none"
    if any(all(flags) for flags in seen.values()):
        return "other"
    # "*the dentist* can fit us in": the speaker named only past a subject the question lacks
    # tells nothing of "my GP"
    speaker_only = seen.keys() == {"~person"} and q.heads and q.possessor == "~person"
    if speaker_only and _own_subject_elsewhere(text, q):
        return "none"
    # "what do I take *in the morning*", "the *Friday* lunch special": what holds at another
    # part of the day or on another day is another fact.
    asked_on = q.words & _OCCASIONS
    said_on = {stem(t.low) for t in toks} & _OCCASIONS
    if asked_on and said_on and not asked_on & said_on:
        return "other"
    # "on call *next week*" when this week's is asked: another period, another fact.
    said_in = _periods(toks)
    return "other" if q.periods and said_in and not q.periods & said_in else "asked"


def _periods(toks: Sequence[Token]) -> frozenset[str]:
    """The periods named relative to now: "this week", "next month", "last year"."""
    return frozenset(
        f"{a.low} {stem(b.low)}"
        for a, b in itertools.pairwise(toks)
        if a.low in ("this", "next", "last") and b.low in _TIME_UNITS
    )


_DAY_WORDS = frozenset(("today", "tomorrow", "tonight", "yesterday", "noon", "midnight", "weekend"))


def _is_value_name(t: Token) -> bool:
    """A name or code: capitalised (a sentence's first word too, unless a function word),
    or written like an address, a handle or a channel."""
    if t.low in FIRST_PERSON or not _content(t.low):
        return False
    return t.text[:1].isupper() or any(c in t.low for c in "@#_") or "." in t.low.strip(".")


def _lower_word(t: Token | None) -> TypeGuard[Token]:
    """A lower-case content word: what a number before it can count ("3 *nodes*")."""
    return t is not None and t.text.islower() and _content(t.low)


@lru_cache(maxsize=16_384)
def values(text: str) -> Mapping[str, frozenset[str]]:
    """The values a statement holds, by kind: `date` (months, weekdays, times, ordinals,
    years, day words), `number:<unit>` (digits and number words, with the word after them,
    else the word before: "1500 dollars", "Postgres 14") and `name` (capitalised words, codes,
    addresses). Keyed by kind, each the set of values (case-folded)."""
    toks = tokens(text)
    out: dict[str, set[str]] = {}

    def unit(i: int) -> str:
        """What the number counts: the lower-case word after it, or after a name ("3
        *nodes*", "15 Crash Course *videos*"), else the word before, past function words and
        adverbs ("*floor* 7 after the shuffle", "*Postgres* 14", "the phone *number* is
        555-0142", "the *code* changed again to 7305", "*extension* is actually 4401")."""
        # (not past a comma: "the gate code is 4417, I *swapped* …")
        phrase = itertools.takewhile(lambda t: not t.pause, toks[i + 1 : i + 4])
        ahead = next(itertools.dropwhile(lambda t: t.capital, phrase), None)
        if _lower_word(ahead) and not ahead.low[:1].isdigit():
            return stem(ahead.low)
        for t in toks[max(0, i - 4) : i][::-1]:
            # Not a verb ("the number *changed* to 555") nor an adverb ("is *actually* 4401").
            adverb = t.low.endswith("ly") or t.low in _ADVERBS
            if _content(t.low) and not (_past_tense(t.low) or adverb):
                return "" if t.low[:1].isdigit() else stem(t.low)
        return ""

    for i, t in enumerate(toks):
        # A year is a date unless it names a version of something ("Excel 2016") or counts
        # what follows it ("2000 *euros*").
        after = toks[i + 1] if i + 1 < len(toks) else None
        named = i > 0 and _is_value_name(toks[i - 1])  # "Excel 2016", not "In 2019"
        year = _YEAR.match(t.low) and not named and not _lower_word(after)
        clock = after is not None and after.low in ("am", "pm") and t.low.isdigit()
        if (
            clock  # "7 am": a time written apart
            or t.low in _MONTHS
            or t.low in _WEEKDAYS
            or t.low in _DAY_WORDS
            or _TIME.match(t.low)
            or year
        ):
            out.setdefault("date", set()).add(t.low)
        elif any(c.isdigit() for c in t.low):
            letters = any(c.isalpha() for c in t.low.rstrip("kmbs%"))
            kind = "name" if letters else f"number:{unit(i)}"
            out.setdefault(kind, set()).add(t.low)
        elif t.low in _NUMBER_WORDS:
            out.setdefault(f"number:{unit(i)}", set()).add(t.low)
        elif _is_value_name(t):
            out.setdefault("name", set()).add(t.low)
    return {kind: frozenset(found) for kind, found in out.items()}


def holds_wanted(question: str, text: str) -> bool:
    """Whether `text` holds a value of the kind `question` asks for: a number for "how many
    / much / long …", a date or a number for "when …" ("three weeks ago"). False for a
    question that asks for anything else."""
    wants = read_question(question).wants
    if wants not in ("number", "date"):
        return False
    kinds = values(text).keys()
    return any(k.startswith("number:") for k in kinds) or (wants == "date" and "date" in kinds)


_RELATIVE = _set("which who whom whose that")


def _counted(word: str) -> bool:
    """A number, a time or an ordinal: a value, whatever it counts."""
    return word in _WHEN or word in _ORDINALS or any(c.isdigit() for c in word)


@lru_cache(maxsize=8_192)
def _parts(text: str) -> tuple[tuple[str, str, bool], ...]:
    """`text`'s words, case-folded (a hyphenated one split: "back-door"), each with its stem
    and whether it names a value: `_counted` or capitalised mid-sentence. Memoised:
    `contrast` reads each of the head's statements once per other statement."""
    return tuple(
        (part, stem(part), t.capital or _counted(part))
        for t in tokens(text)
        for part in t.low.split("-")
        if part
    )


def contrast(question: str, a: str, b: str) -> int:
    """Which of two statements the question tells apart from the other: 1 for `a`, -1 for
    `b`, 0 for neither. Two near-copies with a phrase in place of another
    (`keys.swapped_spans`: "the Postgres *replica* in Frankfurt" / "the Postgres *primary*
    in Frankfurt") are about two things when the question's noun phrase names a
    word of one phrase that the other statement lacks: that statement is the one asked
    about, the other a look-alike. Not read as two things:
    - a phrase missing from one statement ("Sven's party" / "Sven's *birthday* party"): a
      later statement often names a thing shorter;
    - phrases that hold a number or a time, or that a value ends ("the project *was renamed
      from* Falcon" / "the project *codename is* Falcon"): a value told anew; a name or an
      acronym inside the phrase tells things apart ("the *NLP* team" / "the *vision* team");
    - a yes-no question's words: it names the value it checks ("is the entrance *closed*")."""
    q = read_question(question)
    if q.yes_no:
        return 0
    named = {stem(part) for word in q.subject for part in word.split("-") if part}
    pa, pb = _parts(a), _parts(b)
    wa, wb = [s for _, s, _ in pa], [s for _, s, _ in pb]
    votes: set[int] = set()
    for i1, i2, j1, j2 in swapped_spans(wa, wb):
        if pa[i2][2] and wa[i2] not in q.words:  # a phrase a value ends
            continue
        # A relative clause describes the thing ("the iOS app, *which runs* on Bitrise").
        if any(_counted(w) or w in _RELATIVE for w, _, _ in (*pa[i1:i2], *pb[j1:j2])):
            continue
        in_a = (named & set(wa[i1:i2])) - set(wb)
        in_b = (named & set(wb[j1:j2])) - set(wa)
        if in_a and not in_b:
            votes.add(1)
        elif in_b and not in_a:
            votes.add(-1)
    return votes.pop() if len(votes) == 1 else 0


def _kinds(text: str, asked: frozenset[str]) -> frozenset[str]:
    """The kinds of value `text` holds beyond the question's own words."""
    return frozenset(
        kind for kind, found in values(text).items() if any(stem(v) not in asked for v in found)
    )


def answers_alike(question: str, a: Candidate, b: Candidate, closeness: float) -> bool:
    """Whether statements `a` and `b` (about the asked entity) answer `question` alike: any
    two do for a yes-no question; for one that asks for a kind of value, both hold one of
    that kind; otherwise they hold a value of the same kind ("1500 dollars" / "2200
    dollars", "Falcon" / "Osprey") or, holding none, the embedder finds both about as close
    to the question (within `closeness`)."""
    q = read_question(question)
    if q.yes_no:
        return True
    ka, kb = _kinds(a.text, q.words), _kinds(b.text, q.words)
    if q.wants != "any":
        return any(k.startswith(q.wants) for k in ka) and any(k.startswith(q.wants) for k in kb)
    if ka and kb:
        return bool(ka & kb)
    return (
        a.similarity is not None
        and b.similarity is not None
        and abs(a.similarity - b.similarity) <= closeness
    )


@dataclass(frozen=True)
class Candidate:
    """A ranked statement: its id, score, text and when it was stated."""

    fact_id: str
    score: float
    text: str
    stated: tuple[int, int]  # (valid_from, created_at), ms
    similarity: float | None = None  # the embedder's cosine with the question, if known
    session: str | None = None  # the conversation or run it was said in


_GAP = 1e-6  # scores are rounded to 6 places


def _at_least(a: Candidate, share: float, b: Candidate) -> bool:
    """Whether `a` is at least `share` as close to the question as `b`: by the embedder's
    similarities when both have one (they do not depend on the tenant's other memories, as
    fused scores normalised over the candidates do), else by score."""
    if a.similarity is not None and b.similarity is not None:
        return a.similarity >= share * b.similarity
    return a.score >= share * b.score


# A question that asks for the value before a change ("where did I *initially* keep …").
_EARLIER = re.compile(
    r"\b(previous|previously|initially|originally|earlier|formerly|used to|at first|before)\b",
    re.IGNORECASE,
)


def asks_earlier(question: str) -> bool:
    return _EARLIER.search(question) is not None


def current_first(
    question: str, head: Sequence[Candidate], config: CurrentConfig
) -> tuple[dict[str, float], dict[str, str]]:
    """New scores for some of `head` (best first), and the statements outdated by a newer
    one that answers alike ({older id: newest id}): see the module docstring. Statements
    (memories without a session) and the turns of conversations are read apart."""
    statements = [c for c in head if c.session is None]
    turns = [c for c in head if c.session is not None]
    scores, outdated = _statements_first(question, statements, config)
    return {**_turns_first(question, turns, config), **scores}, outdated


def _statements_first(
    question: str, head: Sequence[Candidate], config: CurrentConfig
) -> tuple[dict[str, float], dict[str, str]]:
    q = read_question(question)
    if not q.anchored or len(head) < 2:
        return {}, {}
    kinds = {c.fact_id: about(question, c.text) for c in head}
    if "asked" not in kinds.values():
        kinds = {c.fact_id: about(question, c.text, strict=False) for c in head}
    for a, b in itertools.combinations(head, 2):
        side = contrast(question, a.text, b.text)
        if side:
            kinds[(b if side > 0 else a).fact_id] = "other"
    asked = [c for c in head if kinds[c.fact_id] == "asked"]
    if not asked:
        return {}, {}
    best = asked[0]
    alike = [
        c
        for c in asked
        if c is best
        or (
            _at_least(c, config.ratio, best)
            # "Dario's *new* favourite is the diavola": a statement that says it tells the
            # current value answers alike, however far the embedder puts it
            and (answers_alike(question, best, c, config.closeness) or _current(c.text))
        )
    ]
    scores: dict[str, float] = {}
    outdated: dict[str, str] = {}
    if len(alike) > 1:
        # A statement about "Kim's *old* team" tells an earlier value whenever it was said:
        # it goes with the oldest (unless the question itself names a time: "the old team").
        dated = bool(q.words & _DATING)

        def when(c: Candidate) -> tuple[bool, tuple[int, int]]:
            past = not dated and bool(_PAST & head_words(c.text, ""))
            return not past, c.stated

        newest_first = sorted(alike, key=when, reverse=not asks_earlier(question))
        ordered = sorted((c.score for c in alike), reverse=True)
        scores = {c.fact_id: s for c, s in zip(newest_first, ordered, strict=True)}
        outdated = {c.fact_id: newest_first[0].fact_id for c in newest_first[1:]}
    floor = min(scores.get(c.fact_id, c.score) for c in alike)
    # A statement about another thing, or one the reading cannot place, goes below the
    # statements read as about the asked one (when it is not much closer to the question).
    for c in head:
        if (
            kinds[c.fact_id] in ("other", "none")
            and c.score >= floor
            and _at_least(best, config.other_ratio, c)
        ):
            scores[c.fact_id] = floor - _GAP
    return scores, outdated


def _best_sentence(question: Question, text: str) -> str:
    """The sentence of `text` that answers `question` best: one holding a value of the kind
    it asks for, sharing the most of its words."""

    def fit(part: str) -> tuple[bool, int]:
        held = any(kind.startswith(question.wants) for kind in values(part))
        return held, len(question.words & _stems(tokens(part)))

    return max(sentences(text), key=fit)


def turns_alike(question: str, older: str, newer: str, overlap: float) -> bool:
    """Whether two turns of conversations tell the same value, changed: their sentences that
    answer `question` hold different values of the kind it asks for (any kind when it asks
    for none) and, values masked, the shorter shares at least `overlap` of its words with the
    longer: "I've had Luna for about 6 months" / "I've had my cat, Luna, for about 9 months"."""
    q = read_question(question)
    a, b = _best_sentence(q, older), _best_sentence(q, newer)
    va, vb = values(a), values(b)
    kinds = [k for k in va.keys() & vb.keys() if va[k] != vb[k]]
    if q.wants != "any":
        kinds = [k for k in kinds if k.startswith(q.wants)]
    if not kinds:
        return False
    held = set().union(*va.values(), *vb.values())
    fa, fb = (
        frozenset(stem(t.low) for t in tokens(x) if _content(t.low) and t.low not in held)
        for x in (a, b)
    )
    return bool(fa and fb) and len(fa & fb) / min(len(fa), len(fb)) >= overlap


def _turns_first(
    question: str, head: Sequence[Candidate], config: CurrentConfig
) -> dict[str, float]:
    """Turns told in a later session that tell the same value changed (`turns_alike`) move
    just above the earlier ones (the earlier above, when the question asks for the earlier
    value). Turns of one session are never compared: consecutive turns of one speaker are
    not updates of each other."""
    q = read_question(question)
    if not q.anchored or q.yes_no or len(head) < 2:
        return {}
    asked = [c for c in head if about(question, c.text) == "asked"]
    earlier = asks_earlier(question)
    scores = {c.fact_id: c.score for c in asked}
    for older in asked:
        for newer in asked:
            if newer.session == older.session or newer.stated <= older.stated:
                continue
            if not turns_alike(question, older.text, newer.text, config.turn_overlap):
                continue
            first, second = (older, newer) if earlier else (newer, older)
            scores[first.fact_id] = max(scores[first.fact_id], scores[second.fact_id] + _GAP)
    return {c.fact_id: scores[c.fact_id] for c in asked if scores[c.fact_id] != c.score}


@lru_cache(maxsize=16_384)
def mentions(text: str) -> frozenset[str]:
    """What a statement names: its capitalised words and the nouns after its determiners
    and possessives (stems), and `~person` for the first person. Two statements about one
    entity share one, whatever their grammatical subjects ("the staging database runs …" /
    "we upgraded the staging database …")."""
    toks = tokens(text)
    out = {stem(t.low) for t in toks if t.text[:1].isupper() and _content(t.low)}
    out |= {"~person" for t in toks if t.low in FIRST_PERSON}
    for i, t in enumerate(toks[:-1]):
        if t.low in DETERMINERS or t.low in POSSESSIVE_PRONOUNS or t.owner:
            run = itertools.takewhile(lambda n: _content(n.low), toks[i + 1 : i + 4])
            out.update(stem(n.low) for n in run)
    return frozenset(out)
