"""Contextual indexing: what a memory is indexed and embedded with.

A memory written as part of a session (a conversation, a run, a thread: `FactInput.session`,
default the run it was learned from) is often a reply whose topic sits in the turns before it
("Yes, next month", "that one was hers"). Following the technique known as contextual
retrieval, such a memory is indexed with its neighbours in the session:

* the keyword index (`semantic_facts.index_terms`, migration 0009) gets a second, lower-
  weighted field, the context: the words of the `before` memories written just
  before it in the session, of the `after` written just after it, and its date's
  month name and year (`bm25.date_terms`);
* the embedding input is the `embed_before` previous memories followed by the memory itself.

What comes before is known when a memory is written. What comes after is known at write
time when it is in the same `learn_many` call; otherwise it arrives with a later write, and
`extend_following` adds it to the earlier memories' context (in the background when the
caller has a `waitUntil`). Memories without a session are indexed with their date only and
embedded as they are.

The counts are `RetrievalConfig.context`; the defaults were chosen on the LoCoMo dev split
(docs/semantic-memory.md, "How the constants were chosen").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from agent_memory.retrieval.terms import date_terms, merge_counts, term_counts
from agent_memory.tiers.semantic._scope import FactScope
from bindings.ports.sql import Row

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """How one memory is indexed: `{"term": [tf, context_tf]}` as JSON and the two lengths."""

    index_terms: str
    length: int
    context_length: int


@dataclass(frozen=True, slots=True)
class ContextPlan:
    """What one new memory is embedded and indexed with."""

    session: str | None
    embed_text: str
    entry: IndexEntry


def index_entry(content: str, context: Sequence[str], valid_from_s: float | None) -> IndexEntry:
    """The keyword-index entry of `content` with its context texts and its date."""
    own = term_counts(content)
    extra = [term_counts(text) for text in context]
    if valid_from_s is not None:
        extra.append(dict.fromkeys(date_terms(valid_from_s), 1))
    ctx = merge_counts(*extra)
    terms = {t: [own.get(t, 0), ctx.get(t, 0)] for t in dict.fromkeys([*own, *ctx])}
    return IndexEntry(
        index_terms=json.dumps(terms, separators=(",", ":"), ensure_ascii=False),
        length=sum(own.values()),
        context_length=sum(ctx.values()),
    )


def extended_entry(row: Row, following: Sequence[str]) -> IndexEntry:
    """A stored entry (`index_terms`, `index_length`, `context_length` of `row`) with the
    words of `following` added to its context."""
    terms: dict[str, list[int]] = json.loads(str(row["index_terms"]))
    added = merge_counts(*(term_counts(text) for text in following))
    for term, n in added.items():
        terms.setdefault(term, [0, 0])[1] += n
    return IndexEntry(
        index_terms=json.dumps(terms, separators=(",", ":"), ensure_ascii=False),
        length=int(row["index_length"]),
        context_length=int(row["context_length"]) + sum(added.values()),
    )


class SessionContext:
    """Plans the context of new memories and extends earlier ones (one tenant)."""

    def __init__(self, scope: FactScope) -> None:
        self._s = scope
        self._c = scope.config.context

    async def _previous(self, session: str, limit: int) -> list[Row]:
        """The session's last `limit` memories, oldest first."""
        result = (
            await self._s.db.prepare(
                "SELECT fact_id, content, index_terms, index_length, context_length "
                "FROM semantic_facts WHERE tenant_id = ? AND session_key = ? "
                "ORDER BY fts_rowid DESC LIMIT ?"
            )
            .bind(self._s.tenant_id, session, limit)
            .all()
        )
        return list(reversed(result.results))

    async def plan(
        self, items: Sequence[tuple[str | None, str, float | None]]
    ) -> tuple[list[ContextPlan], dict[str, list[Row]]]:
        """For each `(session, content, valid_from)`, in write order, its plan; and per
        session the stored memories that preceded this call (for `extend_following`)."""
        sessions = list(dict.fromkeys(s for s, _, _ in items if s is not None))
        keep = max(self._c.before, self._c.after, self._c.embed_before)
        before_call = {s: await self._previous(s, keep) for s in sessions if keep}
        before_call.update({s: [] for s in sessions if s not in before_call})
        texts: dict[str, list[str]] = {
            s: [str(r["content"]) for r in before_call[s]] for s in sessions
        }
        position: dict[str, list[int]] = {s: [] for s in sessions}
        for index, (session, _content, _) in enumerate(items):
            if session is not None:
                position[session].append(index)
        plans: list[ContextPlan] = []
        for index, (session, content, valid_from) in enumerate(items):
            if session is None:
                plans.append(ContextPlan(None, content, index_entry(content, [], valid_from)))
                continue
            seen = texts[session]
            before = seen[-self._c.before :] if self._c.before else []
            later = [i for i in position[session] if i > index][: self._c.after]
            after = [items[i][1] for i in later]
            embed_before = seen[-self._c.embed_before :] if self._c.embed_before else []
            plans.append(
                ContextPlan(
                    session=session,
                    embed_text="\n".join([*embed_before, content]),
                    entry=index_entry(content, [*before, *after], valid_from),
                )
            )
            seen.append(content)
        return plans, before_call

    async def extend_following(
        self,
        before_call: dict[str, list[Row]],
        items: Sequence[tuple[str | None, str, float | None]],
    ) -> None:
        """Add the first memories of this call to the context of the session's memories
        written before it (the k-th from last still lacks `after - k + 1` of them)."""
        statements = []
        for session, rows in before_call.items():
            new = [content for s, content, _ in items if s == session]
            after = self._c.after
            if not new or not after:
                continue
            for k, row in enumerate(reversed(rows[-after:]), start=1):
                wanted = new[: after - k + 1]
                if not wanted or row["index_terms"] is None:
                    continue
                entry = extended_entry(row, wanted)
                statements.append(
                    self._s.db.prepare(
                        "UPDATE semantic_facts SET index_terms = ?, index_length = ?, "
                        "context_length = ? WHERE tenant_id = ? AND fact_id = ?"
                    ).bind(
                        entry.index_terms,
                        entry.length,
                        entry.context_length,
                        self._s.tenant_id,
                        row["fact_id"],
                    )
                )
        if statements:
            await self._s.db.batch(statements)
