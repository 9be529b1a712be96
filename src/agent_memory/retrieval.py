"""How memories are ranked, as pure functions (ADR-0051): words and terms, keyword relevance,
channel fusion, and the score with its explanation. The bottom of the core: imports nothing
else from `agent_memory`.

    score = w_rel · relevance + w_rec · recency_decay + w_conf · confidence + w_den · density

* Words and terms: `words` / `content_terms` are case-folded words split as FTS5's
  `unicode61` splits them, and the distinct informative ones (no stopwords, no single
  letters). `exact_match_candidates`: strings a query might name a subject or predicate by
  exactly. `term_counts` / `query_terms` / `date_terms`: the keyword index's terms, stemmed by
  the Snowball English stemmer, and a memory's date as people write it ("May", "2023").
* `bm25f`: BM25F (Robertson & Zaragoza 2009) over two fields (own text 1, context
  `context_weight`) with Lucene's never-negative idf over the *tenant's* statistics, so a
  tenant's ranking depends on its data only.
* relevance is semantic recall's fused channel relevance (`fuse`), or for tiers without
  channels the share of the query's content words the item contains; recency_decay is
  `0.5 ** (age / half_life)`; density is distinct informative words over a saturation count
  (among equally relevant memories the one with content wins). Weights are per tier,
  normalised to sum to 1 (every score lies in [0, 1]); `MEMORY_RETRIEVAL_CONFIG` (the JSON of
  `RetrievalConfig`) overrides the defaults.
* Fusion: `relative` (default, Weaviate's relative score fusion) min-max normalises each
  channel over its hits unless they are calibrated and takes the weighted mean over the
  channels that returned anything, keeping how much better a hit is than the next; `rrf`
  (Cormack et al. 2009) is `Σ w_c / (k + rank_c)` over its maximum.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Literal

import snowballstemmer  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, model_validator

from bindings.ports.sql import Row

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
    (single digits are kept: "3 kids" says something). A plain loop on purpose: this runs for
    every candidate of every context assembly, and a generator with a predicate call per word
    made assembly ~50 % slower (benchmarks/context_assembly.py)."""
    seen: dict[str, None] = {}
    for word in words(text):
        if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        seen.setdefault(word, None)
    return list(seen)


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


# Spellings and irregular forms the stemmer keeps apart, as `variant:canonical` words: a
# variant's stem is indexed and searched as the canonical word's ("favourite" / "favorite",
# "broke" / "broken" / "break"). A general list (British and American spelling, common
# irregular verbs), not fitted to any data; changing it needs `keyword_index.renormalise`.
_VARIANT_TEXT = """
    favourite:favorite colour:color flavour:flavor honour:honor humour:humor labour:labor
    neighbour:neighbor behaviour:behavior harbour:harbor rumour:rumor centre:center
    theatre:theater metre:meter litre:liter fibre:fiber organise:organize realise:realize
    recognise:recognize apologise:apologize memorise:memorize grey:gray mum:mom
    programme:program tyre:tire jewellery:jewelry licence:license defence:defense
    offence:offense catalogue:catalog analyse:analyze aeroplane:airplane pyjamas:pajamas
    moustache:mustache sceptical:skeptical cosy:cozy doughnut:donut judgement:judgment
    ageing:aging modelling:modeling counsellor:counselor travelled:traveled
    went:go gone:go ate:eat eaten:eat saw:see seen:see took:take taken:take gave:give
    given:give broke:break broken:break bought:buy brought:bring caught:catch felt:feel
    found:find got:get gotten:get made:make met:meet paid:pay ran:run said:say sent:send
    sold:sell spent:spend taught:teach thought:think told:tell wrote:write written:write
    won:win began:begin begun:begin chose:choose chosen:choose drove:drive driven:drive
    drew:draw drawn:draw drank:drink drunk:drink fell:fall fallen:fall flew:fly flown:fly
    forgot:forget forgotten:forget grew:grow grown:grow knew:know known:know left:leave
    lost:lose rode:ride ridden:ride sang:sing sung:sing spoke:speak spoken:speak swam:swim
    swum:swim threw:throw thrown:throw wore:wear worn:wear built:build kept:keep
    slept:sleep understood:understand heard:hear held:hold meant:mean stood:stand sat:sit
    became:become came:come hid:hide hidden:hide shook:shake shaken:shake woke:wake
    woken:wake
"""
CANONICAL_STEMS: dict[str, str] = {
    str(_STEMMER.stemWord(variant)): str(_STEMMER.stemWord(canonical))
    for variant, canonical in (pair.split(":") for pair in _VARIANT_TEXT.split())
}


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The index term of a case-folded word: its Snowball English stem, a variant's mapped
    to its canonical word's (`CANONICAL_STEMS`) (memoised: ~60 µs uncached)."""
    raw = str(_STEMMER.stemWord(word))
    return CANONICAL_STEMS.get(raw, raw)


