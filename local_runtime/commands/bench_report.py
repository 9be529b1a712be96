"""The recall benchmark's report: mean metrics per category and system, the table it prints
and the last-line JSON (`agent-memory bench recall`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

METRICS = ("recall@5", "recall@10", "mrr")


def mean_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    return {m: (float(np.mean([r[m] for r in rows])) if rows else float("nan")) for m in METRICS}


def summarize(rows: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{slice: {method: {n, recall@5, recall@10, mrr}}} for all, cats 1-4 and each category."""
    any_rows = next(iter(rows.values()))
    categories = sorted({(r["category"], r["category_name"]) for r in any_rows})
    slices: list[tuple[str, set[Any] | None]] = [
        ("all", None),
        ("cats 1-4", {cat for cat, _ in categories if cat != 5}),
    ]
    slices += [(f"{cat} {name}", {cat}) for cat, name in categories]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label, keep in slices:
        out[label] = {}
        for method, method_rows in rows.items():
            chosen = [r for r in method_rows if keep is None or r["category"] in keep]
            out[label][method] = {"n": len(chosen), **mean_metrics(chosen)}
    return out


def format_report(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = ["| slice | n | method | recall@5 | recall@10 | MRR |", "|---|---|---|---|---|---|"]
    for label, methods in summary.items():
        for method, values in methods.items():
            lines.append(
                f"| {label} | {values['n']} | {method} | {values['recall@5']:.3f} | "
                f"{values['recall@10']:.3f} | {values['mrr']:.3f} |"
            )
    overall = summary["all"]
    system = overall["system"]["recall@10"]
    for baseline in ("bm25", "dense"):
        other = overall[baseline]["recall@10"]
        lines.append(
            f"recall@10 margin over {baseline}: {system - other:+.3f} "
            f"({system:.3f} vs {other:.3f}; {100 * (system - other) / other:+.1f}% relative)"
        )
    return "\n".join(lines)


def final_json(summary: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The last line: per method, recall@5 / recall@10 / MRR over all queries, and recall@10
    and MRR per slice (cats 1-4 and each category)."""
    out: dict[str, Any] = {}
    for method, values in summary["all"].items():
        row: dict[str, Any] = {m: round(values[m], 4) for m in METRICS}
        row["by_category"] = {
            label: {m: round(methods[method][m], 4) for m in ("recall@10", "mrr")}
            for label, methods in summary.items()
            if label != "all"
        }
        out[method] = row
    return out
