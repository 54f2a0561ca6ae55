"""The reference summary's exact fields — everything but the bootstrap's intervals — and a
summary on disk checked against the rows it summarises.

The counts, means, models, temperatures and times of a summary follow from its rows
by the reference's rules alone, with no random stream: computing them is cheap, so
every reader of a ``results.summary.json`` checks them before it states a figure from
it (a summary left stale by rows written since, or edited by hand, is not used).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from typing_extensions import NotRequired

from ..bench.protocol import PROTOCOL_VERSION
from ..providers import judge_service

NAN = float("nan")


def last_rows(
    rows: Iterable[dict[str, Any]],
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Last row of each case, and last successful row of each case: the rows that
    count, by the reference's rule (the last successful row wins)."""
    last: dict[str, dict[str, Any]] = {}
    last_ok: dict[str, dict[str, Any]] = {}
    for row in rows:
        cid = row["case_id"]
        last[cid] = row
        if is_success(row):
            last_ok[cid] = row
    return last, last_ok


def is_success(row: dict[str, Any]) -> bool:
    return "score" in row and "error" not in row


def _single(values: Iterable[Any]) -> Any:
    distinct = []
    for v in values:
        if v not in distinct:
            distinct.append(v)
    return distinct[0] if len(distinct) == 1 else None


class BenchmarkSummary(TypedDict):
    n: int
    mean: float
    ci95: list[float]


class Summary(TypedDict):
    """The reference's summary, keys in its order (``results.summary.json``)."""

    protocol_version: str
    dataset_sha256: str | None
    answer_model: str | None
    judge_model: str | None
    answer_temperature: float | None
    judge_temperature: float | None
    judge_passes_per_answer: int
    started_at: str | None
    finished_at: str | None
    completed_cases: int
    errors: int
    overall_macro_mean: float
    overall_ci95: list[float]
    benchmarks: dict[str, BenchmarkSummary]
    bootstrap_samples: int
    bootstrap_seed: int
    # Ours, after the reference's keys: the judge's service, when its model is not
    # OpenAI's (the reference judges on OpenAI; these are not its numbers).
    judge_service: NotRequired[str]


def exact_summary(
    rows: Sequence[dict[str, Any]],
    expected_case_ids: Iterable[str] | None = None,
    dataset_sha256: str | None = None,
) -> tuple[Summary, dict[str, list[float]]]:
    """The summary of these rows but its intervals (left empty), and the scores of each
    benchmark the bootstrap resamples."""
    if expected_case_ids is not None:
        selected = set(expected_case_ids)
        rows = [r for r in rows if r.get("case_id") in selected]
    last, last_ok = last_rows(rows)
    ok_rows = [r for r in rows if is_success(r)]
    scores: dict[str, list[float]] = {}
    for row in last_ok.values():
        scores.setdefault(row["benchmark"], []).append(float(row["score"]))
    benchmarks = sorted(scores)
    means = {b: statistics.fmean(scores[b]) for b in benchmarks}
    temps = _single((r.get("answer_temperature"), r.get("judge_temperature")) for r in ok_rows)
    started = [r["started_at"] for r in rows if isinstance(r.get("started_at"), str)]
    finished = [r["finished_at"] for r in rows if isinstance(r.get("finished_at"), str)]
    summary: Summary = {  # a literal keeps the reference's key order visible
        "protocol_version": PROTOCOL_VERSION,
        "dataset_sha256": dataset_sha256,
        "answer_model": _single(r.get("answer_model") for r in ok_rows),
        "judge_model": _single(r.get("judge_model") for r in ok_rows),
        "answer_temperature": temps[0] if temps else None,
        "judge_temperature": temps[1] if temps else None,
        "judge_passes_per_answer": 1,
        "started_at": min(started) if started else None,
        "finished_at": max(finished) if finished else None,
        "completed_cases": len(last_ok),
        "errors": sum(1 for r in last.values() if "error" in r),
        "overall_macro_mean": statistics.fmean(means.values()) if means else NAN,
        "overall_ci95": [],
        "benchmarks": {
            b: BenchmarkSummary(n=len(scores[b]), mean=means[b], ci95=[]) for b in benchmarks
        },
        "bootstrap_samples": 0,
        "bootstrap_seed": 0,
    }
    service = judge_service(summary["judge_model"]) if summary["judge_model"] else None
    if service is not None:
        summary["judge_service"] = service
    return summary, scores


def _same(a: Any, b: Any) -> bool:
    nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return nan or a == b


def disagreement(
    summary: Summary,
    rows: Sequence[dict[str, Any]],
    expected_case_ids: Iterable[str] | None,
    dataset_sha256: str | None,
) -> str | None:
    """The first field in which a summary on disk disagrees with the rows it summarises
    (``benchmarks.drug_safety.mean: 0.52 there, 0.48 from the rows``), else None."""
    exact, _ = exact_summary(rows, expected_case_ids, dataset_sha256)
    for key, value in exact.items():
        if key in ("overall_ci95", "benchmarks", "bootstrap_samples", "bootstrap_seed"):
            continue
        if not _same(summary.get(key), value):
            return f"{key}: {summary.get(key)!r} there, {value!r} from the rows"
    there, here = summary["benchmarks"], exact["benchmarks"]
    if sorted(there) != sorted(here):
        return f"benchmarks: {sorted(there)} there, {sorted(here)} from the rows"
    for name, b in here.items():
        found: dict[str, Any] = dict(there[name])
        for key, value in (("n", b["n"]), ("mean", b["mean"])):
            if not _same(found.get(key), value):
                return f"benchmarks.{name}.{key}: {found.get(key)!r} there, {value!r} from the rows"
    return None
