"""Case scores from judge decisions, computed over polars frames.

Decisions are joined to the rubric by ``item_id`` and aggregated per case in one
pass for every grading method. The arithmetic follows the reference runner
operation by operation (same sums, same division order, Python's ``round``), so
every score is bit-identical to the reference's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl

from ..errors import JudgeReplyError
from .dataset import Case

_CLASS_OF_POINTS = {3: 9, 2: 8, 1: 7, 0: 5, -1: 3, -2: 2, -3: 1}
_WEIGHT_OF_CLASS = {1: 72, 9: 72, 2: 24, 8: 24, 3: 3, 7: 3}

RUBRIC_SCHEMA = {
    "case": pl.Int64,
    "case_id": pl.String,
    "grading_method": pl.String,
    "idx": pl.Int64,
    "item_id": pl.String,
    "points": pl.Float64,
    "points_json": pl.String,
    "escaped": pl.Boolean,  # the item id has characters JSON escapes (rare: checked once)
}
# The characters json.dumps escapes in a string (ensure_ascii=False): a quote, a
# backslash, the control characters.
JSON_ESCAPED = r'[\x00-\x1f"\\]'


def rubric_frame(cases: Iterable[Case]) -> pl.DataFrame:
    """One row per rubric item: case (its number here), case_id, grading_method, idx,
    item_id, points, points_json (the points as the case's JSON has them, an int an
    int: what a result row echoes) and escaped (the id is not its own JSON text).
    Grouping by the integer ``case`` is several times faster than by ``case_id``."""
    case_no: list[int] = []
    case_ids: list[str] = []
    methods: list[str] = []
    idx: list[int] = []
    item_ids: list[str] = []
    points: list[float] = []
    points_json: list[str] = []
    for number, case in enumerate(cases):
        for i, item in enumerate(case["rubric_items"]):
            case_no.append(number)
            case_ids.append(case["case_id"])
            methods.append(case["grading_method"])
            idx.append(i)
            item_ids.append(item["item_id"])
            points.append(float(item["points"]))
            value = item["points"]
            points_json.append(int.__repr__(value) if type(value) is int else json.dumps(value))
    return pl.DataFrame(
        {
            "case": case_no,
            "case_id": case_ids,
            "grading_method": methods,
            "idx": idx,
            "item_id": item_ids,
            "points": points,
            "points_json": points_json,
        },
        schema={k: v for k, v in RUBRIC_SCHEMA.items() if k != "escaped"},
    ).with_columns(pl.col("item_id").str.contains(JSON_ESCAPED).alias("escaped"))


def _python_round4(values: np.ndarray) -> np.ndarray:
    """Python's ``round(x, 4)``, vectorised: exact except near ties, which use Python."""
    scaled = values * 1e4
    out = np.rint(scaled) / 1e4
    frac = scaled - np.floor(scaled)
    near_tie = np.flatnonzero(np.abs(frac - 0.5) < 1e-6)
    for i in near_tie:
        out[i] = round(float(values[i]), 4)
    return out


_CLASS_TABLE = np.array([_CLASS_OF_POINTS.get(v, 5) for v in range(-4, 5)], dtype=np.int64)
_WEIGHT_TABLE = np.array([_WEIGHT_OF_CLASS.get(c, 1) for c in range(10)], dtype=np.float64)


def _case_key(rows: pl.DataFrame) -> pl.Series:
    """The integer ``case`` when present: comparing it is much cheaper than ``case_id``."""
    return rows["case"] if "case" in rows.columns else rows["case_id"]


def _run_starts(rows: pl.DataFrame) -> np.ndarray:
    """Where each run of one case's rows begins."""
    runs = _case_key(rows).rle_id().to_numpy()
    return np.flatnonzero(np.diff(runs, prepend=-1)).astype(np.int64)


def _per_case(joined: pl.DataFrame, starts: np.ndarray) -> pl.DataFrame:
    """Each case's sums, from rows that are contiguous per case and in rubric order.

    The points sums run item after item, left to right, as Python's ``sum`` does
    in the reference: with fractional points another order changes the last
    bit. Weights are whole numbers, so their sums are exact in any order.
    """
    counts = np.diff(np.append(starts, joined.height))
    points = joined["points"].to_numpy().astype(np.float64)
    matched = joined["matched"].to_numpy().astype(bool)

    def total(values: np.ndarray) -> np.ndarray:
        return np.add.reduceat(values, starts) if len(starts) else values[:0]

    largest = float(np.abs(points).max(initial=0.0)) * int(counts.max(initial=0))
    if largest < 2**53 and np.array_equal(points, np.trunc(points)):
        # Whole points (as rubrics have them) sum exactly in any order: all at once.
        num = total(np.where(matched, points, 0.0))
        den = total(np.where(points > 0, points, 0.0))
    else:
        num, den = np.zeros(len(starts)), np.zeros(len(starts))
        for k in range(int(counts.max(initial=0))):
            active = np.flatnonzero(counts > k)
            p = points[starts[active] + k]
            m = matched[starts[active] + k]
            num[active] = np.where(m, num[active] + p, num[active])
            den[active] = np.where(p > 0, den[active] + p, den[active])
    # int(points) picks the class: clip first so huge values stay "any other value".
    cls = _CLASS_TABLE[np.clip(points, -4, 4).astype(np.int64) + 4]
    weight = _WEIGHT_TABLE[cls]
    positive = cls >= 7
    return pl.DataFrame(
        {
            "case_id": joined["case_id"].gather(starts),
            "grading_method": joined["grading_method"].gather(starts),
            "den": den,
            "num": num,
            "n_matched": total(matched.astype(np.int64)),
            "tp_w": total(np.where(matched & positive, weight, 0.0)),
            "pos_w": total(np.where(positive, weight, 0.0)),
            "matched_w": total(np.where(matched, weight, 0.0)),
            "missed_severe": total(((points == 3) & ~matched).astype(np.int64)) > 0,
            "hit_severe": total(((points == -3) & matched).astype(np.int64)) > 0,
        }
    )


