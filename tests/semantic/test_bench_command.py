"""`agent-memory bench recall`: metrics as score.py defines them, and the output contract
(a table, then one JSON object as the last line) on a tiny file of the bench format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from local_runtime.cli import main
from local_runtime.commands.bench import BM25Okapi, newest_first, score_ranking, tokenize

TINY_BENCH: dict[str, Any] = {
    "format": "memory-retrieval-bench/v1",
    "name": "tiny",
    "split": "test",
    "category_names": {"1": "multi-hop", "4": "single-hop"},
    "conversations": [
        {
            "id": "conv-a",
            "speakers": ["Ann", "Bob"],
            "n_sessions": 1,
            "memories": [
                {
                    "id": "D1:1",
                    "text": "Ann: I adopted a grey cat named Pixel last week.",
                    "timestamp": "2023-05-08T13:56:00",
                    "session": 1,
                },
                {
                    "id": "D1:2",
                    "text": "Bob: Nice! I am training for the Berlin marathon.",
                    "timestamp": "2023-05-08T13:56:00",
                    "session": 1,
                },
                {
                    "id": "D1:3",
                    "text": "Ann: Thanks!",
                    "timestamp": "2023-05-08T13:56:00",
                    "session": 1,
                },
                {
                    "id": "D1:4",
                    "text": "Ann: Thanks!",
                    "timestamp": "2023-05-08T13:56:00",
                    "session": 1,
                },
            ],
        },
        {
            "id": "conv-b",
            "speakers": ["Cy", "Di"],
            "n_sessions": 1,
            "memories": [
                {
                    "id": "D1:1",
                    "text": "Cy: My sister moved to Lisbon for a design job.",
                    "timestamp": "2023-06-01T10:00:00",
                    "session": 1,
                },
                {
                    "id": "D1:2",
                    "text": "Di: I started learning the cello in March.",
                    "timestamp": "2023-06-01T10:00:00",
                    "session": 1,
                },
            ],
        },
    ],
    "queries": [
        {
            "qid": "a-q0",
            "conversation": "conv-a",
            "question": "What is the name of Ann's cat?",
            "category": 4,
            "category_name": "single-hop",
            "evidence": ["D1:1"],
            "answer": "Pixel",
        },
        {
            "qid": "a-q1",
            "conversation": "conv-a",
            "question": "Which marathon is Bob training for?",
            "category": 1,
            "category_name": "multi-hop",
            "evidence": ["D1:2"],
            "answer": "Berlin",
        },
        {
            "qid": "b-q0",
            "conversation": "conv-b",
            "question": "Where did Cy's sister move?",
            "category": 4,
            "category_name": "single-hop",
            "evidence": ["D1:1"],
            "answer": "Lisbon",
        },
    ],
}


def test_score_ranking_follows_score_py() -> None:
    scores = score_ranking(["a", "b", "c", "d"], ["c", "x"], ks=(1, 3))
    assert scores["recall@1"] == 0.0 and scores["recall@3"] == 0.5
    assert scores["any-hit@3"] == 1.0 and scores["mrr"] == pytest.approx(1 / 3)
    assert score_ranking(["a"], ["z"])["mrr"] == 0.0  # never retrieved: reciprocal rank 0


def test_bm25_ranks_the_matching_document_first() -> None:
    docs = [tokenize(t) for t in ("the cat sat", "a dog ran", "cats and dogs", "the end")]
    scores = BM25Okapi(docs).get_scores(tokenize("dog"))
    assert int(scores.argmax()) == 1
    assert scores[0] == 0.0


def test_the_command_prints_the_table_and_ends_with_the_json_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_BENCH))
    assert main(["bench", "recall", "--data", str(data)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert any(line.startswith("| all | 3 | system |") for line in lines)
    assert any(line.startswith("| cats 1-4 | 3 | bm25 |") for line in lines)
    assert any(line.startswith("recall@10 margin over bm25:") for line in lines)
    assert "| slice | n | method | recall@5 | recall@10 | MRR | system margin R@10 / MRR |" in lines
    summary = json.loads(lines[-1])
    assert set(summary) == {"system", "bm25", "dense"}
    for values in summary.values():
        assert set(values) == {"recall@5", "recall@10", "mrr", "by_category"}
        # recall@10 and MRR per slice: cats 1-4 and each category present in the data.
        assert set(values["by_category"]) == {
            "cats 1-4",
            *{f"{q['category']} {q['category_name']}" for q in TINY_BENCH["queries"]},
        }
        for slice_values in values["by_category"].values():
            assert set(slice_values) == {"recall@10", "mrr"}
    # Four memories per conversation at most: every method finds every answer in its top 5.
    assert summary["system"]["recall@5"] == 1.0


def _turn(mid: str, text: str, day: str) -> dict[str, Any]:
    return {"id": mid, "text": f"user: {text}", "timestamp": f"{day}T09:00:00", "session": 1}


# LongMemEval's shape: one question per conversation, user turns, `question_type`.
TINY_LME: dict[str, Any] = {
    "format": "memory-retrieval-bench/v1",
    "name": "tiny-lme",
    "category_names": {"1": "single-session-user", "7": "knowledge-update"},
    "conversations": [
        {
            "id": "lme-car",
            "speakers": ["user"],
            "memories": [
                _turn("D1:1", "I drive a 2015 Honda Civic to work every day.", "2023-01-10"),
                _turn("D1:2", "Can you suggest a podcast about Roman history?", "2023-01-10"),
                _turn("D2:1", "I sold my Civic and now I drive a Tesla Model 3.", "2023-04-02"),
                _turn("D2:2", "What is a good recipe for banana bread?", "2023-04-02"),
            ],
        },
        {
            "id": "lme-pod",
            "speakers": ["user"],
            "memories": [
                _turn("D1:1", "Can you suggest a podcast about Roman history?", "2023-02-01"),
                _turn("D1:2", "I like baking sourdough on weekends.", "2023-02-01"),
            ],
        },
    ],
    "queries": [
        {
            "qid": "lme-car-q0",
            "conversation": "lme-car",
            "question": "What car do I drive now?",
            "category": 7,
            "category_name": "knowledge-update",
            "question_type": "knowledge-update",
            "evidence": ["D1:1", "D2:1"],
        },
        {
            "qid": "lme-pod-q0",
            "conversation": "lme-pod",
            "question": "Which podcast topic did I ask about?",
            "category": 1,
            "category_name": "single-session-user",
            "question_type": "single-session-user",
            "evidence": ["D1:1"],
        },
    ],
}


def test_newest_first_asks_whether_the_latest_evidence_outranks_every_older_one() -> None:
    order = {"D1:1": 1.0, "D2:1": 2.0, "D10:1": 2.0}
    assert newest_first(["D10:1", "x", "D2:1", "D1:1"], ["D1:1", "D2:1", "D10:1"], order)
    # Same timestamp: the higher id (by number, D10 after D2) is the newer.
    assert not newest_first(["D2:1", "D10:1", "D1:1"], ["D1:1", "D2:1", "D10:1"], order)
    assert newest_first(["D2:1"], ["D1:1", "D2:1"], order)  # an older one never retrieved
    assert not newest_first(["D1:1"], ["D1:1", "D2:1"], order)  # the newest never retrieved


def test_two_data_sets_run_side_by_side_with_one_embedding_cache_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locomo, lme = tmp_path / "tiny-locomo.json", tmp_path / "tiny-lme.json"
    locomo.write_text(json.dumps(TINY_BENCH))
    lme.write_text(json.dumps(TINY_LME))
    caches = [tmp_path / "locomo-cache.json", tmp_path / "lme-cache.json"]
    args = ["bench", "recall", "--data", str(locomo), "--data", str(lme)]
    args += ["--embedding-cache", str(caches[0]), "--embedding-cache", str(caches[1])]
    assert main(args) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    # Each data set's table, with the system's margin over each channel on every slice.
    assert any(line.startswith("| all | 3 | bm25 |") for line in lines)
    assert any(line.startswith("| 7 knowledge-update | 1 | dense |") for line in lines)
    assert sum(line.startswith("| 1 single-session-user | 1 | ") for line in lines) == 3
    assert all(line.count(" / ") == 1 for line in lines if "| bm25 |" in line)
    assert sum(line.startswith("newest first: system ") for line in lines) == 1
    assert "| all queries | tiny-locomo | tiny-lme |" in lines
    assert any(line.startswith("| margin over dense R@10 / MRR | ") for line in lines)
    summary = json.loads(lines[-1])
    assert set(summary) == {"tiny-locomo", "tiny-lme"}
    assert set(summary["tiny-locomo"]["bm25"]["by_category"]) == {
        "cats 1-4",
        "1 multi-hop",
        "4 single-hop",
    }
    # LoCoMo's "cats 1-4" means nothing for LongMemEval's question types.
    assert set(summary["tiny-lme"]["system"]["by_category"]) == {
        "1 single-session-user",
        "7 knowledge-update",
    }
    texts = [set(json.loads(cache.read_text())["vectors"]) for cache in caches]
    assert "user: I like baking sourdough on weekends." in texts[1] - texts[0]
    assert "Ann: Thanks!" in texts[0] - texts[1]


def test_an_embedding_cache_per_data_set_or_none(tmp_path: Path) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(TINY_BENCH))
    cache = tmp_path / "cache.json"
    args = ["bench", "recall", "--data", str(data), "--data", str(tmp_path / "other.json")]
    assert main([*args, "--embedding-cache", str(cache)]) == 2
    assert main(["bench", "recall", "--data", str(data), "--data", str(data)]) == 2
    assert not cache.exists()