def _keep(word: str) -> bool:
    return word not in STOPWORDS and (len(word) > 1 or word.isdigit())


def term_counts(text: str) -> dict[str, int]:
    """Index terms of `text` → occurrences, in first-seen order."""
    return dict(Counter(stem(word) for word in words(text) if _keep(word)))


def query_terms(text: str, limit: int = 64) -> list[str]:
    """Distinct index terms of a query, in order (every word when none is a content word)."""
    kept = [w for w in words(text) if _keep(w)] or words(text)
    return list(dict.fromkeys(stem(w) for w in kept))[:limit]


def compound_forms(text: str) -> list[tuple[str, tuple[str, str]]]:
    """`(whole, parts)` term pairs a compound in `text` may also be written as: adjacent
    words joined ("road trip" → `("roadtrip", ("road", "trip"))`) and each word of 7+
    letters split in two parts of 3+ letters ("roadtrips" → the same pair, among others).
    The keyword channel adds the side the query lacks when the tenant's index holds it
    (`keyword_index.prepare`)."""
    kept = [w for w in words(text) if _keep(w) and w.isalpha()]
    forms = [(stem(a + b), (stem(a), stem(b))) for a, b in itertools.pairwise(kept)]
    for word in dict.fromkeys(w for w in kept if len(w) >= 7):
        forms += [
            (stem(word), (stem(word[:i]), stem(word[i:])))
            for i in range(3, len(word) - 2)
            if _keep(word[:i]) and _keep(word[i:])
        ]
    return forms[:MAX_QUERY_TERMS]


_SEVERAL = re.compile(
    r"^\s*(?:what|which)\s+(?!is\b|was\b|does\b|has\b|this\b|its\b)[a-z]+s\b"
    r"|\b(?:how many|how often|all the|list|both|any other|what kinds?|what types?)\b"
)


def asks_for_several(question: str) -> bool:
    """Whether a question asks for several things: "what/which" with a plural noun ("What
    books has she read?"), "how many", "how often", "list", "all the", "both", "kinds of"."""
    return _SEVERAL.search(question.casefold()) is not None


def spread(
    order: Sequence[str],
    group: Mapping[str, str | None],
    score: Mapping[str, float],
    penalty: float,
) -> list[tuple[str, float]]:
    """`order` (best first) re-picked greedily by `score` minus `penalty` per item of the
    same group already picked (items without a group are never penalised): maximal marginal
    relevance over groups. Returns (id, adjusted score), non-increasing."""
    left = list(order)
    seen: Counter[str] = Counter()
    picked: list[tuple[str, float]] = []
    while left:

        def adjusted(item: str) -> float:
            key = group.get(item)
            return score[item] - (penalty * seen[key] if key is not None else 0.0)

        best = max(left, key=adjusted)  # first of equals: the earlier in `order`
        picked.append((best, adjusted(best)))
        left.remove(best)
        if (key := group.get(best)) is not None:
            seen[key] += 1
    return picked


def date_terms(epoch_s: float) -> list[str]:
    """The month name and year of a UTC time, as index terms (`["may", "2023"]`)."""
    when = datetime.fromtimestamp(epoch_s, tz=UTC)
    return [stem(MONTHS[when.month - 1]), str(when.year)]


_MONTH = "(" + "|".join(MONTHS) + ")"
_ORD = r"(\d{1,2})(?:st|nd|rd|th)?"
_COUNTS = [
    "a",
    "an",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]