def score_joined(joined: pl.DataFrame) -> pl.DataFrame:
    """Per-case scores from rubric rows that already carry their ``matched`` decision.

    Within a case the rows must be in rubric order: they are summed in that
    order, as the reference sums them (it matters for fractional points). A
    case's rows that are not together are brought together first.
    """
    starts = _run_starts(joined)
    if starts.size != _case_key(joined).n_unique():
        first = pl.int_range(pl.len()).min().over("case_id")
        joined = joined.sort(first, maintain_order=True)
        starts = _run_starts(joined)
    per_case = _per_case(joined, starts)
    precision = pl.when(pl.col("matched_w") > 0).then(pl.col("tp_w") / pl.col("matched_w"))
    recall = pl.when(pl.col("pos_w") > 0).then(pl.col("tp_w") / pl.col("pos_w")).otherwise(0.0)
    scored = per_case.with_columns(
        (pl.col("num") / pl.col("den")).alias("raw_score"),
        precision.alias("precision"),
        recall.alias("recall"),
    ).with_columns(
        pl.when(pl.col("precision").is_not_null() & ((pl.col("precision") + pl.col("recall")) > 0))
        .then(2 * pl.col("precision") * pl.col("recall") / (pl.col("precision") + pl.col("recall")))
        .otherwise(0.0)
        .alias("f1"),
        pl.when(pl.col("missed_severe") | pl.col("hit_severe"))
        .then(1.0)
        .otherwise(0.0)
        .alias("severe_rate"),
        pl.col("raw_score").clip(0.0, 1.0).alias("points_score"),
    )
    f1 = _python_round4(scored["f1"].to_numpy())
    prec = _python_round4(scored["precision"].fill_null(np.nan).to_numpy())
    rec = _python_round4(scored["recall"].to_numpy())
    scored = scored.with_columns(
        pl.Series("f1_weighted", f1),
        pl.Series("precision_weighted", prec).fill_nan(None),
        pl.Series("recall_weighted", rec),
    )
    is_f1 = pl.col("grading_method") == "f1_weighted_rubric"
    bad_den = scored.filter(~is_f1 & (pl.col("den") <= 0))
    if bad_den.height:
        raise JudgeReplyError(f"case {bad_den['case_id'][0]} has no positive points")
    return scored.with_columns(
        pl.when(is_f1).then(pl.col("f1_weighted")).otherwise(pl.col("points_score")).alias("score")
    ).select(
        "case_id",
        "grading_method",
        "score",
        pl.col("num").alias("matched_signed_points"),
        pl.col("den").alias("available_positive_points"),
        "raw_score",
        "n_matched",
        "f1_weighted",
        "precision_weighted",
        "recall_weighted",
        "severe_rate",
    )


# A scored row's ``score_components`` keys by grading method (f1 or not), in the
# reference's order: the score frame's columns of those names.
COMPONENTS: dict[bool, tuple[str, ...]] = {
    True: ("f1_weighted", "precision_weighted", "recall_weighted", "severe_rate"),
    False: ("matched_signed_points", "available_positive_points", "raw_score"),
}


def score_records(scores: pl.DataFrame) -> dict[str, tuple[float, dict[str, Any]]]:
    """``{case_id: (score, score_components)}`` with the reference's exact JSON types."""
    out: dict[str, tuple[float, dict[str, Any]]] = {}
    col = scores.get_column
    values = {key: col(key).to_list() for keys in COMPONENTS.values() for key in keys}
    nothing = col("n_matched").eq(0).to_list()
    for i, (case_id, is_f1, score) in enumerate(
        zip(
            col("case_id").to_list(),
            (col("grading_method") == "f1_weighted_rubric").to_list(),
            col("score").to_list(),
        )
    ):
        components: dict[str, Any] = {key: values[key][i] for key in COMPONENTS[is_f1]}
        if not is_f1 and nothing[i]:  # Python's sum() over no matched items is the integer 0
            components["matched_signed_points"] = 0
        out[case_id] = (score, components)
    return out
