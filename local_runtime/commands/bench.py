"""`agent-memory bench recall --data FILE [--data FILE ...]`: recall quality of semantic
memory vs BM25 and dense baselines on `memory-retrieval-bench/v1` data sets (method, options and
results: docs/semantic-memory.md, "Recall quality").

The system's ranking is `SemanticMemory.rank`'s candidate list (an evidence id it never
retrieves counts as rank ∞, so its MRR is a lower bound). Embeddings are computed once per
distinct text and shared by the system and the dense baseline. The last line is one JSON object
`{"system": ..., "bm25": ..., "dense": ...}`, keyed by data set when there are several.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from rank_bm25 import BM25Okapi

from bindings.ports.embedder import Embedder, EmbeddingConfig
from local_runtime.commands.bench_report import (
    final_json,
    format_report,
    format_side_by_side,
    newest_first_line,
    summarize,
)

TOKEN_RE = re.compile(r"[a-z0-9]+")
KS = (5, 10)


# ----------------------------------------------------------------------------- metrics


def score_ranking(
    ranking: Sequence[str], evidence: Sequence[str], ks: Sequence[int] = KS
) -> dict[str, float]:
    """score.py's `score_ranking`: recall@k, any-hit@k and MRR of one ranking."""
    ev = set(evidence)
    pos: dict[str, int] = {}
    for rank, mid in enumerate(ranking):
        pos.setdefault(mid, rank)
    out: dict[str, float] = {}
    for k in ks:
        hit = len(ev & set(ranking[:k]))
        out[f"recall@{k}"] = hit / len(ev)
        out[f"any-hit@{k}"] = 1.0 if hit else 0.0
    ranks = [pos[e] for e in ev if e in pos]
    out["mrr"] = 1.0 / (min(ranks) + 1) if ranks else 0.0
    return out


def newest_first(ranking: Sequence[str], evidence: Sequence[str], stamps: dict[str, float]) -> bool:
    """Whether the newest evidence id (latest timestamp in `stamps`, then highest id by its
    numbers: D10:1 after D9:3) ranks above every older one; an id the ranking lacks ranks
    last, and the newest missing is a miss."""
    pos: dict[str, float] = {}
    for rank, mid in enumerate(ranking):
        pos.setdefault(mid, rank)
    newest = max(evidence, key=lambda e: (stamps[e], [int(n) for n in re.findall(r"\d+", e)]))
    return newest in pos and all(
        pos[newest] < pos.get(e, math.inf) for e in evidence if e != newest
    )


def tokenize(text: str) -> list[str]:
    return TOKEN_RE.findall(text.lower())


class MemoEmbedder:
    """Wraps an embedder; each distinct text is embedded once (shared by system and dense).
    With `path`, the vectors are also kept on disk between runs (`save`), keyed by the
    embedding config and the text, so a tuning loop does not re-embed."""

    def __init__(self, inner: Embedder, path: Path | None = None) -> None:
        self.inner = inner
        self.cache: dict[str, npt.NDArray[np.float32]] = {}
        self.path = path
        if path is not None and path.exists():
            stored = json.loads(path.read_text())
            if stored.get("config") == inner.config.key:
                for text, row in stored["vectors"].items():
                    self.cache[text] = np.asarray(row, dtype=np.float32)

    def save(self) -> None:
        if self.path is not None:
            vectors = {text: row.tolist() for text, row in self.cache.items()}
            self.path.write_text(json.dumps({"config": self.inner.config.key, "vectors": vectors}))

    @property
    def config(self) -> EmbeddingConfig:
        return self.inner.config

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            matrix = await self.inner.embed(missing)
            for text, row in zip(missing, matrix, strict=True):
                self.cache[text] = np.asarray(row, dtype=np.float32)
        dims = self.config.dimensions
        if not texts:
            return np.zeros((0, dims), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts]).astype(np.float32)


# ----------------------------------------------------------------------------- runs


def _tenant_for(conversation_id: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9_-]+", "-", conversation_id.lower()).strip("-_") or "conv"
    tenant = ("bench-" + base)[:63]
    n = 2
    while tenant in used:
        suffix = f"-{n}"
        tenant = ("bench-" + base)[: 63 - len(suffix)] + suffix
        n += 1
    used.add(tenant)
    return tenant


def _subject(text: str, speakers: Sequence[str], fallback: str, mode: str) -> str:
    if mode == "speaker":
        head, sep, _ = text.partition(": ")
        if sep and head in speakers:
            return head
    return fallback[:256]


