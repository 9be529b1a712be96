"""The per-tenant keyword index: recall's keyword channel, contextual indexing, and the
renormalisation of stored terms when the vocabulary grows.

Channel, tenant-first: `candidates` reads the tenant's statistics and the query terms' df in
one batch, then aggregates the postings of the rarer terms with BM25F in SQL. Terms are taken
rarest first while their postings add up to at most `POSTINGS_BUDGET` (a commoner term drives
no candidates but still scores them; when even the rarest exceeds it, only its newest
postings are read). `score_column` is the exact BM25F over every query term as a SQL column,
so all channels' candidates are scored (and normalised) in the statement that loads them.

Contextual indexing (contextual retrieval): a memory with a session is indexed with a second,
lower-weighted field, the words of the `before` memories before it and the `after` ones after
it in the session plus its date's month and year (`date_terms`), and embedded after its
`embed_before` predecessors. Later memories arriving in another call are added by
`extend_following`. Counts are `RetrievalConfig.context`, chosen on the LoCoMo dev split
(docs/semantic-memory.md, "How the constants were chosen").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_memory.directory import TENANT_CODE
from agent_memory.ids import distinct_tenants_sql
from agent_memory.retrieval import (
    CANONICAL_STEMS,
    Bm25Params,
    TenantStats,
    date_terms,
    idf,
    merge_counts,
    term_counts,
)
from agent_memory.tiers.semantic.models import FactScope
from bindings.ports.d1 import D1Database
from bindings.ports.sql import Row, SqlValue

POSTINGS_BUDGET = 1_000
# Terms that drive candidate generation: each is one index range of postings.
MAX_DRIVING_TERMS = 16


@dataclass(frozen=True, slots=True)
class KeywordQuery:
    """A query's terms with the tenant's statistics for them."""

    terms: list[str]
    df: dict[str, int]
    stats: TenantStats
    # The tenant's code in the postings (`TENANT_CODE`); None: nothing indexed yet.
    code: str | None
    params: Bm25Params

    @property
    def idfs(self) -> dict[str, float]:
        return {t: idf(self.df.get(t, 0), self.stats.docs) for t in self.terms}


async def prepare(
    scope: FactScope,
    terms: Sequence[str],
    params: Bm25Params,
    compounds: Sequence[tuple[str, tuple[str, str]]] = (),
) -> KeywordQuery:
    """The tenant's statistics and each term's df (one D1 batch). Of `compounds`
    (`retrieval.compound_forms`), a whole the query lacks is added when the index holds
    it; parts it lacks, when the index holds both and not the whole."""
    asked = list(terms)
    terms = list(dict.fromkeys([*terms, *(t for w, p in compounds for t in (w, *p))]))
    stats_result, df_result, code_result = await scope.db.batch(
        [
            scope.sql(
                "SELECT docs, total_length, total_context_length FROM semantic_index_stats "
                "WHERE tenant_id = ?"
            ),
            scope.sql(
                f"SELECT term, df FROM semantic_term_stats WHERE tenant_id = {TENANT_CODE} "
                "AND term IN (SELECT value FROM json_each(?))",
                json.dumps(list(terms)),
            ),
            # The postings and term counts name the tenant by its code (migration 0020).
            scope.sql(f"SELECT {TENANT_CODE} AS code"),
        ]
    )
    found = code_result.results[0]["code"]
    code = None if found is None else str(found)
    row = stats_result.results[0] if stats_result.results else None
    stats = TenantStats(
        docs=int(row["docs"]) if row else 0,
        total_length=int(row["total_length"]) if row else 0,
        total_context_length=int(row["total_context_length"]) if row else 0,
    )
    df = {str(r["term"]): int(r["df"]) for r in df_result.results}
    for whole, parts in compounds:
        if all(p in asked for p in parts) and df.get(whole):
            asked.append(whole)
        elif whole in asked and not df.get(whole) and all(df.get(p) for p in parts):
            asked += [p for p in parts if p not in asked]
    return KeywordQuery(
        terms=list(dict.fromkeys(asked)), df=df, stats=stats, params=params, code=code
    )


async def candidates(
    scope: FactScope,
    query: KeywordQuery,
    extra_sql: str,
    extra_params: Sequence[SqlValue],
    limit: int,
    *,
    narrowed: bool,
    columns: str,
) -> list[Row]:
    """The rows (`columns` of `semantic_facts AS f`, plus `keyword_score`, the exact
    BM25F of `score_column`, and `channel_score`, the BM25F over the driving terms it
    was ranked by) of up to `limit` live facts matching the query's rarer terms, best
    first (see the module docstring). `extra_sql` / `extra_params`: the row conditions
    on `f`; `narrowed`: they go beyond liveness (filters), so more postings are ranked
    before the rows are checked."""
    present = sorted((t for t in query.terms if query.df.get(t, 0) > 0), key=query.df.__getitem__)
    driving: list[str] = []
    total = 0
    for term in present[:MAX_DRIVING_TERMS]:
        if driving and total + query.df[term] > POSTINGS_BUDGET:
            break
        driving.append(term)
        total += query.df[term]
    if not driving:
        return []
    idfs = query.idfs
    if total > POSTINGS_BUDGET:
        # One term alone exceeds the budget: its newest postings only.
        score, score_params = _posting_score(query, "?", [idfs[driving[0]]])
        postings = (
            "(SELECT * FROM semantic_terms WHERE tenant_id = ? AND term = ? "
            "ORDER BY fts_rowid DESC LIMIT ?) AS p"
        )
        postings_params: list[SqlValue] = [query.code, driving[0], POSTINGS_BUDGET]
    else:
        score, score_params = _posting_score(query, "w.value")
        # CROSS JOIN: the query's terms drive one index range of postings each.
        postings = "json_each(?) AS w CROSS JOIN semantic_terms AS p"
        postings += " WHERE p.tenant_id = ? AND p.term = w.key"
        postings_params = [json.dumps({t: idfs[t] for t in driving}), query.code]
    # Rank the postings alone (no row reads), then check the best rows: dead or filtered
    # rows are skipped, so rank more than `limit` (all of them when filters narrow).
    ranked = POSTINGS_BUDGET if narrowed else 2 * limit
    exact, exact_params = score_column(query)
    result = (
        await scope.db.prepare(
            f"SELECT {columns}, {exact} AS keyword_score, k.score AS channel_score FROM "
            "(SELECT f.fts_rowid AS fts_rowid, t.score AS score FROM "
            f"(SELECT p.fts_rowid AS fts_rowid, SUM({score}) AS score "
            f"FROM {postings} GROUP BY p.fts_rowid ORDER BY score DESC LIMIT ?) AS t "
            "CROSS JOIN semantic_facts AS f "
            f"WHERE f.fts_rowid = t.fts_rowid AND f.tenant_id = ?{extra_sql} "
            "ORDER BY t.score DESC, f.fact_id ASC LIMIT ?) AS k "
            # The candidate rows themselves, read once: the channel's hits and their rows.
            "CROSS JOIN semantic_facts AS f WHERE f.fts_rowid = k.fts_rowid "
            "ORDER BY k.score DESC, f.fact_id ASC"
        )
        .bind(
            *exact_params,
            *score_params,
            *postings_params,
            ranked,
            scope.tenant_id,
            *extra_params,
            limit,
        )
        .all()
    )
    return result.results


def score_column(query: KeywordQuery | None) -> tuple[str, list[SqlValue]]:
    """A SQL expression on a `semantic_facts AS f` row: its exact BM25F for `query` over
    every query term, however common (0.0 when it holds none, or without a query), and
    its parameters. One primary-key probe of the postings per query term and row."""
    if query is None or not query.df or query.code is None:
        return "0.0", []
    idfs = query.idfs
    weights = json.dumps({t: idfs[t] for t in query.terms if query.df.get(t, 0) > 0})
    score, params = _posting_score(query, "w.value")
    return (
        f"COALESCE((SELECT SUM({score}) "
        "FROM json_each(?) AS w CROSS JOIN semantic_terms AS p "
        "WHERE p.tenant_id = ? AND p.term = w.key AND p.fts_rowid = f.fts_rowid"
        "), 0.0)",
        [*params, weights, query.code],
    )


def _posting_score(
    query: KeywordQuery, weight: str, weight_params: Sequence[SqlValue] = ()
) -> tuple[str, list[SqlValue]]:
    """One posting's share of BM25F (`retrieval.bm25.bm25f`, which states the formula) as
    SQL over a posting `p` and its term's idf `weight`, with its parameters in text order:
    both keyword queries build it here. The tenant's average length, which moves with every
    write, is a parameter, so the statement's text stays the same (prepared once)."""
    p = query.params
    w = p.context_weight
    freq = f"(p.tf + {w!r} * p.context_tf)"
    length = f"(p.length + {w!r} * p.context_length)"
    sql = (
        f"{weight} * {freq} * {p.k1 + 1.0!r} / ({freq} + {p.k1!r} * "
        f"({1.0 - p.b!r} + {p.b!r} * {length} / ?))"
    )
    return sql, [*weight_params, query.stats.average_length(p)]


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """How one memory is indexed: `index_terms` (`_entry_json`) and the two lengths."""

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
    return IndexEntry(_entry_json(terms), sum(own.values()), sum(ctx.values()))