_COUNT = r"(\d{1,2}|" + "|".join(_COUNTS) + ")"
# Order matters: the first pattern that matches names the period.
_PERIODS = [
    ("day", re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")),
    ("day", re.compile(rf"\b{_ORD}\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b")),
    ("day", re.compile(rf"\b{_MONTH}\s+{_ORD},?\s+(\d{{4}})\b")),
    ("month", re.compile(rf"\b{_MONTH},?\s+(?:of\s+)?(\d{{4}})\b")),
    (
        "recent-month",
        re.compile(
            rf"\b(in|of|since|during|last|this|early|mid|late|by|until|"
            rf"before|after)\s+{_MONTH}\b"
        ),
    ),
    ("year", re.compile(r"\b((?:19|20)\d{2})\b")),
    ("ago", re.compile(rf"\b{_COUNT}\s+(day|week|month|year)s?\s+ago\b")),
    ("calendar", re.compile(r"\b(yesterday|today|(?:last|this)\s+(?:week|weekend|month|year))\b")),
]
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 30.44, "year": 365.25}


def _utc(year: int, month: int, day: int = 1) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


def _month_span(year: int, month: int) -> tuple[float, float]:
    return _utc(year, month), _utc(year + month // 12, month % 12 + 1)


def question_window(text: str, reference: float) -> tuple[float, float] | None:
    """The period a question names, as `[start, end)` epoch seconds (UTC), or None: a date
    ("on May 23, 2023", "2023-05-23"), a month ("in May 2023"; "in May" / "last May": the
    latest May before `reference`, this month included unless "last"), a year ("in 2022"),
    "N days/weeks/months/years ago" (± one unit around it), "yesterday", "today", "last /
    this week, weekend, month, year". `reference` is when the question is asked."""
    lowered = text.casefold()
    ref = datetime.fromtimestamp(reference, tz=UTC)
    for kind, pattern in _PERIODS:
        found = pattern.search(lowered)
        if found is None:
            continue
        g = found.groups()
        try:
            if kind == "day":
                if g[0].isdigit() and len(g[0]) == 4:
                    y, m, d = int(g[0]), int(g[1]), int(g[2])
                elif g[0].isdigit():
                    y, m, d = int(g[2]), MONTHS.index(g[1]) + 1, int(g[0])
                else:
                    y, m, d = int(g[2]), MONTHS.index(g[0]) + 1, int(g[1])
                start = _utc(y, m, d)
                return start, start + DAY_SECONDS
            if kind == "month":
                return _month_span(int(g[1]), MONTHS.index(g[0]) + 1)
            if kind == "recent-month":
                m = MONTHS.index(g[1]) + 1
                back = m > ref.month or (m == ref.month and g[0] == "last")
                return _month_span(ref.year - back, m)
            if kind == "year":
                return _utc(int(g[0]), 1), _utc(int(g[0]) + 1, 1)
        except ValueError:  # "February 30": no such date
            return None
        if kind == "ago":
            count = int(g[0]) if g[0].isdigit() else max(1, _COUNTS.index(g[0]) - 1)
            unit = _UNIT_DAYS[g[1]] * DAY_SECONDS
            return reference - (count + 1) * unit, reference - (count - 1) * unit
        word = g[0].split()
        today = _utc(ref.year, ref.month, ref.day)
        if word[0] in ("yesterday", "today"):
            start = today - DAY_SECONDS * (word[0] == "yesterday")
            return start, start + DAY_SECONDS
        last = word[0] == "last"
        if word[1] in ("week", "weekend"):
            return today - DAY_SECONDS * (7 + 7 * last), today + DAY_SECONDS * (not last)
        if word[1] == "month":
            return _month_span(
                ref.year - (last and ref.month == 1), (ref.month - 2 * last) % 12 + 1
            )
        return _utc(ref.year - last, 1), _utc(ref.year - last + 1, 1)
    return None


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


FusionMethod = Literal["relative", "rrf"]


# Plain dataclasses: a recall builds hundreds of these, and they need no validation.
@dataclass(frozen=True, slots=True)
class ChannelHit:
    id: str
    score: float


@dataclass(slots=True)
class ChannelResult:
    """One channel's hits, best first. `normalize=False`: the scores are already calibrated
    to [0, 1] and are used as they are. `floor`: the score every candidate the channel does
    not list has (BM25: 0), used as the low end of the min-max normalisation instead of the
    lowest listed hit — the channel is then normalised over all candidates, listed or not.
    `sigmas`: normalise over mean ± `sigmas` standard deviations of the hits instead, clipped
    to [0, 1] (distribution-based score fusion): a hit that stands out from the channel's
    other hits keeps a high score, while a flat list is not stretched to the full range."""

    name: str
    hits: list[ChannelHit] = field(default_factory=list)
    normalize: bool = True
    floor: float | None = None
    sigmas: float | None = None


@dataclass(frozen=True, slots=True)
class ChannelDetail:
    """How one channel saw one item: 1-based rank (0: scored as a feature, not listed),
    raw score, normalised score."""

    rank: int
    raw: float
    normalized: float


@dataclass(slots=True)
class FusedItem:
    id: str
    relevance: float
    channels: dict[str, ChannelDetail] = field(default_factory=dict)


# The constants of the configs below were chosen on the LoCoMo dev split, or are priors: each
# with its figures in docs/semantic-memory.md, "How the constants were chosen".


class FusionConfig(BaseModel):
    model_config = ConfigDict(frozen=True)

    method: FusionMethod = "relative"
    # Exact matches on subject/predicate are a nudge, not a verdict (a common subject matches
    # half a tenant's facts).
    channel_weights: dict[str, float] = Field(
        default_factory=lambda: {"vector": 1.0, "keyword": 1.0, "exact": 0.4}
    )
    rrf_k: int = Field(default=60, ge=1)
    # The vector channel is normalised over its hits' mean +- `vector_sigmas` standard
    # deviations, not min-max, which pinned its ends to the best and the 50th hit, so one
    # far-off hit squeezed all the others. None: min-max.
    vector_sigmas: float | None = Field(default=3.0, gt=0.0)
    # Channel weights per embedding model, overriding `channel_weights` for the channels they
    # name: a weaker embedder earns the vector channel less trust. Keys are prefixes of
    # `EmbeddingConfig.model`; the longest matching prefix wins.
    model_weights: dict[str, dict[str, float]] = Field(
        default_factory=lambda: {
            "sentence-transformers/all-MiniLM-L6-v2": {"vector": 0.6, "keyword": 1.0},
            "@cf/baai/bge-": {"vector": 1.0, "keyword": 1.0},
        }
    )

    def weight(self, channel: str) -> float:
        return max(0.0, self.channel_weights.get(channel, 1.0))

    def for_model(self, model: str) -> FusionConfig:
        """This configuration with the channel weights of embedding model `model`."""
        matches = [prefix for prefix in self.model_weights if model.startswith(prefix)]
        if not matches:
            return self
        override = self.model_weights[max(matches, key=len)]
        return self.model_copy(update={"channel_weights": {**self.channel_weights, **override}})


def _normalized(channel: ChannelResult) -> list[float]:
    scores = [hit.score for hit in channel.hits]
    if not channel.normalize:
        return [min(1.0, max(0.0, score)) for score in scores]
    low, high = (min(scores) if channel.floor is None else channel.floor), max(scores)
    if channel.sigmas is not None and len(scores) > 1:
        mean = math.fsum(scores) / len(scores)
        spread = channel.sigmas * math.sqrt(
            math.fsum((x - mean) ** 2 for x in scores) / len(scores)
        )
        low, high = mean - spread, mean + spread
        if high > low:
            return [min(1.0, max(0.0, (x - low) / (high - low))) for x in scores]
    if high <= low:
        return [1.0] * len(scores)
    return [(score - low) / (high - low) for score in scores]


def fuse(
    channels: Sequence[ChannelResult],
    config: FusionConfig,
    *,
    feature_scores: Mapping[str, Mapping[str, float]] | None = None,
) -> list[FusedItem]:
    """Fuse `channels` into items sorted by relevance (ties: channel order, then id).

    `feature_scores` maps a channel name to calibrated scores for items that channel did
    not list (used for a too-broad exact match: it scores the other channels' hits).
    """
    active = [c for c in channels if c.hits and config.weight(c.name) > 0]
    extra = {name: dict(scores) for name, scores in (feature_scores or {}).items() if scores}
    weights = {c.name: config.weight(c.name) for c in active}
    for name in extra:
        weights.setdefault(name, config.weight(name))
    total_weight = sum(weights.values())
    if total_weight <= 0:
        return []
    details: dict[str, dict[str, ChannelDetail]] = {}
    order: dict[str, int] = {}
    for channel in active:
        normalized = _normalized(channel)
        for position, (hit, norm) in enumerate(zip(channel.hits, normalized, strict=True)):
            if channel.name in details.get(hit.id, {}):
                continue  # a channel lists an id once; keep its best rank
            if config.method == "rrf":
                norm = 1.0 / (config.rrf_k + position + 1)
            details.setdefault(hit.id, {})[channel.name] = ChannelDetail(
                rank=position + 1, raw=hit.score, normalized=norm
            )
            order.setdefault(hit.id, len(order))
    for name, scores in extra.items():
        for item_id, score in scores.items():
            if item_id in details and name not in details[item_id]:
                value = min(1.0, max(0.0, score))
                if config.method == "rrf":
                    # A feature has no rank: count it as a tie for first, scaled by strength.
                    value = value / (config.rrf_k + 1)
                details[item_id][name] = ChannelDetail(rank=0, raw=score, normalized=value)
    ceiling = 1.0 if config.method == "relative" else 1.0 / (config.rrf_k + 1)
    fused = [
        FusedItem(
            id=item_id,
            relevance=sum(weights[name] * d.normalized for name, d in seen.items())
            / (total_weight * ceiling),
            channels=seen,
        )
        for item_id, seen in details.items()
    ]
    fused.sort(key=lambda item: (-item.relevance, order[item.id], item.id))
    return fused


Tier = Literal["working", "episodic", "semantic", "procedural"]

DAY_SECONDS = 86_400.0

# Informative words at which a memory counts as fully dense; a one-line fact has ~5-15.
DENSITY_SATURATION_TERMS = 8


class ScoringWeights(BaseModel):
    model_config = ConfigDict(frozen=True)

    relevance: float = Field(ge=0.0)
    recency: float = Field(ge=0.0)
    confidence: float = Field(ge=0.0)
    density: float = Field(ge=0.0)
    recency_half_life_days: float = Field(gt=0.0)

    @model_validator(mode="after")
    def _some_weight(self) -> ScoringWeights:
        if self.relevance + self.recency + self.confidence + self.density <= 0:
            raise ValueError("at least one scoring weight must be positive")
        return self

    def normalized(self) -> tuple[float, float, float, float]:
        """(w_rel, w_rec, w_conf, w_den) scaled to sum to 1."""
        parts = (self.relevance, self.recency, self.confidence, self.density)
        total = sum(parts)
        return parts[0] / total, parts[1] / total, parts[2] / total, parts[3] / total


def _default_tiers() -> dict[str, ScoringWeights]:
    return {
        # In-run scratch: what was just written matters most.
        "working": ScoringWeights(
            relevance=0.6, recency=0.3, confidence=0.05, density=0.05, recency_half_life_days=1 / 24
        ),
        # Events: relevance first, but last week's episode beats last quarter's.
        "episodic": ScoringWeights(
            relevance=0.6, recency=0.25, confidence=0.05, density=0.1, recency_half_life_days=7
        ),
        # Stable facts: mostly what the query asks; confidence and content break ties.
        "semantic": ScoringWeights(
            relevance=0.75, recency=0.05, confidence=0.1, density=0.1, recency_half_life_days=90
        ),
        # Routines: a proven (high-confidence) procedure beats a merely similar one.
        "procedural": ScoringWeights(
            relevance=0.6, recency=0.05, confidence=0.3, density=0.05, recency_half_life_days=180
        ),
    }


class KeywordConfig(BaseModel):
    """BM25F constants of the keyword channel (`retrieval.bm25`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k1: float = Field(default=1.2, gt=0.0, le=10.0)
    b: float = Field(default=0.75, ge=0.0, le=1.0)
    # The weight of a memory's context (session neighbours, date words) against its own text.
    context_weight: float = Field(default=0.4, ge=0.0, le=1.0)

    def params(self) -> Bm25Params:
        return Bm25Params(k1=self.k1, b=self.b, context_weight=self.context_weight)


class ContextConfig(BaseModel):
    """Contextual indexing (`tiers.semantic._context`): how many neighbours in its session a
    memory is indexed (keyword context field) and embedded with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    before: int = Field(default=2, ge=0, le=5)
    after: int = Field(default=1, ge=0, le=5)
    embed_before: int = Field(default=1, ge=0, le=5)


class RerankConfig(BaseModel):
    """The reranking stage (`tiers.semantic.recall`): on when `depth` > 1 and the tenant is
    among `tenants` (None: every tenant), for a recall whose best candidates hold a memory
    of more than one sentence — it costs a model call, and a one-sentence memory is scored
    whole by the vector channel already (`applies`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Best fused candidates reranked (0: off), the reranker's share of the blend, session
    # neighbours each side in a passage.
    depth: int = Field(default=20, ge=0, le=50)
    weight: float = Field(default=0.4, ge=0.0, le=10.0)
    neighbours: int = Field(default=0, ge=0, le=3)
    tenants: list[str] | None = None
    # Who scores: the embedder's sentence rescoring (`recall.EmbedderReranker`, what the
    # benches measured), or the bound reranker (bge-reranker-base on Cloudflare: a model
    # call per recall, not measurable offline) when one is bound.
    scorer: Literal["embedder", "bound"] = "embedder"

    def applies(self, tenant_id: str, texts: Sequence[str] = ("",)) -> bool:
        """Whether to rerank for this tenant a head of `texts`: one of them has more than
        one sentence, whose one answering sentence the reranker can weigh."""
        if self.depth < 2 or (self.tenants is not None and tenant_id not in self.tenants):
            return False
        return any(len(sentences(text)) > 1 for text in texts)


class ReplyConfig(BaseModel):
    """A question's answer is the memory after it (`lift_replies`): among the best `depth`
    candidates, a memory that asks (`asks`: a question, with at most `said` words outside
    its questions) passes its score on to the next memory of its session, when that one is
    a candidate too, and keeps `keep` of its own. A conversation stores a question and its
    answer as two turns, and the question, worded like the one recalled with, outranked the
    answer (in a sample of LoCoMo dev misses, the most common case). `said` is not 0 (any
    question mark) because a turn that tells something and then asks back holds the answer
    itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    depth: int = Field(default=20, ge=0, le=100)  # 0: off
    lift: float = Field(default=1.0, ge=0.0, le=2.0)
    keep: float = Field(default=0.8, ge=0.0, le=1.0)
    said: int = Field(default=20, ge=0, le=1000)


_SENTENCE = re.compile(r"[^.!?\uff1f\u061f]*[.!?\uff1f\u061f]+|[^.!?\uff1f\u061f]+$")
_QUESTION_MARKS = ("?", "\uff1f", "\u061f")  # ASCII, fullwidth (CJK), Arabic


_LABEL = re.compile(r"^([^:\n]{1,40}): ")  # "Ana: ..." (a speaker, a heading), carried per sentence


def sentences(text: str) -> list[str]:
    """The sentences of `text`, line by line; a line that opens with a short label ("Ana: ")
    gives it to each of its sentences, so a sentence keeps who said it or what it is about.
    A text without sentence punctuation is one sentence; none is empty."""
    out: list[str] = []
    for line in text.splitlines():
        label = _LABEL.match(line)
        body = line[label.end() :] if label else line
        for sentence in filter(None, (s.strip() for s in _SENTENCE.findall(body))):
            out.append(f"{label.group(1)}: {sentence}" if label else sentence)
    return out or [text]


def asks(text: str, said: int) -> bool:
    """Whether a memory mostly asks: a sentence of it is a question, and its other
    sentences hold at most `said` words."""
    asked, words = False, 0
    for sentence in _SENTENCE.findall(text):
        if sentence.rstrip().endswith(_QUESTION_MARKS):
            asked = True
        else:
            words += len(sentence.split())
    return asked and words <= said


def lift_replies(
    head: Sequence[str],
    reply_of: Mapping[str, str | None],
    asking: Mapping[str, bool],
    score: Mapping[str, float],
    config: ReplyConfig,
) -> dict[str, float]:
    """New scores after `ReplyConfig`'s rule over `head` (candidate ids, best first): each
    asking candidate whose reply (`reply_of`: the next memory of its session) is scored
    lifts it to at least `lift` times its own score and keeps `keep` of that, in `head`
    order (a lifted reply that asks in turn passes its new score on). Only changed scores."""
    new: dict[str, float] = {}
    for fid in head[: config.depth]:
        reply = reply_of.get(fid)
        if reply is None or reply not in score or not asking.get(fid):
            continue
        own = new.get(fid, score[fid])
        new[reply] = max(new.get(reply, score[reply]), config.lift * own)
        new[fid] = config.keep * own
    return new


class CurrentConfig(BaseModel):
    """How far recall's "current first" stage reaches (`tiers/semantic/statements.py`): a
    statement answers the question alike only if it scores at least `ratio` of the best one
    about the asked entity; a statement about another entity goes below the matching ones
    when they score at least `other_ratio` of it; two statements holding no value answer
    alike when the embedder's similarities to the question differ by at most `closeness`;
    `window` is how many of the best candidates the stage looks at."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ratio: float = Field(default=0.45, ge=0.0, le=1.0)
    other_ratio: float = Field(default=0.5, ge=0.0, le=1.0)
    closeness: float = Field(default=0.15, ge=0.0, le=2.0)
    turn_overlap: float = Field(default=0.6, ge=0.0, le=1.0)
    window: int = Field(default=10, ge=0, le=100)


class RetrievalConfig(BaseModel):
    """Scoring weights per tier and the channel fusion. Immutable; build once per request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tiers: dict[str, ScoringWeights] = Field(default_factory=_default_tiers)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    keyword: KeywordConfig = Field(default_factory=KeywordConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    replies: ReplyConfig = Field(default_factory=ReplyConfig)
    current: CurrentConfig = Field(default_factory=CurrentConfig)
    # A question that asks for a number or a date ("how many …", "when …"): each of the best
    # `current.window` candidates that holds one (`statements.holds_wanted`) scores this much
    # more (times 1.05), so the turn that says "three months" goes ahead of one about the same
    # topic that says no number. Only the head is reordered, so recall@window is unchanged.
    answer_kind: float = Field(default=0.05, ge=0.0, le=1.0)
    # The share of a candidate's score given to lying in the period the question names
    # (`question_window`): score = (1 - w) * score + w * [valid_from in the period]. A soft
    # boost, not a filter: a memory dated outside the period may still tell about it.
    question_dates: float = Field(default=0.3, ge=0.0, le=1.0)
    # Taken off a candidate's score per better-ranked result from the same session when the
    # top is spread over sessions (`spread`): when the caller asks (`filters.diversify`) or,
    # with `auto_diversify`, when the question asks for several things (off: it cost recall
    # when on for every such question).
    session_spread: float = Field(default=0.05, ge=0.0, le=1.0)
    auto_diversify: bool = False
    # Candidates taken from each channel before fusion (Vectorize allows topK ≤ 100); every
    # candidate is read, scored and fused, so fewer is faster.
    candidate_pool: int = Field(default=50, ge=1, le=1000)

    def weights_for(self, tier: str) -> ScoringWeights:
        weights = self.tiers.get(tier)
        if weights is None:
            raise KeyError(f"no scoring weights configured for tier {tier!r}")
        return weights

    @classmethod
    def from_json(cls, text: str) -> RetrievalConfig:
        """Defaults overridden by a JSON object; tiers not named keep their defaults."""
        if not text.strip():
            return cls()
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("retrieval config must be a JSON object")
        tiers = {
            **_default_tiers(),
            **{k: ScoringWeights.model_validate(v) for k, v in data.pop("tiers", {}).items()},
        }
        return cls.model_validate({**data, "tiers": tiers})


class ScoreBreakdown(BaseModel):
    """Each component (in [0, 1]), the normalised weight it got, and the total."""

    relevance: float
    recency: float
    confidence: float
    density: float
    weights: dict[str, float]
    total: float


def recency_decay(age_seconds: float, half_life_days: float) -> float:
    """`0.5 ** (age / half_life)`; 1.0 for age ≤ 0 (clock skew never boosts above 1)."""
    if age_seconds <= 0:
        return 1.0
    return math.pow(0.5, age_seconds / (half_life_days * DAY_SECONDS))


def information_density(text: str, terms: Sequence[str] | None = None) -> float:
    """Distinct informative words / `DENSITY_SATURATION_TERMS`, capped at 1 (`terms`: the
    text's `content_terms`, when the caller has them)."""
    terms = content_terms(text) if terms is None else terms
    return min(1.0, len(terms) / DENSITY_SATURATION_TERMS)


# (total, relevance, recency, confidence, density), as `score_parts` returns them.
Parts = tuple[float, float, float, float, float]


def score_parts(
    *,
    relevance: float,
    written_at: float,
    confidence: float,
    density: float,
    now: float,
    weights: ScoringWeights,
) -> Parts:
    """(total, relevance, recency, confidence, density), components clamped to [0, 1].
    The allocation-free core of `score`, for ranking many candidates."""
    w_rel, w_rec, w_conf, w_den = weights.normalized()
    rel = min(1.0, max(0.0, relevance))
    rec = recency_decay(now - written_at, weights.recency_half_life_days)
    conf = min(1.0, max(0.0, confidence))
    den = min(1.0, max(0.0, density))
    return w_rel * rel + w_rec * rec + w_conf * conf + w_den * den, rel, rec, conf, den


def breakdown(parts: Parts, weights: ScoringWeights) -> ScoreBreakdown:
    """The `ScoreBreakdown` of `score_parts`' result."""
    w_rel, w_rec, w_conf, w_den = weights.normalized()
    total, rel, rec, conf, den = parts
    return ScoreBreakdown(
        relevance=rel,
        recency=rec,
        confidence=conf,
        density=den,
        weights={"relevance": w_rel, "recency": w_rec, "confidence": w_conf, "density": w_den},
        total=total,
    )


@dataclass(frozen=True)
class RankItem:
    """One item to score: `written_at` in epoch seconds, `confidence` in [0, 1]."""

    id: str
    text: str
    written_at: float
    confidence: float


@dataclass(frozen=True)
class RankedItem:
    item: RankItem
    parts: Parts

    @property
    def score(self) -> float:
        return self.parts[0]


def rank(
    query: str, items: Sequence[RankItem], weights: ScoringWeights, now: float
) -> list[RankedItem]:
    """Every item scored with `weights`, best first (ties: newer, then id)."""
    terms = set(content_terms(query))
    ranked: list[RankedItem] = []
    for item in items:
        # one scan of the text serves both lexical relevance (the share of the query's
        # content words the item has) and information density
        item_terms = content_terms(item.text)
        relevance = len(terms.intersection(item_terms)) / len(terms) if terms else 0.0
        parts = score_parts(
            relevance=relevance,
            written_at=item.written_at,
            confidence=item.confidence,
            density=information_density(item.text, item_terms),
            now=now,
            weights=weights,
        )
        ranked.append(RankedItem(item=item, parts=parts))
    ranked.sort(key=lambda r: (-r.parts[0], -r.item.written_at, r.item.id))
    return ranked


def rank_candidates(
    fused: Sequence[FusedItem],
    rows: Mapping[str, Row],
    weights: ScoringWeights,
    now: float,
    need: int,
) -> list[tuple[Parts, FusedItem]]:
    """`score_parts` of every fused candidate, best first (total, relevance, id), exact for
    at least the best `need`. The information density (a text scan, most of scoring's cost)
    is computed best-first by the other parts only while it can still lift a candidate
    into the best `need`: below that, a candidate keeps density 0, a lower bound that
    cannot reach them."""
    density_weight = weights.normalized()[3]

    def parts(item: FusedItem, density: float) -> Parts:
        row = rows[item.id]
        return score_parts(
            relevance=item.relevance,
            written_at=int(row["updated_at"]) / 1000.0,
            confidence=float(row["confidence"]),
            density=density,
            now=now,
            weights=weights,
        )

    def order(pair: tuple[Parts, FusedItem]) -> tuple[float, float, str]:
        return (-pair[0][0], -pair[0][1], pair[1].id)

    bounds = sorted(((parts(item, 0.0), item) for item in fused), key=order)
    best: list[float] = []  # min-heap of the best `need` exact totals so far
    ranked: list[tuple[Parts, FusedItem]] = []
    for position, (bound, item) in enumerate(bounds):
        # (1e-12: the two sums round differently; a tie must be computed, not skipped)
        if len(best) >= need and bound[0] + density_weight < best[0] - 1e-12:
            ranked.extend(bounds[position:])
            break
        exact = parts(item, information_density(rows[item.id]["content"]))
        heapq.heappush(best, exact[0])
        if len(best) > need:
            heapq.heappop(best)
        ranked.append((exact, item))
    return sorted(ranked, key=order)