def _epoch(timestamp: Any) -> float | None:
    """An ISO-8601 time, or LongMemEval's `question_date` ("2023/05/30 (Tue) 23:42"), in
    epoch seconds (naive: UTC); None when there is none."""
    if not isinstance(timestamp, str):
        return None
    try:
        parsed = datetime.fromisoformat(
            re.sub(r"^(\d+)/(\d+)/(\d+) \(\w+\) ", r"\1-\2-\3 ", timestamp)
        )
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


async def run_recall_bench(
    bench: dict[str, Any],
    embedder: Embedder,
    state_root: Path,
    *,
    subject_mode: str = "speaker",
    fusion: str | None = None,
    config_json: str = "",
    conversations: int | None = None,
    embedding_cache: Path | None = None,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Run the system and both baselines; returns per-query rows and timings."""
    from agent_memory.retrieval import RetrievalConfig
    from agent_memory.tiers.semantic.memory import SemanticMemory
    from agent_memory.tiers.semantic.models import FactInput, RecallFilters
    from local_runtime.runtime import LocalRuntime

    memo = MemoEmbedder(embedder, embedding_cache)
    runtime = LocalRuntime.open(state_root, embedder=memo)
    await runtime.migrate()
    config = RetrievalConfig.from_json(config_json)
    if fusion is not None:
        config = config.model_copy(
            update={"fusion": config.fusion.model_copy(update={"method": fusion})}
        )
    queries_by_conv: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for query in bench["queries"]:
        queries_by_conv[query["conversation"]].append(query)
    rows: dict[str, list[dict[str, Any]]] = {"system": [], "bm25": [], "dense": []}
    timing = {"ingest_s": 0.0, "facts": 0, "query_s": 0.0, "queries": 0}
    used: set[str] = set()
    try:
        for conv in bench["conversations"][:conversations]:
            memories = conv["memories"]
            queries = queries_by_conv.get(conv["id"], [])
            tenant = _tenant_for(conv["id"], used)
            memory = SemanticMemory(
                tenant,
                db=runtime.db,
                vectors=runtime.vectors,
                embedder=runtime.embedder,
                clock=runtime.clock,
                config=config,
                agent_type="bench",
                background=runtime.background,
                kv=runtime.kv,
            )
            facts = [
                FactInput(
                    content=m["text"],
                    subject=_subject(m["text"], conv.get("speakers", []), conv["id"], subject_mode),
                    predicate="said",
                    source="bench",
                    valid_from=_epoch(m.get("timestamp")),
                    # One session per session of the conversation (contextual indexing).
                    session=f"{conv['id']}:{m['session']}" if "session" in m else None,
                    metadata={"memory_id": m["id"]},
                )
                for m in memories
            ]
            started = time.perf_counter()
            learned = await memory.learn_many(facts)
            await runtime.background.drain()  # context that arrives later, as after a response
            timing["ingest_s"] += time.perf_counter() - started
            timing["facts"] += len(facts)
            pending = [r for r in learned if r.status != "active"]
            if pending:
                raise RuntimeError(f"{len(pending)} facts were left pending: {pending[0].error}")
            by_fact: dict[str, list[str]] = defaultdict(list)
            for m, result in zip(memories, learned, strict=True):
                by_fact[result.fact_id].append(m["id"])
            ids = [m["id"] for m in memories]
            stamps = {m["id"]: _epoch(m.get("timestamp")) or 0.0 for m in memories}
            bm25 = BM25Okapi([tokenize(m["text"]) for m in memories])
            matrix = await memo.embed([m["text"] for m in memories])
            limit = min(1000, max(1, len(memories)))
            # The questions are asked when the data says (LongMemEval's `question_date`), else
            # after the conversation: that is their "now" for the dates they name ("last
            # year", "two weeks ago").
            dates = [t for t in (_epoch(m.get("timestamp")) for m in memories) if t is not None]
            for query in queries:
                question = query["question"]
                now = _epoch(query.get("question_date")) or max(dates, default=None)
                asked = None if now is None else RecallFilters(reference_date=now)
                started = time.perf_counter()
                ranked = await memory.rank(question, limit, asked)
                timing["query_s"] += time.perf_counter() - started
                timing["queries"] += 1
                system = [mid for r in ranked.results for mid in by_fact[r.fact.fact_id]]
                lexical = np.argsort(-bm25.get_scores(tokenize(question)), kind="stable")
                qvec = (await memo.embed([question]))[0]
                dense = np.argsort(-(matrix @ qvec), kind="stable")
                for name, ranking in (
                    ("system", system),
                    ("bm25", [ids[i] for i in lexical]),
                    ("dense", [ids[i] for i in dense]),
                ):
                    row: dict[str, Any] = dict(score_ranking(ranking, query["evidence"]))
                    row.update(
                        category=query["category"],
                        category_name=query.get("category_name", str(query["category"])),
                    )
                    evidence = query["evidence"]
                    if query.get("question_type") == "knowledge-update" and len(set(evidence)) > 1:
                        row["newest_first"] = newest_first(ranking, evidence, stamps)
                    rows[name].append(row)
            progress(f"{conv['id']}: {len(memories)} memories, {len(queries)} queries")
    finally:
        memo.save()
        await runtime.close()
    return {"rows": rows, "timing": timing}


def cmd_bench_recall(args: argparse.Namespace) -> int:
    paths = [Path(data) for data in args.data]
    names = [path.stem for path in paths]
    caches: list[Path | None] = [Path(cache) for cache in args.embedding_cache or []]
    if len(set(names)) < len(names) or len(caches) not in (0, len(paths)):
        print(
            "error: each --data needs its own file name, and --embedding-cache is given once "
            "per --data (in the same order) or not at all",
            file=sys.stderr,
        )
        return 2
    from local_runtime.embedder import LocalMiniLMEmbedder

    embedder: Embedder = LocalMiniLMEmbedder()
    root = Path(args.state) if args.state else Path(tempfile.mkdtemp(prefix="bench-recall-"))

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    summaries: dict[str, dict[str, Any]] = {}
    try:
        for path, name, cache in zip(paths, names, caches or [None] * len(paths), strict=True):
            started = time.perf_counter()
            result = asyncio.run(
                run_recall_bench(
                    json.loads(path.read_text()),
                    embedder,
                    root / name if len(paths) > 1 else root,
                    subject_mode=args.subject,
                    fusion=args.fusion,
                    config_json=args.retrieval_config,
                    conversations=args.conversations,
                    embedding_cache=cache,
                    progress=progress,
                )
            )
            summaries[name] = summary = summarize(result["rows"])
            timing = result["timing"]
            print(
                f"data: {path} ({timing['facts']} memories, {timing['queries']} queries); "
                f"embedder: {embedder.config.key}; subject: {args.subject}; "
                f"fusion: {args.fusion or 'default'}"
            )
            print(format_report(summary))
            if (line := newest_first_line(result["rows"])) is not None:
                print(line)
            print(
                f"system ingest: {timing['facts'] / max(timing['ingest_s'], 1e-9):.1f} facts/s "
                f"(learn_many, batched embedding); system recall: "
                f"{timing['queries'] / max(timing['query_s'], 1e-9):.1f} queries/s; "
                f"total {time.perf_counter() - started:.1f}s\n"
            )
    finally:
        if not args.state:
            shutil.rmtree(root, ignore_errors=True)
    if len(summaries) > 1:
        print(format_side_by_side(summaries))
    final = {name: final_json(summary) for name, summary in summaries.items()}
    print(json.dumps(final if len(final) > 1 else final[names[0]], separators=(", ", ": ")))
    return 0


def register(sub: Any) -> None:
    bench = sub.add_parser("bench", help="benchmarks of the memory tiers")
    bench_sub = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCH")
    recall = bench_sub.add_parser(
        "recall", help="recall quality on a memory-retrieval-bench/v1 file vs BM25 and dense"
    )
    recall.add_argument(
        "--data",
        required=True,
        action="append",
        help="benchmark JSON (e.g. locomo-dev.json); repeat it to run several data sets side by "
        "side with one configuration",
    )
    recall.add_argument(
        "--state", help="state folder to keep (default: a temporary folder, removed after)"
    )
    recall.add_argument(
        "--subject",
        choices=("speaker", "conversation"),
        default="speaker",
        help="fact subject: the speaker named by the text (default) or the conversation id",
    )
    recall.add_argument(
        "--fusion",
        choices=("relative", "rrf"),
        default=None,
        help="override the configured channel fusion (default: the configuration's)",
    )
    recall.add_argument(
        "--retrieval-config",
        default="",
        help="MEMORY_RETRIEVAL_CONFIG JSON to run with (default: the built-in defaults)",
    )
    recall.add_argument(
        "--conversations",
        type=int,
        default=None,
        help="only the first N conversations of each data set (a faster loop; report full-set "
        "figures)",
    )
    recall.add_argument(
        "--embedding-cache",
        action="append",
        help="JSON file keeping the embeddings between runs (created if missing); once per "
        "--data, in the same order",
    )
    recall.set_defaults(func=cmd_bench_recall)
    from local_runtime.commands.bench_updates import register as register_updates

    register_updates(bench_sub)
