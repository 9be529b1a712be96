"""The reconciler (ADR-0051): pure steps over one tenant's rows (dedup, conflicts, updates,
promotion, decay, linking), applied in that order by `Reconciler.run`. A loser is superseded,
never deleted: through a `WriteGate` proposal and an UPDATE guarded by `status = 'active'`, so
concurrent runs cannot supersede a fact twice. A run also finishes `pending_vector` facts.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence, Set
from typing import Any, Literal, cast, get_args

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.governance.writes import (
    EventLog,
    Recorder,
    WriteGate,
    WriteProposal,
    memory_written,
)
from agent_memory.ids import content_hash, normalize_content, sha256_hex
from agent_memory.namespace import DEFAULT_SUBJECT
from agent_memory.tiers.semantic.keys import (
    Decision,
    FactKey,
    KeySource,
    content_words,
    judge,
    judge_update,
    near_duplicate,
)
from agent_memory.tiers.semantic.memory import SemanticMemory
from agent_memory.tiers.semantic.models import FactInput
from agent_memory.tiers.semantic.reconcile import EpisodeRow, FactRow, Link, ReconcileStore
from agent_memory.tiers.semantic.statements import mentions
from bindings.ports.clock import Clock
from bindings.ports.d1 import D1Database
from bindings.ports.llm import LLM, ChatMessage
from bindings.ports.vectorize import VectorIndex
from http_messages import ApiError

log = logging.getLogger(__name__)


class ReconcileConfig(BaseModel):
    """The steps' thresholds and weights, and how much one run loads."""

    model_config = ConfigDict(frozen=True)

    similarity_threshold: float = Field(default=0.95, gt=0.0, le=1.0)
    link_threshold: float = Field(default=0.8, gt=0.0, le=1.0)
    link_top_k: int = Field(default=5, ge=1, le=20)
    promotion_min_episodes: int = Field(default=3, ge=2)
    promotion_min_confidence: float = Field(default=0.8, ge=0.0, le=1.0)
    decay_ttl_days: int = Field(default=30, ge=1)
    decay_min_importance: float = Field(default=0.7, ge=0.0, le=1.0)
    source_weights: dict[str, float] = Field(
        default_factory=lambda: {
            "admin": 1.0,
            "learn": 0.9,
            "store_memory": 0.8,
            "mcp": 0.8,
            "reconciler": 0.7,
        }
    )
    default_source_weight: float = Field(default=0.6, ge=0.0)
    multi_valued_predicates: frozenset[str] = frozenset({"states"})
    # Update candidates: same key attribute, or content this close (cosine; word overlap).
    update_similarity: float = Field(default=0.6, gt=0.0, le=1.0)
    update_word_overlap: float = Field(default=0.3, gt=0.0, le=1.0)
    max_update_pairs: int = Field(default=2_000, ge=1)
    # A pair the rules call compatible only for want of a change word, this close (cosine),
    # states one slot twice: the LLM adjudicator is asked about it (`unsettled`).
    slot_similarity: float = Field(default=0.7, gt=0.0, le=1.0)
    # Pairs the LLM adjudicator may be asked about per tenant in 24 hours, and per call.
    llm_pairs_per_day: int = Field(default=200, ge=0)
    llm_batch: int = Field(default=8, ge=1, le=50)
    max_entity_facts: int = Field(default=200, ge=2)
    max_facts: int = Field(default=5_000, ge=1)
    max_episodes: int = Field(default=5_000, ge=1)

    def source_weight(self, source: str) -> float:
        return self.source_weights.get(source, self.default_source_weight)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Merge(_Frozen):
    keep: str
    drop: str
    reason: Literal["exact", "similar"]
    similarity: float


class Supersede(_Frozen):
    winner: str
    loser: str
    subject: str
    predicate: str


class Promotion(_Frozen):
    """A fact to learn from episodes: a recurring observation, or a summary (`find_decay`)."""

    subject: str
    predicate: str
    object: str
    content: str
    confidence: float
    episode_ids: tuple[str, ...]


SUMMARY_MAX_CHARS = 2_000
DAY_MS = 86_400_000


def _rank_key(fact: FactRow) -> tuple[bool, int, float, str]:
    # A duplicate merges into the specific subject over the catch-all, then the older row
    # (a merge never passes for new information), then the higher confidence.
    return (fact.subject == DEFAULT_SUBJECT, fact.created_at, -fact.confidence, fact.fact_id)


