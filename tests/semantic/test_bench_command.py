"""`agent-memory bench recall`: metrics as score.py defines them, and the output contract
(a table, then one JSON object as the last line) on a tiny file of the bench format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from local_runtime.cli import main
from local_runtime.commands.bench import BM25Okapi, score_ranking, tokenize

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


def test_bm25_port_ranks_the_matching_document_first() -> None:
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
