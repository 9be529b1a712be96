"""The recall benchmark's report: mean metrics per category and system, the table it prints
(with the system's margin over each channel), the side-by-side table of several data sets and
the last-line JSON (`agent-memory bench recall`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

METRICS = ("recall@5", "recall@10", "mrr")
# LoCoMo's categories: only there is "cats 1-4" (all but adversarial) a slice people report.
LOCOMO_CATEGORIES = {"multi-hop", "temporal", "open-domain", "single-hop", "adversarial"}


def mean_metrics(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    return {m: (float(np.mean([r[m] for r in rows])) if rows else float("nan")) for m in METRICS}


def summarize(rows: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """{slice: {method: {n, recall@5, recall@10, mrr}}} for all, cats 1-4 (LoCoMo's
    categories only) and each category (LongMemEval's question types)."""
    any_rows = next(iter(rows.values()))
    categories = sorted({(r["category"], r["category_name"]) for r in any_rows})
    slices: list[tuple[str, set[Any] | None]] = [("all", None)]
    if {name for _, name in categories} <= LOCOMO_CATEGORIES:
        slices.append(("cats 1-4", {cat for cat, _ in categories if cat != 5}))
    slices += [(f"{cat} {name}", {cat}) for cat, name in categories]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label, keep in slices:
        out[label] = {}
        for method, method_rows in rows.items():
            chosen = [r for r in method_rows if keep is None or r["category"] in keep]
            out[label][method] = {"n": len(chosen), **mean_metrics(chosen)}
    return out


def margin(methods: dict[str, dict[str, Any]], channel: str) -> str:
    """The system's absolute margin over one channel: "recall@10 / MRR"."""
    system, other = methods["system"], methods[channel]
    return " / ".join(f"{system[m] - other[m]:+.3f}" for m in ("recall@10", "mrr"))


def format_report(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    lines = [
        "| slice | n | method | recall@5 | recall@10 | MRR | system margin R@10 / MRR |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, methods in summary.items():
        for method, values in methods.items():
            lines.append(
                f"| {label} | {values['n']} | {method} | {values['recall@5']:.3f} | "
                f"{values['recall@10']:.3f} | {values['mrr']:.3f} | "
                f"{margin(methods, method) if method != 'system' else ''} |"
            )
    overall = summary["all"]
    system = overall["system"]["recall@10"]
    for baseline in ("bm25", "dense"):
        other = overall[baseline]["recall@10"]
        lines.append(
            f"recall@10 margin over {baseline}: {system - other:+.3f} "
            f"({system:.3f} vs {other:.3f}; {100 * (system - other) / other:+.1f}% relative); "
            f"MRR {overall['system']['mrr'] - overall[baseline]['mrr']:+.3f}"
        )
    return "\n".join(lines)


def format_side_by_side(summaries: dict[str, dict[str, dict[str, dict[str, Any]]]]) -> str:
    """One column per data set: queries, the system's figures, its best single channel (by
    recall@10, then MRR) and its margin over each channel, all queries."""
    overall = [summary["all"] for summary in summaries.values()]
    channels = [method for method in overall[0] if method != "system"]

    def best(methods: dict[str, dict[str, Any]]) -> str:
        name = max(channels, key=lambda c: (methods[c]["recall@10"], methods[c]["mrr"]))
        return f"{name} " + " / ".join(f"{methods[name][m]:.3f}" for m in METRICS)

    rows = {
        "queries": [str(methods["system"]["n"]) for methods in overall],
        "system R@5 / R@10 / MRR": [
            " / ".join(f"{methods['system'][m]:.3f}" for m in METRICS) for methods in overall
        ],
        "best channel R@5 / R@10 / MRR": [best(methods) for methods in overall],
        **{
            f"margin over {c} R@10 / MRR": [margin(methods, c) for methods in overall]
            for c in channels
        },
    }
    lines = ["| all queries | " + " | ".join(summaries) + " |", "|---" * (len(overall) + 1) + "|"]
    return "\n".join([*lines, *(f"| {k} | " + " | ".join(v) + " |" for k, v in rows.items())])


def newest_first_line(rows: dict[str, list[dict[str, Any]]]) -> str | None:
    """Knowledge-update questions with >= 2 evidence ids: how often each method ranks the
    newest evidence memory above every older one (None when the data has no such question)."""
    flags = {m: [r["newest_first"] for r in rs if "newest_first" in r] for m, rs in rows.items()}
    if not flags["system"]:
        return None
    counts = (f"{m} {sum(v)}/{len(v)}" for m, v in flags.items())
    return f"newest first: {', '.join(counts)} (knowledge-update, >= 2 evidence ids)"


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