def _states_a_change(a: FactRow, b: FactRow) -> bool:
    """Whether two near-identical sentences are an update ("Alice now prefers light mode"
    after "Alice prefers dark mode"): those are the update step's, never merged as
    duplicates (a merge keeps the older one)."""
    if not (a.key_entity and b.key_entity):
        return False
    older, newer = sorted((a, b), key=_order)
    verdict = judge_update(
        older.content,
        FactKey(older.key_entity, older.key_attribute, "none"),
        newer.content,
        FactKey(newer.key_entity, newer.key_attribute, "none"),
    )
    return verdict.decision in ("update", "unsure")


def find_duplicates(
    facts: Sequence[FactRow],
    vectors: Mapping[str, Sequence[float]],
    config: ReconcileConfig,
) -> list[Merge]:
    """Which facts merge into which: exact duplicates (same content hash, compatible
    subjects), then near ones (cosine ≥ `similarity_threshold`, same subject, and
    `keys.near_duplicate`). A duplicate merges into the more specific subject, then the
    older row. Each fact is dropped at most once, never into a fact itself dropped."""
    ordered = sorted(facts, key=_rank_key)
    dropped: set[str] = set()
    merges: list[Merge] = []

    def merge_within(group: list[FactRow], reason: Literal["exact", "similar"], sims: Any) -> None:
        for i, keep in enumerate(group):
            for j in range(i + 1, len(group)):
                other = group[j]
                if keep.fact_id in dropped or other.fact_id in dropped:
                    continue
                if reason == "exact":
                    subjects = {keep.subject, other.subject}
                    same, similarity = len(subjects) == 1 or DEFAULT_SUBJECT in subjects, 1.0
                else:
                    # Close embeddings are a duplicate only with the same key entity, names,
                    # numbers and codes, and no change stated (`keys.near_duplicate`).
                    similarity = round(float(sims[i, j]), 6)
                    same = (
                        float(sims[i, j]) >= config.similarity_threshold
                        and near_duplicate(
                            keep.content,
                            keep.key_entity,
                            other.content,
                            other.key_entity,
                            states_a_change=_states_a_change(keep, other),
                        )
                        is None
                    )
                if same:
                    dropped.add(other.fact_id)
                    ids = {"keep": keep.fact_id, "drop": other.fact_id}
                    merges.append(Merge(**ids, reason=reason, similarity=similarity))

    by_hash: dict[str, list[FactRow]] = defaultdict(list)
    for fact in ordered:
        by_hash[content_hash(fact.content)].append(fact)
    for group in by_hash.values():
        merge_within(group, "exact", None)
    # Then near duplicates: cosine over the embeddings, within one subject.
    by_subject: dict[str, list[FactRow]] = defaultdict(list)
    for fact in ordered:
        if fact.fact_id not in dropped and fact.fact_id in vectors:
            by_subject[fact.subject].append(fact)
    import numpy as np  # here: the memory routes import this module, and need no numpy

    for group in by_subject.values():
        matrix = np.asarray([vectors[f.fact_id] for f in group], dtype=np.float64)
        norms = np.linalg.norm(matrix, axis=1)
        norms[norms == 0] = 1.0
        unit = matrix / norms[:, None]
        merge_within(group, "similar", unit @ unit.T)
    return merges


def resolve_conflicts(facts: Sequence[FactRow], config: ReconcileConfig) -> list[Supersede]:
    """For each (subject, predicate) with more than one object (`multi_valued_predicates`
    excepted): the losers. The newest statement wins (never backwards in time); an older one
    from a more trusted source (`source_weights`) is not superseded by a less trusted newer
    one: both stay active."""
    groups: dict[tuple[str, str], list[FactRow]] = defaultdict(list)
    for fact in facts:
        if fact.predicate not in config.multi_valued_predicates:
            groups[(fact.subject, fact.predicate)].append(fact)
    out: list[Supersede] = []
    for (subject, predicate), group in sorted(groups.items()):
        winner = max(group, key=_order)
        trust = config.source_weight(winner.source)
        for loser in sorted(group, key=_order):
            # The same object stated twice is a duplicate, not a conflict (dedup's job).
            if normalize_content(loser.object) == normalize_content(winner.object):
                continue
            if config.source_weight(loser.source) <= trust:
                ids = {"winner": winner.fact_id, "loser": loser.fact_id}
                out.append(Supersede(**ids, subject=subject, predicate=predicate))
    return out


def _observations(episode: EpisodeRow) -> list[tuple[str, str, str, float]]:
    """(subject, predicate, object, confidence) stated by one episode."""
    found: list[tuple[str, str, str, float]] = []
    subject = episode.subject
    raw = episode.data.get("observations")
    items = raw if isinstance(raw, list) else []
    if isinstance(single := episode.data.get("observation"), dict):
        items = [*items, single]
    for item in items:
        if not isinstance(item, dict):
            continue
        about = item.get("subject", subject)
        predicate, obj = item.get("predicate"), item.get("object")
        if not (isinstance(about, str) and isinstance(predicate, str) and isinstance(obj, str)):
            continue
        if not (about and predicate and obj):
            continue
        confidence = item.get("confidence", episode.importance)
        value = float(confidence) if isinstance(confidence, int | float) else episode.importance
        found.append((about, predicate, obj, max(0.0, min(1.0, value))))
    if not found and episode.kind == "observation" and subject:
        found.append((subject, "observed", episode.content.strip(), episode.importance))
    return found


