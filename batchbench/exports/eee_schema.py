"""Every Eval Ever's records (the EvalEval Coalition's schema 0.3.0) as the schema names
their fields, and what every benchmark's records share: the model's record, an
interval, a result, the aggregate around the results (with the run's provenance), and
the two files written under the datastore's layout. Each benchmark's own results and
samples: :mod:`.eee` (BedsideBench), :mod:`.eee_healthbench`."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from .. import __version__, providers
from .._io import atomic_write_bytes

SCHEMA_VERSION = "0.3.0"


# The records as the schema names their fields (the parts batchbench writes).
class ModelInfo(TypedDict):
    name: str
    id: str
    developer: str
    inference_platform: str
    additional_details: dict[str, str]


class ConfidenceInterval(TypedDict):
    lower: float
    upper: float
    confidence_level: float
    method: str


class StandardError(TypedDict):
    value: float
    method: str


class Uncertainty(TypedDict, total=False):
    confidence_interval: ConfidenceInterval
    num_samples: int
    num_bootstrap_samples: int
    standard_deviation: float
    standard_error: StandardError


class ScoreDetails(TypedDict, total=False):
    score: float
    details: dict[str, str]  # the schema's key-value strings
    uncertainty: Uncertainty


class Judge(TypedDict):
    model_info: ModelInfo
    temperature: float


class MetricConfig(TypedDict):
    evaluation_description: str
    metric_id: str
    metric_name: str
    metric_kind: str
    metric_unit: str
    lower_is_better: bool
    score_type: str
    min_score: float
    max_score: float
    llm_scoring: dict[str, Any]


class SourceData(TypedDict):
    dataset_name: str
    source_type: str
    additional_details: dict[str, str]


class EvaluationResult(TypedDict):
    evaluation_result_id: str
    evaluation_name: str
    source_data: SourceData
    metric_config: MetricConfig
    score_details: ScoreDetails


class Aggregate(TypedDict):
    schema_version: str
    evaluation_id: str
    evaluation_timestamp: str
    retrieved_timestamp: str
    source_metadata: dict[str, str]
    eval_library: dict[str, Any]
    model_info: ModelInfo
    evaluation_results: list[EvaluationResult]
    detailed_evaluation_results: dict[str, Any]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unknown"


def model_info(model: str) -> ModelInfo:
    spec = providers.spec(providers.route(model))
    developer = spec.developer or "unknown"
    return {
        "name": model,
        "id": f"{developer}/{model}",
        "developer": developer,
        "inference_platform": spec.label,
        "additional_details": {
            "deployment_type": "externally_managed",
            "model_availability": "closed_weights" if spec.developer else "unknown",
        },
    }


def interval(ci: Sequence[float], method: str) -> ConfidenceInterval:
    return {"lower": ci[0], "upper": ci[1], "confidence_level": 0.95, "method": method}


def aggregate_record(
    evaluation_id: str,
    finished: str,
    now: float,
    details: dict[str, str],
    model: ModelInfo,
    results: list[EvaluationResult],
    samples: str,
) -> Aggregate:
    """The aggregate record around a run's results (``details``: the library's key-value
    strings; ``samples``: the per-case JSONL's path under the datastore)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": evaluation_id,
        "evaluation_timestamp": finished,
        "retrieved_timestamp": str(int(now)),
        "source_metadata": {
            "source_name": "batchbench",
            "source_type": "evaluation_run",
            "source_organization_name": "batchbench",
            "evaluator_relationship": "third_party",
        },
        "eval_library": {
            "name": "batchbench",
            "version": __version__,
            "additional_details": details,
        },
        "model_info": model,
        "evaluation_results": results,
        "detailed_evaluation_results": {
            "format": "jsonl",
            "file_path": samples,
            "hash_algorithm": "sha256",
        },
    }


def _served_details(stage: Mapping[str, Any]) -> dict[str, str]:
    """A stage's provenance as the schema's key-value strings."""
    served = ", ".join(f"{m} ({n})" for m, n in stage["served"].items())
    prints = ", ".join(f"{f} ({n})" for f, n in stage["fingerprints"].items())
    details = {
        "served_model": served or "not said by the service",
        "first_query": str(stage["first_query"] or ""),
        "last_query": str(stage["last_query"] or ""),
    }
    if prints:
        details["system_fingerprint"] = prints
    return details


def with_provenance(aggregate: Aggregate, provenance: Mapping[str, Any]) -> None:
    """The answer model's and the judge's served models and query spans beside the ones
    asked for (#66.1), and what a reviewer must be told, in the library's details."""
    aggregate["model_info"]["additional_details"].update(_served_details(provenance["answers"]))
    judge_details = _served_details(provenance["judges"])
    for result in aggregate["evaluation_results"]:
        for judge in result["metric_config"]["llm_scoring"]["judges"]:
            judge["model_info"] = {
                **judge["model_info"],
                "additional_details": {
                    **judge["model_info"]["additional_details"],
                    **judge_details,
                },
            }
    library = aggregate["eval_library"]["additional_details"]
    library["judge_same_vendor"] = {True: "true", False: "false"}.get(
        provenance["same_vendor"], "unknown"
    )
    if provenance["notes"]:
        library["provenance_notes"] = "; ".join(provenance["notes"])


def result(
    result_id: str, name: str, source: SourceData, metric: MetricConfig, details: ScoreDetails
) -> EvaluationResult:
    return {
        "evaluation_result_id": result_id,
        "evaluation_name": name,
        "source_data": source,
        "metric_config": metric,
        "score_details": details,
    }


def write(out: Path, aggregate: Aggregate, instances: list[dict[str, Any]], stem: str) -> Path:
    """The two files under ``out`` (the aggregate naming the JSONL's checksum and rows)."""
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in instances).encode()
    details = aggregate["detailed_evaluation_results"]
    details["checksum"] = hashlib.sha256(lines).hexdigest()
    details["total_rows"] = len(instances)
    samples = out / f"{stem}_samples.jsonl"
    samples.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(samples, lines, 0o644)
    record = out / f"{stem}.json"
    text = json.dumps(aggregate, indent=2, ensure_ascii=False) + "\n"
    atomic_write_bytes(record, text.encode(), 0o644)
    return record
