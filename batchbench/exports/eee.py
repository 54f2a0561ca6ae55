"""A run as Every Eval Ever records (the EvalEval Coalition's schema 0.3.0): one aggregate
record and its per-case JSONL, laid out as the datastore lays them out.

``data/bedside-bench/<developer>/<model>/<uuid>.json`` holds one result per benchmark
and the overall macro mean, each with the reference's percentile bootstrap interval
(seed 42, 10,000 resamples unless the summary says otherwise), its resample count,
the standard error and deviation of the case scores, and the judge under
``metric_config.llm_scoring``; with physicians' labels, each benchmark's PPI++
corrected score is a second result. ``<uuid>_samples.jsonl`` holds one record per
scored case (the prompt, the rubric as the reference, the answer, the judge's
verdicts, the score; ``is_correct`` when every rubric point was earned), and the
aggregate names it with its SHA-256 and row count. The uuid is the run's id, so
exporting again writes the same names.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..bench import protocol
from ..bench.dataset import Case
from ..scores.stats import SMALL_N
from ..scores.summary import Summary, last_rows
from .eee_schema import (
    SCHEMA_VERSION,
    Aggregate,
    EvaluationResult,
    Judge,
    MetricConfig,
    ScoreDetails,
    SourceData,
    Uncertainty,
    aggregate_record,
    interval,
    model_info,
    result,
    slug,
    with_provenance,
)

BENCHMARK = "bedside-bench"
METRIC_ID = "bedside_bench.rubric_score"


def _uncertainty(scores: Sequence[float], ci: Sequence[float], samples: int) -> Uncertainty:
    out: Uncertainty = {
        "confidence_interval": interval(
            ci, "percentile bootstrap over cases (the reference runner's, seed 42)"
        ),
        "num_samples": len(scores),
        "num_bootstrap_samples": samples,
    }
    if len(scores) > 1:
        sd = statistics.stdev(scores)
        out["standard_deviation"] = sd
        out["standard_error"] = {"value": sd / math.sqrt(len(scores)), "method": "analytic"}
    return out


def _metric(judge_model: str) -> MetricConfig:
    judge: Judge = {
        "model_info": model_info(judge_model),
        "temperature": protocol.JUDGE_TEMPERATURE,
    }
    return {
        "evaluation_description": "Mean rubric score of a judged clinical answer (0 to 1)",
        "metric_id": METRIC_ID,
        "metric_name": "Rubric score",
        "metric_kind": "score",
        "metric_unit": "proportion",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0,
        "max_score": 1,
        "llm_scoring": {"judges": [judge], "input_prompt": protocol.JUDGE_SYSTEM_MESSAGE},
    }


def records(
    rows: Sequence[dict[str, Any]],
    summary: Summary,
    cases: Mapping[str, Case],
    *,
    run_id: str,
    now: float,
    calibrated: Mapping[str, Mapping[str, Any]] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> tuple[Aggregate, list[dict[str, Any]], str]:
    """The aggregate record, the per-case records and the records' path without suffix
    (``rows``: the run's scored rows, ``summary``: its summary; ``provenance``: the
    run's, said in the models' ``additional_details``)."""
    _, last_ok = last_rows(rows)
    answer_model = str(summary["answer_model"])
    ident = str(uuid.UUID(run_id))
    model = model_info(answer_model)
    folder = f"data/{BENCHMARK}/{slug(model['developer'])}/{slug(answer_model)}"
    evaluation_id = f"{BENCHMARK}/{model['id']}/{int(now)}"
    instances = [
        _instance(row, cases[row["case_id"]], evaluation_id, model["id"])
        for row in sorted(last_ok.values(), key=lambda r: r["case_id"])
    ]
    aggregate = aggregate_record(
        evaluation_id,
        str(summary["finished_at"] or ""),
        now,
        {
            "protocol_version": str(summary["protocol_version"]),
            "dataset_sha256": str(summary["dataset_sha256"]),
            "run_id": run_id,
            "errors": str(summary["errors"]),
        },
        model,
        _results(summary, last_ok.values(), calibrated or {}),
        f"{folder}/{ident}_samples.jsonl",
    )
    if provenance is not None:
        with_provenance(aggregate, provenance)
    return aggregate, instances, f"{folder}/{ident}"


def _results(
    summary: Summary,
    scored: Iterable[dict[str, Any]],
    calibrated: Mapping[str, Mapping[str, Any]],
) -> list[EvaluationResult]:
    """One result per benchmark (and its PPI++ corrected score, when labelled), then the
    overall macro mean."""
    metric = _metric(str(summary["judge_model"]))
    source: SourceData = {
        "dataset_name": "BedsideBench",
        "source_type": "other",
        "additional_details": {"dataset_sha256": str(summary["dataset_sha256"])},
    }
    samples = int(summary.get("bootstrap_samples") or 10000)
    scores: dict[str, list[float]] = {}
    for row in scored:
        scores.setdefault(row["benchmark"], []).append(float(row["score"]))
    results: list[EvaluationResult] = []
    for name, bench in summary["benchmarks"].items():
        result_id = f"{BENCHMARK}.{name}"
        details: ScoreDetails = {
            "score": bench["mean"],
            "uncertainty": _uncertainty(scores[name], bench["ci95"], samples),
        }
        results.append(result(result_id, name, source, metric, details))
        corrected = calibrated.get(name)
        if corrected is not None:
            results.append(_calibrated(result_id, name, source, metric, corrected))
    overall: ScoreDetails = {
        "score": summary["overall_macro_mean"],
        "uncertainty": {
            "confidence_interval": interval(
                summary["overall_ci95"], "stratified percentile bootstrap (the reference runner's)"
            ),
            "num_samples": int(summary["completed_cases"]),
            "num_bootstrap_samples": samples,
        },
    }
    name = "overall (macro mean of the benchmarks)"
    results.append(result(f"{BENCHMARK}.overall", name, source, metric, overall))
    return results


def _calibrated(
    result_id: str,
    name: str,
    source: SourceData,
    metric: MetricConfig,
    corrected: Mapping[str, Any],
) -> EvaluationResult:
    # The judgement calibrate makes goes with the figure (#63.6): how many labelled cases
    # it rests on, and whether that is enough for its interval to hold.
    labelled, holds = (
        int(corrected["n"]),
        not corrected.get("small_n") and bool(corrected.get("ci95")),
    )
    said = {"labelled_cases": str(labelled), "reliable": "true" if holds else "false"}
    if not holds:
        said["caveat"] = (
            f"rests on {labelled} physician-labelled case(s), fewer than {SMALL_N}: too few"
            " for its interval to hold; a pointer, not a finding"
        )
    details: ScoreDetails = {"score": corrected["estimate"], "details": said}
    uncertainty: Uncertainty = {}
    if corrected.get("se") is not None:
        uncertainty["standard_error"] = {"value": corrected["se"], "method": "PPI++"}
    if corrected.get("ci95"):
        method = "PPI++ (prediction-powered inference) against physicians' labels"
        uncertainty["confidence_interval"] = interval(corrected["ci95"], method)
        uncertainty["num_samples"] = int(corrected["n"])
    if uncertainty:
        details["uncertainty"] = uncertainty
    title = f"{name} (judge calibrated against physicians, PPI++)"
    return result(f"{result_id}.calibrated", title, source, metric, details)


def _instance(row: dict[str, Any], case: Case, evaluation_id: str, model_id: str) -> dict[str, Any]:
    reference = [protocol.rubric_line(item) for item in case["rubric_items"]]
    verdicts = {d["item_id"]: d["matched"] for d in row.get("decisions") or []}
    digest = hashlib.sha256((case["prompt"] + "\n".join(reference)).encode()).hexdigest()
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "model_id": model_id,
        "evaluation_name": row["benchmark"],
        "evaluation_result_id": f"{BENCHMARK}.{row['benchmark']}",
        "sample_id": row["case_id"],
        "sample_hash": digest,
        "interaction_type": "single_turn",
        "input": {"raw": case["prompt"], "reference": reference},
        "output": {"raw": [str(row.get("answer") or "")]},
        "answer_attribution": [
            {
                "turn_idx": 0,
                "source": "output.raw",
                "extracted_value": json.dumps(verdicts, ensure_ascii=False),
                "extraction_method": "llm_judge",
                "is_terminal": True,
            }
        ],
        "evaluation": {"score": float(row["score"]), "is_correct": float(row["score"]) >= 1.0},
    }
