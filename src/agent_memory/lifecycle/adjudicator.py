"""The update adjudicator port: does a newer statement replace an older one?

The reconciler's update step (`_updates.find_update_candidates`) finds candidate pairs —
two live facts about the same key entity whose content is close but not a duplicate — and
asks an `Adjudicator` about them, in the background (reconcile runs, never a request):

* `update`: the newer supersedes the older (`superseded_by`, validity closed, both kept
  and linked);
* `duplicate`: the same statement (the older is merged into the newer);
* `compatible`: both hold (nothing changes);
* `unsure`: left alone and listed in the daily brief for a person to look at.

Two adjudicators implement the port:

* `RulesAdjudicator` ("rules"): `tiers.semantic.update_rules.judge_update` — temporal markers
  ("now", "no longer", "moved to", "changed"), negation, a new value of the same attribute.
  No model; deterministic; the same rules recall uses before the reconciler has run.
* `LlmAdjudicator` ("llm:<model>"): asks the `LLM` port (Workers AI on Cloudflare, any
  OpenAI-compatible endpoint locally) one question per pair and reads a one-word decision.
  Pairs the rules decide with a marker are not sent (the model only sees what the rules
  cannot settle); an answer it cannot parse, or a model error, falls back to the rules'
  decision, with that said in the reason.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from agent_memory.tiers.semantic.keys import Decision, FactKey, KeySource, judge_update
from bindings.ports.llm import LLM, ChatMessage

log = logging.getLogger(__name__)

_DECISION_WORD = re.compile(r"\b(update|duplicate|compatible|unsure)\b", re.IGNORECASE)
LLM_SYSTEM_PROMPT = (
    "You maintain an agent's long-term memory. You are shown two statements about the same "
    "entity, OLDER and NEWER. Answer with exactly one word: 'update' if NEWER replaces "
    "OLDER (OLDER is no longer true), 'duplicate' if they say the same thing, 'compatible' "
    "if both can be true at once, 'unsure' if you cannot tell."
)


class Statement(BaseModel):
    """One side of a candidate pair."""

    model_config = ConfigDict(frozen=True)

    fact_id: str
    content: str
    entity: str
    attribute: str
    source: str
    valid_from: int
    created_at: int

    @property
    def key(self) -> FactKey:
        source: KeySource = self.source if self.source in _SOURCES else "none"  # type: ignore[assignment]
        return FactKey(self.entity, self.attribute, source)


_SOURCES = frozenset(
    {"structured", "metadata", "known_subject", "speaker", "named_entity", "sentence_subject"}
)


class UpdatePair(BaseModel):
    """Two statements about the same entity, `older` written before `newer`."""

    model_config = ConfigDict(frozen=True)

    older: Statement
    newer: Statement
    similarity: float


class Adjudication(BaseModel):
    model_config = ConfigDict(frozen=True)

    older: str
    newer: str
    decision: Decision
    reason: str
    adjudicator: str


class Adjudicator(Protocol):
    """Decides candidate pairs; one `Adjudication` per pair, in order."""

    @property
    def name(self) -> str: ...

    async def decide(self, pairs: Sequence[UpdatePair]) -> list[Adjudication]: ...


class RulesAdjudicator:
    """`judge_update` over each pair: no model, no I/O."""

    name = "rules"

    async def decide(self, pairs: Sequence[UpdatePair]) -> list[Adjudication]:
        return [self.decide_one(pair) for pair in pairs]

    def decide_one(self, pair: UpdatePair) -> Adjudication:
        verdict = judge_update(
            pair.older.content, pair.older.key, pair.newer.content, pair.newer.key
        )
        return Adjudication(
            older=pair.older.fact_id,
            newer=pair.newer.fact_id,
            decision=verdict.decision,
            reason=verdict.reason,
            adjudicator=self.name,
        )


class LlmAdjudicator:
    """Asks a chat model about the pairs the rules settle without a marker (see the module
    docstring); falls back to the rules on an error or an unreadable answer."""

    def __init__(self, llm: LLM) -> None:
        self._llm = llm
        self._rules = RulesAdjudicator()

    @property
    def name(self) -> str:
        return f"llm:{self._llm.model}"

    async def decide(self, pairs: Sequence[UpdatePair]) -> list[Adjudication]:
        out: list[Adjudication] = []
        for pair in pairs:
            ruled = self._rules.decide_one(pair)
            # A temporal marker, a negation or identical words are settled by the rules;
            # the model is for the implicit cases.
            if ruled.reason.startswith(("temporal_marker", "negation", "same_words")):
                out.append(ruled)
                continue
            out.append(await self._ask(pair, ruled))
        return out

    async def _ask(self, pair: UpdatePair, ruled: Adjudication) -> Adjudication:
        question = (
            f"Entity: {pair.newer.entity}\nOLDER: {pair.older.content}\n"
            f"NEWER: {pair.newer.content}\nAnswer:"
        )
        try:
            result = await self._llm.chat(
                [
                    ChatMessage(role="system", content=LLM_SYSTEM_PROMPT),
                    ChatMessage(role="user", content=question),
                ]
            )
        except Exception as exc:  # the model is optional help, never a failure of the run
            log.warning("llm adjudicator failed, using the rules: %s", exc)
            return ruled.model_copy(update={"reason": f"llm_error;rules:{ruled.reason}"})
        match = _DECISION_WORD.search(result.message.content or "")
        if match is None:
            return ruled.model_copy(update={"reason": f"llm_unreadable;rules:{ruled.reason}"})
        decision: Decision = match.group(1).lower()  # type: ignore[assignment]
        return Adjudication(
            older=pair.older.fact_id,
            newer=pair.newer.fact_id,
            decision=decision,
            reason="llm_answer",
            adjudicator=self.name,
        )
