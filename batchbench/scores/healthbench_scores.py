"""HealthBench's scores as simple-evals computes them (``healthbench_eval.py``; the rules
in ``../shared/spec/healthbench.md``): each example's achieved points over its positive
points, each example tag scored with the example's score, each rubric tag over its own
items; then per metric the mean over the examples that have it clipped to [0, 1], its
``n_samples`` and its ``bootstrap_std`` (1,000 resamples of the clipped mean).

The one departure, said where it shows: simple-evals draws its resamples from NumPy's
unseeded global generator, so its ``bootstrap_std`` differs run to run; here the draws
are seeded (``seed``), so a summary is repeatable. The figures are simple-evals'; any
interval batchbench prints beside them is its own and is named so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..bench.healthbench import Example, RubricItem

BOOTSTRAP_SAMPLES = 1000
SEED = 42


def calculate_score(items: Sequence[RubricItem], met: Sequence[bool]) -> float | None:
    """Achieved points over the positive points (None when no item has positive points)."""
    total = sum(i.points for i in items if i.points > 0)
    if total == 0:
        return None
    return sum(i.points for i, m in zip(items, met) if m) / total


def example_metrics(example: Example, met: Sequence[bool]) -> dict[str, float]:
    """One example's metrics: ``overall_score``, each example tag (the overall score), each
    rubric tag (its items' score; a tag none of whose items has positive points skipped).
    Its ``score`` is its ``overall_score``."""
    overall = calculate_score(example.rubrics, met)
    out: dict[str, float] = {}
    if overall is not None:
        out["overall_score"] = overall
        for tag in example.example_tags:
            out[tag] = overall
    tags = sorted({t for item in example.rubrics for t in item.tags})
    for tag in tags:
        chosen = [(i, m) for i, m in zip(example.rubrics, met) if tag in i.tags]
        score = calculate_score([i for i, _ in chosen], [m for _, m in chosen])
        if score is not None:
            out[tag] = score
    if overall is not None:
        out["score"] = overall
    return out


def _clipped_mean(values: np.ndarray) -> float:
    return float(np.clip(np.mean(values), 0, 1))


def aggregate(
    per_example: Iterable[Mapping[str, float]],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = SEED,
) -> dict[str, Any]:
    """simple-evals' ``_aggregate_get_clipped_mean``: for every metric name, over the
    examples that have it, the clipped mean, ``:n_samples`` and ``:bootstrap_std``; the
    result's ``score`` is the clipped mean of ``score`` (its two stats stay in
    ``metrics``). The resamples are drawn metric by metric, in the metrics' order, from
    one generator seeded with ``seed``."""
    values: dict[str, list[float]] = {}
    for metrics in per_example:
        for name, value in metrics.items():
            values.setdefault(name, []).append(value)
    rng = np.random.default_rng(seed)
    metrics_out: dict[str, float | int] = {}
    for name in sorted(values):
        found = np.asarray(values[name], dtype=float)
        metrics_out[name] = _clipped_mean(found)
        metrics_out[f"{name}:n_samples"] = len(found)
        picks = rng.integers(0, len(found), size=(samples, len(found)))
        means = np.clip(found[picks].mean(axis=1), 0, 1)
        metrics_out[f"{name}:bootstrap_std"] = float(np.std(means))
    score = metrics_out.pop("score", None)
    return {"score": score, "metrics": metrics_out}


def example_row(
    example: Example, answer: str, grades: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """One example's row, as simple-evals' ``example_level_metadata`` holds it: its score,
    its rubric items with each verdict and explanation, its prompt and completion."""
    met = [bool(g["criteria_met"]) for g in grades]
    import hashlib

    return {
        "prompt_id": example.prompt_id,
        "score": calculate_score(example.rubrics, met),
        "rubric_items": [
            {
                "criterion": item.criterion,
                "points": item.points,
                "tags": list(item.tags),
                "criteria_met": g["criteria_met"],
                "explanation": g.get("explanation", "No explanation provided"),
            }
            for item, g in zip(example.rubrics, grades)
        ],
        "prompt": list(example.prompt),
        "completion": [{"role": "assistant", "content": answer}],
        "completion_id": hashlib.sha256((example.prompt_id + answer).encode()).hexdigest(),
        "example_tags": list(example.example_tags),
    }


def summary_of_rows(
    examples: Mapping[str, Example],
    rows: Iterable[Mapping[str, Any]],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = SEED,
) -> dict[str, Any]:
    """The summary of graded rows (each with its ``prompt_id`` and its ``rubric_items``'
    verdicts, in the example's rubric order): ``score`` and ``metrics`` with simple-evals'
    keys, and how it was drawn."""
    per_example = []
    for row in rows:
        example = examples[str(row["prompt_id"])]
        met = [bool(item["criteria_met"]) for item in row["rubric_items"]]
        if len(met) != len(example.rubrics):
            raise ValueError(
                f"example {example.prompt_id}: {len(met)} verdicts for"
                f" {len(example.rubrics)} rubric items"
            )
        per_example.append(example_metrics(example, met))
    found = aggregate(per_example, samples, seed)
    found["bootstrap"] = {"samples": samples, "seed": seed, "rng": "numpy default_rng"}
    return found
