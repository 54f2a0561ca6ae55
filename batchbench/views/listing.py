"""``batchbench list``: every run of a jobs folder on one line each, an aligned table.

One damaged run (a garbled journal, a broken summary) shows as such in its row
and never hides the others.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from ..costs.pricing import Pricing
from ..costs.rollup import total_text
from ..engine.rundir import Run
from ..errors import BatchbenchError
from ..formats import MISSING
from .status import run_status


def run_listing(run: Run, pricing: Pricing) -> dict[str, Any]:
    """One run's row: who, on what, how far, how well, at what cost, made when."""
    try:
        s = run_status(run, pricing)
        created = run.load_config().created_at
    except BatchbenchError as exc:
        return {"run": run.name, "status": "damaged", "problem": str(exc)}
    c = s["cases"]
    copy = {} if s["run"] == run.name else {"copy_of": s["run"]}  # its run.json's name
    return {
        "run": run.name,  # the folder: what every command is given
        **copy,
        "answer_model": s["answer_model"],
        "judge_model": s["judge_model"],
        "dataset": Path(s["dataset"]).name,
        "dataset_sha256": s["dataset_sha256"],
        "status": s["status"],
        "scored": c["scored"],
        "failed": c["errors"],
        "total": c["total"],
        "overall_macro_mean": s.get("overall_macro_mean"),
        "cost_usd": s["cost"]["total"]["batch_usd"],
        "priced_cost_usd": s["cost"]["total"]["priced_batch_usd"],
        "unpriced": s["cost"]["total"]["unpriced"],
    } | {CREATED: created, COST: total_text(s["cost"], digits=2)}


CREATED = "_created_at"  # for the table's date column; not in --json
COST = "_cost"  # the table's cost cell: the priced part, what is unpriced named


def for_json(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in (CREATED, COST)}


COLUMNS = (
    "run",
    "created",
    "status",
    "scored/failed/total",
    "answer model",
    "judge",
    "dataset",
    "mean",
    "cost",
)


def listing_table(rows: list[dict[str, Any]]) -> str:
    """The rows as an aligned table with a header; a damaged run says what is wrong."""
    cells = [list(COLUMNS)]
    notes = []
    for r in rows:
        if r["status"] == "damaged":
            cells.append([r["run"], "-", "damaged", "-", "-", "-", "-", "-", "-"])
            notes.append(f"{r['run']}: {r['problem']}")
            continue
        value = r["overall_macro_mean"]
        mean = f"{value:.3f}" if isinstance(value, float) and math.isfinite(value) else MISSING
        cells.append(
            [
                r["run"] + (f" (copy of {r['copy_of']})" if "copy_of" in r else ""),
                time.strftime("%Y-%m-%d %H:%M", time.localtime(r[CREATED])),
                r["status"],
                f"{r['scored']}/{r['failed']}/{r['total']}",
                str(r["answer_model"]),
                str(r["judge_model"]),
                f"{r['dataset']} ({r['dataset_sha256'][:12]})",
                mean,
                r[COST],
            ]
        )
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    return "\n".join(lines + notes)


def leaderboard_text(runs: list[Run], pricing: Pricing, hint: bool = True) -> str:
    """The runs of one command side by side, best overall macro mean first: what a
    group's N summary tables leave the reader to assemble. Unscored runs come last; the
    intervals are each run's own (``compare`` gives paired differences). Runs judged by
    different judges are never ranked together (a lenient judge's run would "win",
    #63.2): one leaderboard per judge, each with the `compare` that works for it."""
    judges: dict[str, list[Run]] = {}
    for run in runs:
        judges.setdefault(run.load_config().judge_model, []).append(run)
    grading = runs[0].load_config().grading if runs else None  # one command: one benchmark
    what = (
        f"simple-evals' {grading.name} score"
        if grading and grading.per_item
        else "overall macro mean"
    )
    if len(judges) == 1:
        return _board(runs, pricing, hint, f"leaderboard ({what})")
    return "\n\n".join(
        _board(theirs, pricing, hint, f"leaderboard under judge {judge} ({what})")
        for judge, theirs in judges.items()
    )


def _board(runs: list[Run], pricing: Pricing, hint: bool, title: str) -> str:
    rows = [run_listing(r, pricing) for r in runs]
    scored = [r for r in rows if isinstance(r.get("overall_macro_mean"), float)]
    scored = [r for r in scored if math.isfinite(r["overall_macro_mean"])]
    scored.sort(key=lambda r: -r["overall_macro_mean"])
    cis = {r.name: _ci(r) for r in runs}
    cells = [["#", "run", "answer model", "mean", "95% CI", "scored/total", "cost"]]
    for rank, r in enumerate(scored, 1):
        cells.append(
            [
                str(rank),
                r["run"],
                str(r["answer_model"]),
                f"{r['overall_macro_mean']:.3f}",
                cis[r["run"]],
                f"{r['scored']}/{r['total']}",
                r[COST],
            ]
        )
    for r in rows:
        if r not in scored:
            cells.append(
                ["-", r["run"], str(r.get("answer_model", "-")), "-", "-", r["status"], "-"]
            )
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    names = " ".join(r["run"] for r in scored)
    compare = f"paired differences: batchbench compare {names}" if len(scored) > 1 else ""
    compare = compare if hint else ""
    return "\n".join([title, *lines, *([compare] if compare else [])])


def _ci(run: Run) -> str:
    try:
        low, high = run_status(run)["overall_ci95"]
    except (BatchbenchError, KeyError):
        return "-"
    return f"[{low:.3f}, {high:.3f}]"
