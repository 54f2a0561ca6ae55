"""A HealthBench run as Every Eval Ever records (schema 0.3.0), laid out as the datastore
lays them out: ``data/healthbench/<developer>/<model>/<uuid>.json`` and its samples.

One result per simple-evals metric — ``overall_score``, each theme, each axis and every
other tag it scores — each with its ``n_samples`` and its bootstrap std (simple-evals'
resampling, here seeded) as the standard error; the overall score also carries
batchbench's own 95 % interval, named so. The grader is the metric's LLM judge, its
prompt simple-evals' ``GRADER_TEMPLATE``. One sample record per graded example: the
conversation, the rubric items as ``[points] criterion``, the completion, each item's
``criteria_met``, the example's score.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from ..bench import healthbench
from .eee_schema import (
    SCHEMA_VERSION,
    Aggregate,
    EvaluationResult,
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

BENCHMARK = "healthbench"
METRIC_ID = "healthbench.rubric_score"


def _metric(judge_model: str) -> MetricConfig:
    return {
        "evaluation_description": "simple-evals' HealthBench score: the rubric points a"
        " completion earns over the positive points, a grader asked once per item;"
        " the mean over examples clipped to [0, 1]",
        "metric_id": METRIC_ID,
        "metric_name": "HealthBench score",
        "metric_kind": "score",
        "metric_unit": "proportion",
        "lower_is_better": False,
        "score_type": "continuous",
        "min_score": 0,
        "max_score": 1,
        "llm_scoring": {
            "judges": [
                {"model_info": model_info(judge_model), "temperature": healthbench.TEMPERATURE}
            ],
            "input_prompt": healthbench.grader_template(),
        },
    }


def _results(summary: Mapping[str, Any], judge_model: str) -> list[EvaluationResult]:
    metrics = summary["metrics"]
    source: SourceData = {
        "dataset_name": "HealthBench",
        "source_type": "other",
        "additional_details": {"dataset_sha256": str(summary["dataset_sha256"])},
    }
    metric = _metric(judge_model)
    boot = summary["bootstrap"]
    names = [k for k in metrics if not k.endswith((":n_samples", ":bootstrap_std"))]
    ordered = ["overall_score", *sorted(n for n in names if n != "overall_score")]
    out: list[EvaluationResult] = []
    for name in ordered:
        if name not in metrics:
            continue
        uncertainty: Uncertainty = {
            "num_samples": int(metrics[f"{name}:n_samples"]),
            "num_bootstrap_samples": int(boot["samples"]),
            "standard_error": {
                "value": float(metrics[f"{name}:bootstrap_std"]),
                "method": f"bootstrap std of the clipped mean (simple-evals'; seed {boot['seed']})",
            },
        }
        if name == "overall_score" and summary.get("overall_ci95"):
            uncertainty["confidence_interval"] = interval(
                summary["overall_ci95"], "percentile bootstrap over examples (batchbench's own)"
            )
        details: ScoreDetails = {"score": float(metrics[name]), "uncertainty": uncertainty}
        out.append(result(f"{BENCHMARK}.{name}", name, source, metric, details))
    return out


def _instance(row: Mapping[str, Any], evaluation_id: str, model_id: str) -> dict[str, Any]:
    items = row["rubric_items"]
    reference = [f"[{i['points']}] {i['criterion']}" for i in items]
    conversation = "\n\n".join(f"{m['role']}: {m['content']}" for m in row["prompt"])
    completion = "".join(str(m.get("content", "")) for m in row["completion"])
    digest = hashlib.sha256((conversation + "\n".join(reference)).encode()).hexdigest()
    score = row["score"]
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "model_id": model_id,
        "evaluation_name": "overall_score",
        "evaluation_result_id": f"{BENCHMARK}.overall_score",
        "sample_id": str(row["prompt_id"]),
        "sample_hash": digest,
        # the model answers once, the conversation so far its input (as the grader reads it)
        "interaction_type": "single_turn",
        "input": {"raw": conversation, "reference": reference},
        "output": {"raw": [completion]},
        "answer_attribution": [
            {
                "turn_idx": 0,
                "source": "output.raw",
                "extracted_value": json.dumps([i["criteria_met"] for i in items]),
                "extraction_method": "llm_judge",
                "is_terminal": True,
            }
        ],
        "evaluation": {"score": float(score), "is_correct": float(score) >= 1.0},
    }


def records(
    rows: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any],
    *,
    run_id: str,
    now: float,
    finished: str,
    provenance: Mapping[str, Any] | None = None,
) -> tuple[Aggregate, list[dict[str, Any]], str]:
    """The aggregate, the sample records (each example's last row, graded and scorable)
    and the records' path without suffix."""
    last: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        last[str(row["case_id"])] = row
    answer_model = str(summary["answer_model"])
    model = model_info(answer_model)
    ident = str(uuid.UUID(run_id))
    folder = f"data/{BENCHMARK}/{slug(model['developer'])}/{slug(answer_model)}"
    evaluation_id = f"{BENCHMARK}/{model['id']}/{int(now)}"
    instances = [
        _instance(row, evaluation_id, model["id"])
        for _, row in sorted(last.items())
        if "error" not in row and row.get("score") is not None
    ]
    aggregate = aggregate_record(
        evaluation_id,
        finished,
        now,
        {
            "protocol_version": str(summary["protocol_version"]),
            "dataset_sha256": str(summary["dataset_sha256"]),
            "run_id": run_id,
            "errors": str(summary["errors"]),
            "examples": str(summary["examples"]),
        },
        model,
        _results(summary, str(summary["judge_model"])),
        f"{folder}/{ident}_samples.jsonl",
    )
    if provenance is not None:
        with_provenance(aggregate, provenance)
    return aggregate, instances, f"{folder}/{ident}"
