"""Semantic memory latency with 100K facts in one tenant, in the local runtime.

    uv run python benchmarks/semantic_latency.py [--facts 100000] [--queries 300]
        [--batch 1000] [--embedder minilm|hashing] [--state DIR [--reuse]]

What it measures (the same code the Worker runs, `agent_memory.tiers.semantic.SemanticMemory`,
against the local adapters: SQLite D1 with the per-tenant keyword postings, the numpy
Vectorize stand-in, which scans a projection first above 50K vectors):

* learn throughput: `learn_many` over `--facts` synthetic facts in chunks of `--batch`
  (embedding batched 100 texts per call, D1 inserts in batches of 50 statements, vector
  upserts of ≤ 1000), reported as facts/s overall and the share spent in the embedder;
* recall latency, p50 / p99 over `--queries` queries (after 20 untimed warm-up calls):
  - with the embedding call: `recall(query, top_k=5)` end to end — embed the query, the
    three channels (vector, keyword BM25F, exact match), fusion and scoring (the recall
    statistics and `memory_retrieved` event are written after the response, below);
  - without it: the same call with a precomputed `query_vector`;
  - the query embedding alone, for reference;
  - the floor, in the same run over the same data: a bare FTS5 query (top 100 by bm25() in
    an in-memory table of the same texts) and a bare numpy scan (one matrix-vector product
    over the same vectors, top 100), and recall's overhead over it as a ratio;
  - how much of the vector channel's top 100 is in the exact top 100.
The recall statistics and `memory_retrieved` event are written after the response
(`waitUntil`); the benchmark drains them between calls, outside the timed window.

Facts are generated from a fixed seed: ~5,000 contacts with 20 facts each on average
(subject `contact:<id>`, one of 24 predicates, a sentence of content such as "Priya
(CFO at Initech) asked about SSO support in May (case 812)"). Queries mix natural-language
questions about a predicate and an object, questions naming a contact by subject, and
role + object questions. The keyword channel's cost grows with the number of facts that
contain the query's rarer words (bounded by `POSTINGS_BUDGET`), so the words' document
frequencies matter: here a predicate phrase is in ~1/24 of the facts, an object
in ~1/20, a first name in ~1/20, a role or company in ~1/10.
A measurement script, not a test: the numbers depend on the machine. `--embedder
hashing` swaps the model for the tests' hashing embedder to time the storage path alone.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from agent_memory.memory import Memory  # noqa: E402
from agent_memory.retrieval import RerankConfig, RetrievalConfig  # noqa: E402
from agent_memory.tiers.semantic.memory import SemanticMemory  # noqa: E402
from agent_memory.tiers.semantic.models import FactInput  # noqa: E402
from agent_memory.tiers.semantic.recall import EmbedderReranker  # noqa: E402
from bindings.ports.embedder import Embedder, EmbeddingConfig  # noqa: E402
from bindings.ports.reranker import Reranker  # noqa: E402
from bindings.ports.vectorize import VectorIndex  # noqa: E402
from local_runtime.runtime import LocalRuntime  # noqa: E402

TENANT = "acme"
FIRST = [
    "Dana",
    "Lee",
    "Sam",
    "Priya",
    "Jonas",
    "Mei",
    "Omar",
    "Lucia",
    "Ken",
    "Ava",
    "Noor",
    "Felix",
    "Ines",
    "Tom",
    "Zara",
    "Ravi",
    "Elena",
    "Hugo",
    "Yuki",
    "Ben",
]
ROLES = [
    "VP Sales",
    "CFO",
    "Head of Operations",
    "CTO",
    "Procurement Lead",
    "Engineering Manager",
    "Marketing Director",
    "COO",
    "IT Director",
    "Founder",
]
COMPANIES = [
    "Acme Freight",
    "Globex Retail",
    "Initech",
    "Umbrella Health",
    "Stark Logistics",
    "Wayne Foods",
    "Hooli Cloud",
    "Vandelay Imports",
    "Soylent Labs",
    "Tyrell Energy",
]
PREDICATES: list[tuple[str, str]] = [
    ("responded_positively_to", "responded positively to"),
    ("ignored", "ignored"),
    ("asked_about", "asked about"),
    ("prefers", "prefers"),
    ("objected_to", "objected to"),
    ("booked_demo_after", "booked a demo after"),
    ("forwarded", "forwarded"),
    ("unsubscribed_after", "unsubscribed after"),
    ("requested", "requested"),
    ("compared_us_with", "compared us with"),
    ("mentioned", "mentioned"),
    ("complained_about", "complained about"),
    ("praised", "praised"),
    ("delayed_because_of", "delayed the deal because of"),
    ("needs", "needs"),
    ("uses", "uses"),
    ("evaluates", "is evaluating"),
    ("reports_to", "reports to"),
    ("budget_is", "has a budget of"),
    ("timeline_is", "plans to decide by"),
    ("replied_to", "replied to"),
    ("shared", "shared"),
    ("declined", "declined"),
    ("invited_us_to", "invited us to"),
]
OBJECTS = [
    "direct ROI framing",
    "the social proof email",
    "a case study from logistics",
    "pricing in euros",
    "a security questionnaire",
    "the one-page ROI calculator",
    "short messages on Tuesday mornings",
    "a competitor's free tier",
    "SSO support",
    "the quarterly budget review",
    "a reference customer in retail",
    "the onboarding timeline",
    "an annual contract discount",
    "the API rate limits",
    "a pilot with ten seats",
    "the data residency terms",
    "a follow-up next quarter",
    "the product roadmap",
    "a webinar invitation",
    "the integration with Salesforce",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


class EveryHead(RerankConfig):
    """The reranking stage for every head, whatever its memories' length."""

    def applies(self, tenant_id: str, texts: Sequence[str] = ("",)) -> bool:
        return self.depth > 1