def _entry_json(terms: dict[str, list[int]]) -> str:
    """`index_terms` as stored (migration 0020): a JSON array whose first element joins with
    spaces the terms once in the memory's own text and not in its context (most of them),
    any other term `[term, tf, context_tf]`. Terms are letters and digits only
    (`term_counts`): no space inside one, nothing to escape."""
    plain = " ".join(t for t, (tf, ctx) in terms.items() if (tf, ctx) == (1, 0))
    other = [[t, tf, ctx] for t, (tf, ctx) in terms.items() if (tf, ctx) != (1, 0)]
    return json.dumps(
        [plain, *other] if plain else other, separators=(",", ":"), ensure_ascii=False
    )


def stored_terms(index_terms: str) -> dict[str, list[int]]:
    """`{"term": [tf, context_tf]}` of a stored `index_terms` (`_entry_json`'s array)."""
    stored: list[str | list[Any]] = json.loads(index_terms)
    return {t: [1, 0] for e in stored if isinstance(e, str) for t in e.split()} | {
        str(e[0]): [int(e[1]), int(e[2])] for e in stored if isinstance(e, list)
    }


def extended_entry(row: Row, following: Sequence[str]) -> IndexEntry:
    """A stored entry (`index_terms`, `index_length`, `context_length` of `row`) with the
    words of `following` added to its context."""
    terms = stored_terms(str(row["index_terms"]))
    added = merge_counts(*(term_counts(text) for text in following))
    for term, n in added.items():
        terms.setdefault(term, [0, 0])[1] += n
    return IndexEntry(
        _entry_json(terms),
        int(row["index_length"]),
        int(row["context_length"]) + sum(added.values()),
    )


