"""Runs' rows as one table (parquet or CSV): a row per case — its last row, as the
summary counts it — with model, benchmark, score and its components; or, with
``decisions``, a row per rubric item."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from .._io import replacing
from ..bench.results import read_rows
from ..scores.summary import last_rows

# A row's score components, each a column of the table.
COMPONENTS = (
    "matched_signed_points",
    "available_positive_points",
    "raw_score",
    "f1_weighted",
    "precision_weighted",
    "recall_weighted",
    "severe_rate",
)


def export_frame(sources: list[tuple[str, Path]], decisions: bool = False) -> pl.DataFrame:
    """One row per case (its last row, as the summary counts it) of each source, with
    model, benchmark, score and components; with ``decisions``, one per rubric item."""
    records: list[dict[str, Any]] = []
    for name, path in sources:
        last, _ = last_rows(read_rows(path))
        for row in last.values():
            base = {
                "run": name,
                "answer_model": row.get("answer_model"),
                "judge_model": row.get("judge_model"),
                "case_id": row["case_id"],
                "benchmark": row.get("benchmark"),
                "grading_method": row.get("grading_method"),
                "score": row.get("score"),
                "error": row.get("error"),
            }
            if not decisions:
                parts = row.get("score_components")
                parts = parts if isinstance(parts, dict) else {}
                records.append({**base, **{c: parts.get(c) for c in COMPONENTS}})
                continue
            for d in _decisions(row):
                records.append(
                    {
                        **base,
                        "item_id": d["item_id"],
                        "points": d["points"],
                        "matched": d["matched"],
                    }
                )
    schema = {
        "run": pl.String,
        "answer_model": pl.String,
        "judge_model": pl.String,
        "case_id": pl.String,
        "benchmark": pl.String,
        "grading_method": pl.String,
        "score": pl.Float64,
        "error": pl.String,
    }
    extra = (
        {"item_id": pl.String, "points": pl.Float64, "matched": pl.Boolean}
        if decisions
        else {c: pl.Float64 for c in COMPONENTS}
    )
    return pl.DataFrame(records, schema={**schema, **extra}, orient="row")


def _decisions(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A row's verdicts: its decisions, or (HealthBench) its rubric items' ``criteria_met``
    under the ids the run gave them (``item_<n>``, rubric order; None: not graded)."""
    if "decisions" in row or "rubric_items" not in row:
        return list(row.get("decisions") or [])
    return [
        {"item_id": f"item_{n}", "points": g["points"], "matched": g.get("criteria_met")}
        for n, g in enumerate(row["rubric_items"])
    ]


def write_export(frame: pl.DataFrame, out: Path, fmt: str) -> None:
    """Written whole beside ``out`` and renamed over it: a crash leaves the old file."""
    with replacing(out, mode=0o644) as tmp:
        if fmt == "parquet":
            frame.write_parquet(tmp)
        else:
            frame.write_csv(tmp)