class TimedReranker:
    """A reranker that keeps how long its last call took."""

    def __init__(self, inner: Reranker) -> None:
        self._inner = inner
        self.last = 0.0

    @property
    def model(self) -> str:
        return self._inner.model

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        started = time.perf_counter()
        try:
            return await self._inner.rerank(query, texts)
        finally:
            self.last = time.perf_counter() - started


def synthetic_facts(n: int, seed: int = 7) -> list[FactInput]:
    rng = np.random.default_rng(seed)
    contacts = max(1, n // 20)
    facts: list[FactInput] = []
    for i in range(n):
        contact = int(rng.integers(contacts))
        key, phrase = PREDICATES[int(rng.integers(len(PREDICATES)))]
        obj = OBJECTS[int(rng.integers(len(OBJECTS)))]
        name = FIRST[contact % len(FIRST)]
        role = ROLES[(contact // 3) % len(ROLES)]
        company = COMPANIES[(contact // 7) % len(COMPANIES)]
        month = MONTHS[int(rng.integers(12))]
        facts.append(
            FactInput(
                content=f"{name} ({role} at {company}) {phrase} {obj} in {month} (case {i})",
                subject=f"contact:{contact}",
                predicate=key,
                object=obj.replace(" ", "_")[:1024],
                confidence=round(float(rng.uniform(0.4, 0.95)), 2),
                source="bench",
            )
        )
    return facts


def synthetic_queries(n: int, contacts: int, seed: int = 11) -> list[str]:
    rng = np.random.default_rng(seed)
    queries: list[str] = []
    for i in range(n):
        kind = i % 3
        obj = OBJECTS[int(rng.integers(len(OBJECTS)))]
        if kind == 0:
            phrase = PREDICATES[int(rng.integers(len(PREDICATES)))][1]
            queries.append(f"who {phrase} {obj}?")
        elif kind == 1:
            queries.append(f"what do we know about contact:{int(rng.integers(contacts))}?")
        else:
            role = ROLES[int(rng.integers(len(ROLES)))]
            queries.append(f"which {role} cares about {obj}")
    return queries


class TimedEmbedder:
    """Wraps an embedder and adds up the time spent in it; keeps what it returned while
    `keep` is set (the floor's numpy scan runs over the very same vectors)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.keep = False
        self.kept: list[npt.NDArray[np.float32]] = []

    @property
    def config(self) -> EmbeddingConfig:
        return self.inner.config

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        started = time.perf_counter()
        try:
            matrix = await self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started
        if self.keep:
            self.kept.append(np.asarray(matrix, dtype=np.float32))
        return matrix


def fts5_floor(contents: Sequence[str], queries: Sequence[str]) -> list[float]:
    """Seconds per bare FTS5 query (top 100 by bm25(), OR of the query's words) over the same
    texts in an in-memory SQLite table — no tenant, no join, no fusion: the keyword floor."""
    import sqlite3

    from agent_memory.retrieval import content_terms, words

    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(content, tokenize = 'porter unicode61')")
    con.executemany("INSERT INTO t (content) VALUES (?)", ((c,) for c in contents))
    con.commit()
    seconds: list[float] = []
    for query in queries:
        # A MATCH expression that is never a syntax error: each word an FTS5 string literal.
        terms = content_terms(query) or list(dict.fromkeys(words(query)))
        expression = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms[:64]) or '""'
        started = time.perf_counter()
        con.execute(
            "SELECT rowid, bm25(t) FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 100",
            (expression,),
        ).fetchall()
        seconds.append(time.perf_counter() - started)
    con.close()
    return seconds


def unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """`matrix` with every row scaled to unit length (made once: 1.5 GB at 1M vectors)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: npt.NDArray[np.float32] = (matrix / np.maximum(norms, 1e-12)).astype(np.float32)
    return unit


def numpy_floor(unit: npt.NDArray[np.float32], vectors: npt.NDArray[np.float32]) -> list[float]:
    """Seconds per bare cosine scan (one matrix-vector product over the same unit vectors,
    top 100 by argpartition): the vector floor."""
    seconds: list[float] = []
    for vector in vectors:
        started = time.perf_counter()
        scores = unit @ vector.astype(np.float32)
        top = np.argpartition(-scores, min(100, len(scores) - 1))[:100]
        top[np.argsort(-scores[top])]
        seconds.append(time.perf_counter() - started)
    return seconds


async def exact_top_share(
    index: VectorIndex,
    namespace: str,
    unit: npt.NDArray[np.float32],
    queries: npt.NDArray[np.float32],
) -> float:
    """How much of the index's top 100 is in the exact top 100 (a result counts when its
    exact cosine reaches the exact 100th best, so ties count): 1.0 = exact. Above 50K
    vectors the local index scans a projection first (`vectorize.projection`)."""
    shares: list[float] = []
    for vector in queries:
        q = vector / max(float(np.linalg.norm(vector)), 1e-12)
        exact = unit @ q
        kth = float(np.partition(exact, len(exact) - 100)[len(exact) - 100])
        found = await index.query(
            q.tolist(), top_k=100, namespace=namespace, return_metadata="none"
        )
        # the scores returned are exact cosines (float32), compared with a float32 margin
        shares.append(sum(m.score >= kth - 1e-5 for m in found.matches) / 100)
    return float(np.mean(shares))


def percentile(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def summary(label: str, seconds: Sequence[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in seconds]
    row = {
        "what": label,
        "n": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }
    print(
        f"{label:<42} n={row['n']:<5} p50 {row['p50_ms']:>8.2f} ms   "
        f"p99 {row['p99_ms']:>8.2f} ms   mean {row['mean_ms']:>8.2f} ms"
    )
    return row


async def main(args: argparse.Namespace) -> dict[str, Any]:
    if args.embedder == "hashing":
        from tests.fakes.embedder import HashingEmbedder

        inner: Embedder = HashingEmbedder()
    else:
        from local_runtime.embedder import LocalMiniLMEmbedder

        inner = LocalMiniLMEmbedder()
        await inner.embed(["warm up the model"])
    embedder = TimedEmbedder(inner)
    root = Path(args.state) if args.state else Path(tempfile.mkdtemp(prefix="semantic-lat-"))
    runtime = LocalRuntime.open(root, embedder=embedder)
    await runtime.migrate()
    db, index = runtime.shard_db("primary"), runtime.shard_vectors("primary")
    bindings = replace(runtime.bindings(), db=db, vectors=index)
    memory = (await Memory.open(bindings, TENANT)).semantic(agent_type="bench")

    facts = synthetic_facts(args.facts)
    reuse = args.reuse and await memory.count() == len(facts)
    print(
        f"{'reusing' if reuse else 'learning'} {len(facts)} facts in tenant {TENANT!r} "
        f"(embedder {inner.config.key}, state {root})",
        flush=True,
    )
    embedder.seconds = 0.0
    embedder.keep = True
    started = time.perf_counter()
    if reuse:  # the floor's numpy scan needs the same vectors (facts have no session)
        for start in range(0, len(facts), 1000):
            await embedder.embed([f.content for f in facts[start : start + 1000]])
    for start in range(0, len(facts) if not reuse else 0, args.batch):
        results = await memory.learn_many(facts[start : start + args.batch])
        if any(r.status != "active" for r in results):
            raise SystemExit("a fact was left pending")
        done = start + len(results)
        if done % (args.batch * 10) == 0 or done == len(facts):
            rate = done / (time.perf_counter() - started)
            print(f"  {done:>7} facts, {rate:.0f} facts/s", flush=True)
    learn_s = time.perf_counter() - started
    embedder.keep = False
    await runtime.background.drain()
    embed_share = embedder.seconds / learn_s
    learned = await memory.count()
    throughput = {
        "facts": learned,
        "seconds": round(learn_s, 1),
        "facts_per_s": round(learned / learn_s, 1),
        "embedding_share": round(embed_share, 3),
        "facts_per_s_excluding_embedding": round(
            learned / max(learn_s - embedder.seconds, 1e-9), 1
        ),
    }
    if reuse:
        throughput = {"facts": learned, "reused": True}
    else:
        print(
            f"learn_many: {throughput['facts_per_s']} facts/s "
            f"({embed_share:.0%} of the time in the embedder; storage alone "
            f"{throughput['facts_per_s_excluding_embedding']} facts/s)"
        )

    # Only the texts are kept for the floor: 100K live input models would make the cyclic
    # garbage collector's full passes, triggered by recall's allocations, part of the
    # timings (measured: p50 +8 ms), which a server holding no such list does not pay.
    contents = [f.content for f in facts]
    del facts
    gc.collect()
    queries = synthetic_queries(args.queries, max(1, args.facts // 20))
    vectors = await inner.embed(queries)
    for query in queries[:20]:  # warm-up: page cache, numpy, SQLite statement cache
        await memory.recall(query, 5)
        await runtime.background.drain()
    # The reranking stage timed on its own: the local reranker, embedder rescoring of the best
    # `--rerank-depth` passages (on Cloudflare with "scorer": "bound", a Workers AI call). By
    # default it runs only for a head holding a multi-sentence memory, and these facts are one
    # sentence each, so here it is made to run for every query: its cost when it applies.
    reranker = TimedReranker(EmbedderReranker(inner))
    reranking = SemanticMemory(
        TENANT,
        db=db,
        vectors=index,
        embedder=embedder,
        clock=runtime.clock,
        config=RetrievalConfig(rerank=EveryHead(depth=args.rerank_depth, scorer="bound")),
        agent_type="bench",
        reranker=reranker,
    )
    with_embedding: list[float] = []
    without_embedding: list[float] = []
    embed_only: list[float] = []
    with_rerank: list[float] = []
    rerank_only: list[float] = []
    returned = 0
    for query, vector in zip(queries, vectors, strict=True):
        # The recall statistics and the event are written after the response (waitUntil):
        # drained between calls, outside the timed window, as a server would after replying.
        t0 = time.perf_counter()
        result = await memory.recall(query, 5)
        t1 = time.perf_counter()
        await runtime.background.drain()
        t2 = time.perf_counter()
        await memory.recall(query, 5, query_vector=vector.tolist())
        t3 = time.perf_counter()
        await runtime.background.drain()
        t4 = time.perf_counter()
        await inner.embed([query])
        t5 = time.perf_counter()
        await reranking.recall(query, 5, query_vector=vector.tolist())
        t6 = time.perf_counter()
        await runtime.background.drain()
        with_embedding.append(t1 - t0)
        without_embedding.append(t3 - t2)
        embed_only.append(t5 - t4)
        with_rerank.append(t6 - t5)
        rerank_only.append(reranker.last)
        returned += len(result.results)
    print(
        f"recall(top_k=5) over {learned} facts in one tenant "
        f"({returned / len(queries):.1f} results per query):"
    )
    rows = [
        summary("recall, with the query embedding", with_embedding),
        summary("recall, without (precomputed vector)", without_embedding),
        summary("query embedding alone", embed_only),
        summary(
            f"recall with the reranker (depth {args.rerank_depth}, no query embedding)", with_rerank
        ),
        summary("reranker call alone (local: embedder rescoring)", rerank_only),
    ]
    unit = unit_rows(np.vstack(embedder.kept))
    embedder.kept = []
    query_matrix = np.asarray(vectors, dtype=np.float32)
    fts = fts5_floor(contents, queries)
    scan = numpy_floor(unit, query_matrix)
    floor = [a + b for a, b in zip(fts, scan, strict=True)]
    vector_recall = await exact_top_share(index, memory.namespace, unit, query_matrix)
    print(
        f"vector channel: share of its top 100 within the exact top 100 (by exact score): "
        f"{vector_recall:.4f}"
    )
    rows += [
        summary("floor: bare FTS5 query (same texts)", fts),
        summary("floor: bare numpy scan (same vectors)", scan),
        summary("floor: FTS5 + numpy", floor),
    ]
    overhead = {
        q: round(percentile(without_embedding, q) / max(percentile(floor, q), 1e-9), 2)
        for q in (50, 99)
    }
    print(
        f"recall without the embedding / floor: p50 x{overhead[50]}, p99 x{overhead[99]} "
        f"(the query embedding alone: p50 {rows[2]['p50_ms']} ms)"
    )
    await runtime.close()
    if not args.state:
        shutil.rmtree(root, ignore_errors=True)
    report = {
        "learn": throughput,
        "recall": rows,
        "overhead_over_floor": overhead,
        "vector_top100_exact_share": round(vector_recall, 4),
        "embedder": inner.config.key,
    }
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rerank-depth", type=int, default=20, help="reranked candidates")
    parser.add_argument("--batch", type=int, default=1000, help="facts per learn_many call")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--state", help="state folder (default: a new temporary folder)")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="with --state: measure the facts already learned there (same --facts) again",
    )
    asyncio.run(main(parser.parse_args()))