async def plan_context(
    scope: FactScope, items: Sequence[tuple[str | None, str, float | None]]
) -> tuple[list[ContextPlan], dict[str, list[Row]]]:
    """For each `(session, content, valid_from)`, in write order, its plan; and per
    session the stored memories that preceded this call (for `extend_following`)."""
    sessions = list(dict.fromkeys(s for s, _, _ in items if s is not None))
    c = scope.config.context
    keep = max(c.before, c.after, c.embed_before)
    before_call: dict[str, list[Row]] = {}
    for name in sessions:  # its last `keep` memories, oldest first
        before_call[name] = []
        if keep:
            result = await scope.sql(
                "SELECT fact_id, content, index_terms, index_length, context_length "
                "FROM semantic_facts WHERE tenant_id = ? AND session_key = ? "
                "ORDER BY fts_rowid DESC LIMIT ?",
                name,
                keep,
            ).all()
            before_call[name] = list(reversed(result.results))
    texts: dict[str, list[str]] = {s: [str(r["content"]) for r in before_call[s]] for s in sessions}
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
        before = seen[-c.before :] if c.before else []
        later = [i for i in position[session] if i > index][: c.after]
        after = [items[i][1] for i in later]
        embed_before = seen[-c.embed_before :] if c.embed_before else []
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
    scope: FactScope,
    before_call: dict[str, list[Row]],
    items: Sequence[tuple[str | None, str, float | None]],
) -> None:
    """Add the first memories of this call to the context of the session's memories
    written before it (the k-th from last still lacks `after - k + 1` of them)."""
    c = scope.config.context
    statements = []
    for session, rows in before_call.items():
        new = [content for s, content, _ in items if s == session]
        after = c.after
        if not new or not after:
            continue
        for k, row in enumerate(reversed(rows[-after:]), start=1):
            wanted = new[: after - k + 1]
            if not wanted or row["index_terms"] is None:
                continue
            entry = extended_entry(row, wanted)
            statements.append(
                scope.sql(
                    "UPDATE semantic_facts SET index_terms = ?2, index_length = ?3, "
                    "context_length = ?4 WHERE tenant_id = ?1 AND fact_id = ?5",
                    entry.index_terms,
                    entry.length,
                    entry.context_length,
                    row["fact_id"],
                )
            )
    if statements:
        await scope.db.batch(statements)