def find_promotions(
    episodes: Sequence[EpisodeRow],
    config: ReconcileConfig,
    known: Set[tuple[str, str, str]] = frozenset(),
) -> list[Promotion]:
    """Observations recurring consistently and confidently enough to become facts.
    `known`: (subject, predicate, normalised object) already in semantic memory."""
    seen: dict[tuple[str, str], dict[str, list[tuple[str, float, str]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for episode in episodes:
        for subject, predicate, obj, confidence in _observations(episode):
            seen[(subject, predicate)][normalize_content(obj)].append(
                (episode.episode_id, confidence, obj)
            )
    out: list[Promotion] = []
    for (subject, predicate), by_object in sorted(seen.items()):
        if len(by_object) != 1:  # inconsistent: the same question got different answers
            continue
        [(normalised, sightings)] = by_object.items()
        episode_ids = sorted({episode_id for episode_id, _, _ in sightings})
        if len(episode_ids) < config.promotion_min_episodes:
            continue
        confidence = sum(c for _, c, _ in sightings) / len(sightings)
        if confidence < config.promotion_min_confidence:
            continue
        if (subject, predicate, normalised) in known:
            continue
        obj = sightings[0][2]
        content = (
            obj if predicate == "observed" else f"{subject} {predicate.replace('_', ' ')} {obj}"
        )
        out.append(
            Promotion(
                subject=subject,
                predicate=predicate,
                object=obj if predicate != "observed" else "",
                content=content[:8_000],
                confidence=round(confidence, 6),
                episode_ids=tuple(episode_ids),
            )
        )
    return out


def find_decay(
    episodes: Sequence[EpisodeRow],
    now_ms: int,
    config: ReconcileConfig,
    summarised: Set[str] = frozenset(),
) -> list[Promotion]:
    """Salient episodes past their TTL, summarised per subject (skipping `summarised`)."""
    cutoff = now_ms - config.decay_ttl_days * DAY_MS
    groups: dict[str, list[EpisodeRow]] = defaultdict(list)
    for episode in episodes:
        salient = episode.importance >= config.decay_min_importance
        if episode.created_at >= cutoff or not salient or episode.episode_id in summarised:
            continue
        groups[episode.subject or DEFAULT_SUBJECT].append(episode)
    out: list[Promotion] = []
    for subject, group in sorted(groups.items()):
        group.sort(key=lambda e: (e.created_at, e.episode_id))
        lines = [" ".join(e.content.split())[:300] for e in group]
        text = f"Summary of {len(group)} past episode(s) about {subject}: " + " | ".join(lines)
        out.append(
            Promotion(
                subject=subject,
                predicate="summary_of_episodes",
                object="",
                content=text[:SUMMARY_MAX_CHARS],
                confidence=round(sum(e.importance for e in group) / len(group), 6),
                episode_ids=tuple(e.episode_id for e in group),
            )
        )
    return out


def find_links(
    new_fact_ids: Sequence[str],
    neighbours: Mapping[str, Sequence[tuple[str, float]]],
    live: set[str],
    config: ReconcileConfig,
) -> list[Link]:
    """Both directions of every (new fact, live neighbour) pair scoring ≥ the threshold."""
    pairs: dict[tuple[str, str], float] = {}
    for fact_id in new_fact_ids:
        for other, score in neighbours.get(fact_id, ()):
            if other == fact_id or other not in live or score < config.link_threshold:
                continue
            value = round(min(1.0, max(-1.0, score)), 6)
            for pair in ((fact_id, other), (other, fact_id)):
                pairs[pair] = max(pairs.get(pair, -1.0), value)
    return [Link(from_fact_id=a, to_fact_id=b, score=s) for (a, b), s in sorted(pairs.items())]


_VERDICT = re.compile(
    r"^\W*(\d+)\W+(update|duplicate|compatible|unsure)\b", re.IGNORECASE | re.MULTILINE
)
_REFUSAL = re.compile(r"\b(can't|cannot|can not|unable to|won't|not able to)\b", re.IGNORECASE)

LLM_SYSTEM_PROMPT = (
    "You maintain an agent's long-term memory. You are shown numbered pairs of statements "
    "about the same entity, OLDER then NEWER. For each pair decide: 'update' if NEWER "
    "replaces OLDER (OLDER is no longer true), 'duplicate' if they say the same thing, "
    "'compatible' if both can be true at once, 'unsure' if you cannot tell. Answer with one "
    "line per pair, '<number>: <decision>', and nothing else."
)
# Reasons for `compatible` that only say the wording rules found no change (keys read off
# grammatical subjects differ across phrasings, a change verb may be one they do not know):
# a pair this close may still state one slot twice, so the model is asked. The other
# reasons are evidence (an identifier, an additive word, a time bound, …).
_NO_EVIDENCE = frozenset(
    {"different_entity", "different_attribute", "different_topic", "same_value"}
)


def _key(fact: FactRow) -> FactKey:
    source: KeySource = fact.key_source if fact.key_source in get_args(KeySource) else "none"  # type: ignore[assignment]
    return FactKey(fact.key_entity, fact.key_attribute, source)


class UpdatePair(_Frozen):
    """Two statements about the same entity, `older` written before `newer`."""

    older: FactRow
    newer: FactRow
    similarity: float


class Adjudication(_Frozen):
    older: str
    newer: str
    decision: Decision
    reason: str
    adjudicator: str


def _ruled(pair: UpdatePair) -> Adjudication:
    """`keys.judge` over one pair (the wording rules, checked for the evidence a
    supersession needs): no model, no I/O."""
    verdict = judge(pair.older.content, _key(pair.older), pair.newer.content, _key(pair.newer))
    ids = {"older": pair.older.fact_id, "newer": pair.newer.fact_id}
    return Adjudication(
        **ids, decision=verdict.decision, reason=verdict.reason, adjudicator="rules"
    )


class RulesAdjudicator:
    name = "rules"

    async def decide(self, pairs: Sequence[UpdatePair]) -> list[Adjudication]:
        return [_ruled(pair) for pair in pairs]


def unsettled(pair: UpdatePair, ruled: Adjudication, config: ReconcileConfig) -> bool:
    """Whether the rules could not settle a pair: `unsure`, or `compatible` for want of a
    change word while the two are close enough to state one slot twice (issue 41: "planned
    for June 3" / "slipped to June 17")."""
    if ruled.decision == "unsure":
        return True
    weak = ruled.decision == "compatible" and ruled.reason in _NO_EVIDENCE
    return weak and pair.similarity >= config.slot_similarity


def prompt(pairs: Sequence[UpdatePair]) -> str:
    """The user message asking about `pairs`, numbered from 1."""
    return "\n\n".join(
        f"{n}. Entity: {p.newer.key_entity}\nOLDER: {p.older.content}\nNEWER: {p.newer.content}"
        for n, p in enumerate(pairs, 1)
    )


def parse_verdicts(text: str, count: int) -> dict[int, Decision]:
    """The decisions a reply gives, by pair index (0-based); pairs it does not name, or
    names twice differently, are left out."""
    found: dict[int, set[str]] = {}
    for number, word in _VERDICT.findall(text):
        if 1 <= int(number) <= count:
            found.setdefault(int(number) - 1, set()).add(word.lower())
    return {i: cast(Decision, next(iter(w))) for i, w in found.items() if len(w) == 1}


class LlmAdjudicator:
    """Asks the `LLM` port about the pairs the rules cannot settle (`unsettled`), in batches
    of `config.llm_batch`, at most `budget` pairs a run (the reconciler passes what is left
    of the tenant's `llm_pairs_per_day`); every other pair keeps the rules' decision. A
    failed call, a refusal or an answer that does not name a pair leaves the rules' decision
    too, with the reason (`llm_error`, `llm_refused`, `llm_unreadable`)."""

    def __init__(self, llm: LLM, config: ReconcileConfig | None = None) -> None:
        self._llm = llm
        self.config = config or ReconcileConfig()
        self.budget = self.config.llm_pairs_per_day

    @property
    def name(self) -> str:
        return f"llm:{self._llm.model}"

    async def decide(self, pairs: Sequence[UpdatePair]) -> list[Adjudication]:
        out = [_ruled(pair) for pair in pairs]
        # Whatever the evidence settles (a marker, an identifier, an additive word, …) stays.
        ask = [i for i, r in enumerate(out) if unsettled(pairs[i], r, self.config)]
        ask = ask[: max(0, self.budget)]
        for start in range(0, len(ask), self.config.llm_batch):
            batch = ask[start : start + self.config.llm_batch]
            verdicts, failure = await self._ask([pairs[i] for i in batch])
            for n, i in enumerate(batch):
                if n in verdicts:
                    answer = {"decision": verdicts[n], "reason": "llm_answer"}
                    out[i] = out[i].model_copy(update={**answer, "adjudicator": self.name})
                else:
                    out[i] = out[i].model_copy(
                        update={"reason": f"{failure};rules:{out[i].reason}"}
                    )
        return out

    async def _ask(self, pairs: Sequence[UpdatePair]) -> tuple[dict[int, Decision], str]:
        try:
            result = await self._llm.chat(
                [
                    ChatMessage(role="system", content=LLM_SYSTEM_PROMPT),
                    ChatMessage(role="user", content=prompt(pairs)),
                ]
            )
        except Exception as exc:  # the model is optional help, never a failure of the run
            log.warning("llm adjudicator failed, keeping the rules' decisions: %s", exc)
            return {}, "llm_error"
        text = result.message.content or ""
        verdicts = parse_verdicts(text, len(pairs))
        refused = result.message.refusal is not None or (
            not verdicts and _REFUSAL.search(text) is not None
        )
        return verdicts, "llm_refused" if refused else "llm_unreadable"


# Decides candidate pairs: one `Adjudication` per pair, in order.
Adjudicator = RulesAdjudicator | LlmAdjudicator


def _order(fact: FactRow) -> tuple[int, int, str]:
    return (fact.valid_from, fact.created_at, fact.fact_id)


def _cosine(a: Sequence[float] | None, b: Sequence[float] | None) -> float:
    if a is None or b is None:
        return 0.0
    na, nb = math.hypot(*a), math.hypot(*b)
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb) if na and nb else 0.0


def find_update_candidates(
    facts: Sequence[FactRow],
    vectors: Mapping[str, Sequence[float]],
    config: ReconcileConfig,
    since_ms: int = 0,
) -> list[UpdatePair]:
    """Pairs of live facts written at different times, not the same words: about the same
    key entity and stating the same key attribute or close (cosine ≥ `update_similarity` or
    word overlap ≥ `update_word_overlap`), or naming one thing (`statements.mentions`) and
    as close as one slot stated twice (cosine ≥ `slot_similarity`: "the staging database
    runs on Postgres 14" / "we upgraded the staging database", whose subjects differ). Only
    those with a fact newer than `since_ms`, newest first, at most `max_update_pairs`."""
    groups: dict[str, list[FactRow]] = defaultdict(list)
    for fact in facts:
        if fact.key_entity:
            groups[f"key:{fact.key_entity}"].append(fact)
        for mention in mentions(fact.content):
            groups[f"mention:{mention}"].append(fact)
    found: dict[tuple[str, str], UpdatePair] = {}
    for name, group in groups.items():
        if len(group) < 2:
            continue
        by_key = name.startswith("key:")
        group.sort(key=_order)
        # The newest statements about an entity are the ones an update can concern; a cap
        # keeps one busy entity ("user") from costing n^2 comparisons.
        group = group[-config.max_entity_facts :]
        words = [content_words(f.content, f.key_entity) for f in group]
        for j in range(1, len(group)):
            newer = group[j]
            for i in range(j):
                older = group[i]
                if max(older.created_at, newer.created_at) <= since_ms:
                    continue
                if older.content_hash == newer.content_hash:
                    continue  # the same words: dedup's job
                if (older.fact_id, newer.fact_id) in found:
                    continue
                union = words[i] | words[j]
                overlap = len(words[i] & words[j]) / len(union) if union else 1.0
                similarity = _cosine(vectors.get(older.fact_id), vectors.get(newer.fact_id))
                if (
                    by_key
                    and (
                        (older.key_attribute and older.key_attribute == newer.key_attribute)
                        or similarity >= config.update_similarity
                        or overlap >= config.update_word_overlap
                    )
                ) or similarity >= config.slot_similarity:
                    similarity = round(max(-1.0, min(1.0, similarity)), 6)
                    found[(older.fact_id, newer.fact_id)] = UpdatePair(
                        older=older, newer=newer, similarity=similarity
                    )
    pairs = sorted(
        found.values(), key=lambda p: (-p.newer.created_at, -p.older.created_at, p.older.fact_id)
    )
    return pairs[: config.max_update_pairs]


def updates_to_apply(
    decisions: Sequence[Adjudication], pairs: Sequence[UpdatePair]
) -> list[tuple[UpdatePair, Adjudication]]:
    """The `update` (and `duplicate`) decisions to apply, each older fact once: superseded
    by the first later statement that updates it, its direct successor (so a chain
    s1 → s2 → s3 links each to the next one, the newest stays live, history is a chain)."""
    chosen: dict[str, tuple[UpdatePair, Adjudication]] = {}
    for pair, decision in zip(pairs, decisions, strict=True):
        if decision.decision not in ("update", "duplicate"):
            continue
        current = chosen.get(pair.older.fact_id)
        # The first later statement that updates a fact is its direct successor.
        if current is None or _order(pair.newer) < _order(current[0].newer):
            chosen[pair.older.fact_id] = (pair, decision)
    return sorted(chosen.values(), key=lambda item: _order(item[0].older))


RECONCILER_SOURCE = "reconciler"
# The `op` of an operator's undo and replay events (issue 25: nothing acknowledged disappears
# silently; each supersession can be seen, undone and replayed).
UNDONE = "supersession_undone"
REPLAYED = "supersession_replayed"


class Change(BaseModel):
    """An operator's undo or replay: `fact_id` lost to `superseded_by`; `event_id` is the
    event recording the change, `by` the operator."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    superseded_by: str
    event_id: str
    by: str


class ReconcileReport(BaseModel):
    tenant_id: str
    facts_examined: int = 0
    episodes_examined: int = 0
    merged_exact: int = 0
    merged_similar: int = 0
    superseded_conflicts: int = 0
    promoted: int = 0
    summarised: int = 0
    links_added: int = 0
    pending_completed: int = 0
    update_pairs: int = 0
    superseded_updates: int = 0
    adjudicator: str = ""
    merges: list[Merge] = Field(default_factory=list)
    conflicts: list[Supersede] = Field(default_factory=list)
    # Every adjudicated pair's decision; `unsure` ones are listed in the daily brief.
    decisions: list[Adjudication] = Field(default_factory=list)
    new_fact_ids: list[str] = Field(default_factory=list)


class Reconciler:
    def __init__(
        self,
        tenant_id: str,
        *,
        db: D1Database,
        vectors: VectorIndex,
        memory: SemanticMemory,
        embedding_key: str,
        clock: Clock,
        gate: WriteGate | None = None,
        config: ReconcileConfig | None = None,
        adjudicator: Adjudicator | None = None,
    ) -> None:
        self.tenant_id = tenant_id
        self.adjudicator: Adjudicator = adjudicator or RulesAdjudicator()
        self._events = EventLog(tenant_id, db)
        self._memory = memory
        self._clock = clock
        self._gate = gate or WriteGate(tenant_id, clock=clock, events=self._events)
        self.config = config or ReconcileConfig()
        self._store = ReconcileStore(
            tenant_id,
            db=db,
            vectors=vectors,
            namespace=memory.namespace,
            embedding_key=embedding_key,
            clock=clock,
        )

    async def undo(self, fact_id: str, by: str) -> Change:
        """Make superseded `fact_id` live again (its vector rewritten); from then on the
        pair stays apart (`facts_kept_apart`). 404 `fact_not_found`, 409 `not_superseded`."""
        fact = await self._memory.get(fact_id)
        if fact is None:
            raise ApiError(404, "fact_not_found", "no such fact in this tenant")
        if fact.status == "pending_vector":
            await self._memory.complete_pending()  # an undo that stopped before its vector
        if fact.status != "superseded" or fact.superseded_by is None:
            raise ApiError(409, "not_superseded", f"the fact is {fact.status}")
        now, winner = self._clock.now(), fact.superseded_by
        # The event is in the restore's batch, written only if the restore happened.
        change, record = self._changed(now, UNDONE, fact_id, winner, by)
        if not await self._store.restore(fact_id, winner, int(now * 1000), record):
            raise ApiError(409, "not_superseded", "the fact changed meanwhile")
        await self._memory.complete_pending()
        self._publish("restored", {"id": fact_id, "key": winner, "by": by})  # live again
        return change

    async def replay(self, event_id: str, by: str) -> Change:
        """Apply again the supersession event `event_id` records, as a guarded update like
        the reconciler's own; 404 `event_not_found`, 422 `not_a_supersession`, 409
        `not_active` (the loser is not live: nothing to replay)."""
        rows = await self._events.rows(
            "event_id = ? AND kind = 'memory_written'", event_id, limit=1
        )
        if not rows:
            raise ApiError(404, "event_not_found", "no such event in this tenant")
        payload = json.loads(str(rows[0]["payload"]))
        loser, winner = payload.get("supersedes"), payload.get("key")
        if not (isinstance(loser, str) and isinstance(winner, str)):
            raise ApiError(422, "not_a_supersession", "the event records no supersession")
        now = self._clock.now()
        if await self._memory.get(winner) is None:  # both would be out of recall
            raise ApiError(409, "not_active", "the fact that superseded it is gone")
        change, record = self._changed(now, REPLAYED, loser, winner, by)
        done = await self._store.supersede(
            loser, winner, int(now * 1000), relation=None, record=record
        )
        # Its vector goes now, or at the repeat of a replay that stopped before it did.
        await self._store.drop_vectors([loser])
        if not done:
            raise ApiError(409, "not_active", "the superseded fact is not live now")
        self._publish("superseded", {"id": winner, "key": winner, "supersedes": loser, "by": by})
        return change

    def _publish(self, type_: str, data: dict[str, str]) -> None:
        """An operator's undo or replay on the change feed (docs/portability.md)."""
        if self._gate.feed is not None:
            self._gate.feed.publish(self.tenant_id, [(type_, {"tier": "semantic", **data})])

    def _changed(
        self, now: float, op: str, loser: str, winner: str, by: str
    ) -> tuple[Change, Recorder]:
        """An operator's undo or replay as a `memory_written` event naming both facts, and
        its INSERT for the batch that makes the change (written only if it happened)."""
        event = memory_written(
            tenant_id=self.tenant_id,
            tier="semantic",
            now=now,
            content_hash=sha256_hex(f"{op}|{loser}|{winner}|{now}"),
            payload={"op": op, "key": winner, "fact_id": loser, "superseded_by": winner, "by": by},
            agent_type="operator",
        )
        change = Change(fact_id=loser, superseded_by=winner, event_id=event.event_id, by=by)
        return change, lambda when: self._events.statement(event, when=when)

    async def run(self) -> ReconcileReport:
        report = ReconcileReport(tenant_id=self.tenant_id)
        now_ms = int(self._clock.now() * 1000)
        report.pending_completed = await self._memory.complete_pending()
        # 1-2. Dedup, then conflicts, over the live facts.
        facts = await self._store.live_facts(self.config.max_facts)
        report.facts_examined = len(facts)
        vectors = await self._store.fact_vectors([f.fact_id for f in facts])
        # Pairs an operator undid stay apart (`undo`).
        apart = await self._store.kept_apart()
        for merge in find_duplicates(facts, vectors, self.config):
            why = {"op": "merged", "decision": "duplicate", "reason": merge.reason}
            if (merge.drop, merge.keep) not in apart and await self._supersede(
                merge.drop, merge.keep, now_ms, relation="merged_from", why=why
            ):
                report.merges.append(merge)
        report.merged_exact = sum(m.reason == "exact" for m in report.merges)
        report.merged_similar = len(report.merges) - report.merged_exact
        dropped = {m.drop for m in report.merges}
        remaining = [f for f in facts if f.fact_id not in dropped]
        for conflict in resolve_conflicts(remaining, self.config):
            why = {"op": "superseded", "decision": "update", "reason": "same_predicate_newer"}
            if (conflict.loser, conflict.winner) not in apart and await self._supersede(
                conflict.loser, conflict.winner, now_ms, relation=None, why=why
            ):
                report.conflicts.append(conflict)
        report.superseded_conflicts = len(report.conflicts)
        # 2b. Updates in free text, decided by the adjudicator; pairs whose facts were all
        # examined by an earlier run are not asked again (the link watermark moves each run).
        lost = {c.loser for c in report.conflicts}
        await self._updates(
            [f for f in remaining if f.fact_id not in lost],
            vectors,
            await self._store.linked_through(),
            now_ms,
            report,
            apart,
        )
        # 3-4. Promotion and decay, over the episodes.
        episodes = await self._store.episodes(self.config.max_episodes)
        report.episodes_examined = len(episodes)
        known = {
            (f.subject, f.predicate, normalize_content(f.object)) for f in remaining if f.object
        }
        for p in find_promotions(episodes, self.config, known):
            report.promoted += await self._learn(p, "promoted_from", now_ms, report)
        summarised = await self._store.summarised_episode_ids()
        for s in find_decay(episodes, now_ms, self.config, summarised):
            report.summarised += await self._learn(s, "summarised_from", now_ms, report)
        # 5. Linking: facts that have not been linked yet.
        report.links_added = await self._link(now_ms)
        log.info(
            "reconcile %s: %s",
            self.tenant_id,
            report.model_dump(exclude={"merges", "conflicts", "new_fact_ids", "decisions"}),
        )
        return report

    async def _updates(
        self,
        facts: Sequence[FactRow],
        vectors: dict[str, list[float]],
        since_ms: int,
        now_ms: int,
        report: ReconcileReport,
        apart: set[tuple[str, str]],
    ) -> None:
        report.adjudicator = self.adjudicator.name
        pairs = [
            p
            for p in find_update_candidates(facts, vectors, self.config, since_ms)
            if (p.older.fact_id, p.newer.fact_id) not in apart
        ]
        report.update_pairs = len(pairs)
        if not pairs:
            return
        if isinstance(self.adjudicator, LlmAdjudicator):
            # The model is paid per call: what is left of the tenant's day goes to this run.
            used = await self._events.adjudicated_since(now_ms - 86_400_000, "llm:")
            self.adjudicator.budget = self.adjudicator.config.llm_pairs_per_day - used
        decisions = await self.adjudicator.decide(pairs)
        report.decisions = list(decisions)
        applied: set[tuple[str, str]] = set()
        for pair, decision in updates_to_apply(decisions, pairs):
            done = await self._supersede(
                pair.older.fact_id,
                pair.newer.fact_id,
                now_ms,
                relation="merged_from" if decision.decision == "duplicate" else None,
                valid_to_ms=pair.newer.valid_from,
                link_score=min(1.0, max(0.0, pair.similarity)),
                why={"op": "superseded", **decision.model_dump(exclude={"older", "newer"})},
            )
            if done:
                applied.add((decision.older, decision.newer))
                report.superseded_updates += 1
        # The write gate records the applied ones; every other decision gets its own event,
        # so the brief can list the `unsure` ones and an audit see why a pair was left alone.
        events = [
            memory_written(
                tenant_id=self.tenant_id,
                tier="semantic",
                now=now_ms / 1000.0,
                content_hash=sha256_hex(f"{d.older}|{d.newer}|{d.decision}|{d.adjudicator}"),
                payload={"op": "adjudicated", **d.model_dump(), "applied": False},
                agent_type=RECONCILER_SOURCE,
            )
            for d in decisions
            if (d.older, d.newer) not in applied
        ]
        if events:
            await self._events.record_many(events)

    async def _supersede(
        self,
        loser: str,
        winner: str,
        now_ms: int,
        *,
        relation: str | None,
        valid_to_ms: int | None = None,
        link_score: float | None = None,
        why: dict[str, str],
    ) -> bool:
        """Mark `loser` superseded by `winner` (kept, never deleted), move its provenance
        (and, for a merge, record it as merged into the winner), drop its vector. `why`
        (op, decision, reason, adjudicator) goes into the `memory_written` event, which
        names both facts (`key` the winner, `supersedes` the loser)."""
        proposal = WriteProposal(
            tier="semantic",
            key=winner,
            value={
                "superseded": loser,
                "superseded_by": winner,
                "valid_to": now_ms if valid_to_ms is None else valid_to_ms,
            },
            source=RECONCILER_SOURCE,
            supersedes=loser,
            decision={"adjudicator": "rules", **why},
        )
        self._gate.check(proposal)
        if not await self._store.supersede(
            loser,
            winner,
            now_ms,
            relation=relation,
            valid_to_ms=valid_to_ms,
            link_score=link_score,
        ):
            return False  # no longer active: another run got there first
        await self._gate.committed([proposal])
        try:
            await self._store.drop_vectors([loser])
        except Exception as exc:  # recall ignores superseded rows; a later run retries
            log.warning("reconcile %s: vector of %s not deleted: %s", self.tenant_id, loser, exc)
        return True

    async def _learn(
        self,
        p: Promotion,
        relation: Literal["promoted_from", "summarised_from"],
        now_ms: int,
        report: ReconcileReport,
    ) -> int:
        """Learn `p` with provenance to its episodes; 1 if it was created, else 0."""
        confidence, count = p.confidence, len(p.episode_ids)
        metadata = {"promoted_from_episodes": count}
        if relation == "summarised_from":  # a summary is kept at least at the policy's floor
            floor = self._gate.policy.confidence_floor.get("semantic", 0.0)
            confidence, metadata = max(confidence, floor), {"summarised_episodes": count}
        fact = FactInput(
            content=p.content,
            subject=p.subject,
            predicate=p.predicate,
            object=p.object,
            confidence=confidence,
            source=RECONCILER_SOURCE,
            metadata=metadata,
        )
        result = await self._memory.learn(fact)
        if not result.created:
            return 0
        await self._store.add_episode_provenance(result.fact_id, p.episode_ids, relation, now_ms)
        report.new_fact_ids.append(result.fact_id)
        return 1

    async def _link(self, now_ms: int) -> int:
        """Link the facts created since the last run to their live nearest neighbours."""
        since = await self._store.linked_through()
        new = await self._store.facts_created_after(since, self.config.max_facts)
        new_ids = [fact_id for fact_id, _ in new]
        through = max([since, *(created_at for _, created_at in new)])
        added = 0
        if new_ids:
            neighbours = {
                fact_id: await self._store.neighbours(values, self.config.link_top_k + 1)
                for fact_id, values in (await self._store.fact_vectors(new_ids)).items()
            }
            candidates = {other for matches in neighbours.values() for other, _ in matches}
            live = await self._store.active_ids(sorted(candidates | set(new_ids)))
            links = find_links(new_ids, neighbours, live, self.config)
            added = await self._store.insert_links(links, now_ms)
        await self._store.mark_linked(through, now_ms)
        return added
