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

from ..bench.healthbench import Example, RubricItem, calculate_score, completion_id

BOOTSTRAP_SAMPLES = 1000
SEED = 42


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
        "completion_id": completion_id(example.prompt_id, answer),
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


def row_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """A graded row's metrics, from what it holds (its items' points, tags and verdicts,
    its example tags): simple-evals' per-example metrics."""
    items = row["rubric_items"]
    example = Example(
        str(row["prompt_id"]),
        (),
        tuple(RubricItem(i["criterion"], i["points"], tuple(i["tags"])) for i in items),
        tuple(row.get("example_tags", ())),
        None,
    )
    return example_metrics(example, [bool(i["criteria_met"]) for i in items])


def run_summary(
    rows: Sequence[Mapping[str, Any]],
    case_ids: Sequence[str],
    head: Mapping[str, Any],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = SEED,
) -> dict[str, Any]:
    """A HealthBench run's ``results.summary.json``: simple-evals' ``score`` and
    ``metrics`` over the examples graded (each example's last row counts: a redone one's
    error row is superseded), and batchbench's own counts beside them (``head``: the
    run's models, protocol and dataset digest)."""
    last: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        last[str(row["case_id"])] = row
    graded = [
        last[c] for c in case_ids if c in last and "error" not in last[c] and "score" in last[c]
    ]
    per_example = [row_metrics(row) for row in graded]
    found = aggregate(per_example, samples, seed)
    errors = sum(1 for c in case_ids if c in last and "error" in last[c])
    overall = [m["overall_score"] for m in per_example if "overall_score" in m]
    mean, ci95 = own_interval(overall, samples, seed)
    return {
        **head,
        "score": found["score"],
        "metrics": found["metrics"],
        "examples": len(case_ids),
        "graded": len(graded),
        "errors": errors,
        "bootstrap": {"samples": samples, "seed": seed, "rng": "numpy default_rng"},
        # batchbench's own, beside simple-evals' figures (which have no interval): the
        # overall score's 95 % percentile interval over the same resamples' shape, in the
        # fields every run's summary has (status, list, compare read them).
        "benchmarks": {"healthbench": {"n": len(overall), "mean": mean, "ci95": ci95}},
        "overall_macro_mean": mean,
        "overall_ci95": ci95,
        "completed_cases": len(graded),
    }


def own_interval(
    values: Sequence[float], samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED
) -> tuple[float, list[float]]:
    """batchbench's interval for a clipped mean: the 2.5th and 97.5th percentiles of the
    clipped means of ``samples`` resamples (its own stream: ``seed`` + 1). NaN without
    values, as the reference's summary says an empty mean."""
    if not values:
        return float("nan"), [float("nan"), float("nan")]
    found = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed + 1)
    picks = rng.integers(0, len(found), size=(samples, len(found)))
    means = np.clip(found[picks].mean(axis=1), 0, 1)
    low, high = np.percentile(means, [2.5, 97.5])
    return _clipped_mean(found), [float(low), float(high)]


def summary_text(summary: Mapping[str, Any]) -> str:
    """The summary as the run prints it: simple-evals' figures, each a metric's clipped
    mean with its n and bootstrap std, overall first, then themes and axes."""
    metrics = summary["metrics"]
    names = [k for k in metrics if ":" not in k.removeprefix("theme:").removeprefix("axis:")]
    shown = ["overall_score"] + sorted(n for n in names if n.startswith(("theme:", "axis:")))
    width = max(len(n) for n in shown)
    lines = [
        f"answer model {summary['answer_model']}  judge {summary['judge_model']}"
        f"  protocol {summary['protocol_version']}",
        f"dataset {summary['dataset_sha256']}",
        f"{'metric'.ljust(width)}  {'n':>5}  {'score':>6}  bootstrap std (simple-evals')"
        "  95% CI (batchbench's)",
    ]
    for name in shown:
        if name not in metrics:
            continue
        n, std = metrics[f"{name}:n_samples"], metrics[f"{name}:bootstrap_std"]
        ci = summary["overall_ci95"] if name == "overall_score" else None
        own = f"  [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else ""
        lines.append(f"{name.ljust(width)}  {n:>5}  {metrics[name]:6.4f}  {std:27.4f}{own}")
    boot = summary["bootstrap"]
    lines.append(
        f"graded {summary['graded']} of {summary['examples']} examples  errors"
        f" {summary['errors']}  bootstrap {boot['samples']} resamples, seed {boot['seed']}"
    )
    return "\n".join(lines)