# Facts read per page and sent per UPDATE. The UPDATE looks each fact's entry up in the
# JSON parameter (a scan of it per fact), so both its size and the page are kept small.
FACTS_PER_STATEMENT = 100
MAX_STATEMENT_JSON = 64_000  # characters of the JSON parameter before a new statement


def _statement_groups(items: Sequence[list[Any]]) -> list[str]:
    """`items` as JSON array parameters, each at most `MAX_STATEMENT_JSON` characters (or
    one item)."""
    groups: list[str] = []
    current: list[str] = []
    size = 0
    for value in items:
        item = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        if current and size + len(item) > MAX_STATEMENT_JSON:
            groups.append(f"[{','.join(current)}]")
            current, size = [], 0
        current.append(item)
        size += len(item) + 1
    if current:
        groups.append(f"[{','.join(current)}]")
    return groups


_TERMS_PAGE_SQL = (
    "SELECT fts_rowid, index_terms FROM semantic_facts WHERE tenant_id = ? AND fts_rowid > ? "
    "AND index_terms IS NOT NULL ORDER BY fts_rowid LIMIT ?"
)
_RETERM_SQL = (
    "UPDATE semantic_facts SET index_terms = (SELECT json_extract(j.value, '$[2]') "
    "FROM json_each(?1) AS j WHERE json_extract(j.value, '$[0]') = semantic_facts.fts_rowid) "
    "WHERE tenant_id = ?2 AND fts_rowid IN (SELECT json_extract(value, '$[0]') "
    "FROM json_each(?1) AS k WHERE json_extract(k.value, '$[1]') = semantic_facts.index_terms)"
)


async def renormalise(
    db: D1Database, tenant_id: str, limit: int, after: int = 0
) -> tuple[int, int | None]:
    """Map the stored terms of up to `limit` of the tenant's indexed facts (from fts_rowid
    `after`) through `retrieval.CANONICAL_STEMS`, for facts indexed before the vocabulary
    named their variants: counts of merged terms add up, lengths are unchanged, the triggers
    move the postings, and a fact rewritten meanwhile keeps its new entry. Returns how many
    changed and where to continue (None: the tenant is done). Idempotent."""
    changed = 0
    seen = 0
    while seen < limit:
        page = min(FACTS_PER_STATEMENT, limit - seen)
        rows = (await db.prepare(_TERMS_PAGE_SQL).bind(tenant_id, after, page).all()).results
        updates = []
        for row in rows:
            terms: dict[str, list[int]] = {}
            for term, (tf, ctx) in stored_terms(str(row["index_terms"])).items():
                counts = terms.setdefault(CANONICAL_STEMS.get(term, term), [0, 0])
                counts[0] += tf
                counts[1] += ctx
            entry = _entry_json(terms)
            if entry != row["index_terms"]:
                updates.append([int(row["fts_rowid"]), row["index_terms"], entry])
        for group in _statement_groups(updates):
            await db.prepare(_RETERM_SQL).bind(group, tenant_id).run()
        changed += len(updates)
        seen += len(rows)
        if len(rows) < page:
            return changed, None
        after = int(rows[-1]["fts_rowid"])
    return changed, after


async def renormalise_all(
    db: D1Database, tenants: Sequence[str] | None = None, page: int = 1_000
) -> dict[str, int]:
    """`renormalise` every indexed fact of `tenants` (default: every tenant with facts);
    returns the facts changed per tenant. For after `CANONICAL_STEMS` grew."""
    if tenants is None:
        sql = distinct_tenants_sql("semantic_facts", "index_terms IS NOT NULL")
        tenants = [str(row["tenant_id"]) for row in (await db.prepare(sql).all()).results]
    changed: dict[str, int] = {}
    for tenant in tenants:
        cursor: int | None = 0
        while cursor is not None:
            done, cursor = await renormalise(db, tenant, page, cursor)
            changed[tenant] = changed.get(tenant, 0) + done
    return changed
