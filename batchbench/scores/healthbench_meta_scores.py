"""HealthBench's meta-evaluation figures, as simple-evals' ``healthbench_meta_eval.py``
computes them: each line's metrics (the physicians' labels, the share positive, the
grader's verdict — each also under its category), aggregated as ``common.aggregate_results``
does (mean, ``:n_samples``, ``:bootstrap_std``); then the grader's pairwise agreement with
every physician's label — precision and recall per class, their F1, the balanced mean of
the two classes, overall and per category — and the same for each physician against the
others. The run's ``score`` is ``pairwise_model_f1_balanced``.

The one departure, as for HealthBench's own scores: the bootstrap draws are seeded. The
95 % interval of the score printed beside it (resampling lines) is batchbench's own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

BOOTSTRAP_SAMPLES = 1000
SEED = 42
INDEX = "pairwise_{who}_{metric}_{pred}"
CLUSTER = "{cluster}: {index}"


def sample_metrics(labels: Sequence[bool], category: str, predicted: bool) -> dict[str, float]:
    """One line's metrics, plain and under its category (``grade_sample``)."""
    metrics = {
        "num_physician_labels": float(len(labels)),
        "percent_physician_pos": sum(labels) / len(labels),
        "model_predicted_positive": float(predicted),
    }
    return {**metrics, **{f"{category}: {k}": v for k, v in metrics.items()}}


def rater_metrics(
    own: Sequence[bool], others: Sequence[Sequence[bool]], clusters: Sequence[str], who: str
) -> dict[str, dict[str, float | None]]:
    """``compute_metrics_for_rater_by_class``: one rater's labels against the others' on
    the same lines, precision per own label and recall per other's, their F1 and the
    balanced mean of the classes, overall and per cluster."""
    lists: dict[str, list[bool]] = defaultdict(list)
    for mine, theirs, cluster in zip(own, others, clusters, strict=True):
        for other in theirs:
            agree = mine == other
            for metric, pred in (("precision", mine), ("recall", other)):
                index = INDEX.format(who=who, metric=metric, pred="pos" if pred else "neg")
                lists[index].append(agree)
                lists[CLUSTER.format(cluster=cluster, index=index)].append(agree)
    metrics: dict[str, dict[str, float | None]] = {
        k: {"n": len(v), "value": sum(v) / len(v) if v else None} for k, v in lists.items()
    }
    f1 = {
        k.replace("precision", "f1"): _f1(metrics[k], metrics[k.replace("precision", "recall")])
        for k in metrics
        if "precision" in k and k.replace("precision", "recall") in metrics
    }
    metrics.update(f1)
    balanced = {
        k.replace("pos", "balanced"): _balanced(metrics[k], metrics[k.replace("pos", "neg")])
        for k in metrics
        if "pos" in k and k.replace("pos", "neg") in metrics
    }
    metrics.update(balanced)
    return metrics


def _f1(p: Mapping[str, float | None], r: Mapping[str, float | None]) -> dict[str, float | None]:
    pn, rn = float(p["n"] or 0), float(r["n"] or 0)
    pv, rv = p["value"], r["value"]
    if pv is None or rv is None:
        return {"n": pn + rn, "value": None}
    tp = pv * pn
    if pv == 0 and rv == 0:
        return {"n": pn + rn - tp, "value": 0.0}
    return {"n": pn + rn - tp, "value": 2 * pv * rv / (pv + rv)}


def _balanced(
    pos: Mapping[str, float | None], neg: Mapping[str, float | None]
) -> dict[str, float | None]:
    n = float(pos["n"] or 0) + float(neg["n"] or 0)
    if pos["value"] is None or neg["value"] is None:
        return {"n": n, "value": None}
    return {"n": n, "value": (pos["value"] + neg["value"]) / 2}


def _aggregate(per_line: Sequence[Mapping[str, float]], rng: np.random.Generator) -> dict[str, Any]:
    """``aggregate_results`` with ``("mean", "n_samples", "bootstrap_std")``."""
    values: dict[str, list[float]] = {}
    for metrics in per_line:
        for name, value in metrics.items():
            values.setdefault(name, []).append(value)
    out: dict[str, float] = {}
    for name, found in values.items():
        array = np.asarray(found, dtype=float)
        out[name] = float(array.mean())
        out[f"{name}:n_samples"] = len(found)
        picks = rng.integers(0, len(array), size=(BOOTSTRAP_SAMPLES, len(array)))
        out[f"{name}:bootstrap_std"] = float(np.std(array[picks].mean(axis=1)))
    return out


def _balanced_f1(own: Sequence[bool], others: Sequence[Sequence[bool]]) -> float | None:
    found = rater_metrics(own, others, [""] * len(own), "model")
    return found.get("pairwise_model_f1_balanced", {}).get("value")


def own_interval(
    own: Sequence[bool], others: Sequence[Sequence[bool]], samples: int, seed: int
) -> list[float]:
    """batchbench's 95 % percentile interval of the balanced F1, resampling lines."""
    rng = np.random.default_rng(seed + 1)
    found = []
    for _ in range(samples):
        picks = rng.integers(0, len(own), size=len(own))
        value = _balanced_f1([own[i] for i in picks], [others[i] for i in picks])
        if value is not None:
            found.append(value)
    if not found:
        return [float("nan"), float("nan")]
    low, high = np.percentile(found, [2.5, 97.5])
    return [float(low), float(high)]


def run_summary(
    rows: Sequence[Mapping[str, Any]],
    case_ids: Sequence[str],
    head: Mapping[str, Any],
    samples: int = 200,
    seed: int = SEED,
) -> dict[str, Any]:
    """A meta-eval run's summary: simple-evals' ``score`` and ``metrics`` over the lines
    graded (each line's last row), the agreement metrics in ``metadata``; batchbench's
    counts and interval (``samples`` resamples of lines) beside them."""
    last: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        last[str(row["case_id"])] = row
    graded = [last[c] for c in case_ids if c in last and "error" not in last[c]]
    own = [bool(r["criteria_met"]) for r in graded]
    labels = [list(r["binary_labels"]) for r in graded]
    clusters = [str(r["category"]) for r in graded]
    rng = np.random.default_rng(seed)
    per_line = [sample_metrics(ls, c, p) for ls, c, p in zip(labels, clusters, own)]
    metrics = _aggregate([{**m, "score": m["model_predicted_positive"]} for m in per_line], rng)
    metrics.pop("score", None)
    model = rater_metrics(own, labels, clusters, "model")
    metrics.update({k: v["value"] for k, v in model.items() if v["value"] is not None})
    physicians: dict[str, tuple[list[bool], list[list[bool]], list[str]]] = defaultdict(
        lambda: ([], [], [])
    )
    for row in graded:
        said, ids = list(row["binary_labels"]), list(row["anonymized_physician_ids"])
        for i, (label, rater) in enumerate(zip(said, ids)):
            physicians[str(rater)][0].append(label)
            physicians[str(rater)][1].append(said[:i] + said[i + 1 :])
            physicians[str(rater)][2].append(str(row["category"]))
    agreement: dict[str, dict[str, Any]] = defaultdict(dict)
    for rater, (mine, theirs, cats) in physicians.items():
        for k, v in rater_metrics(mine, theirs, cats, "physician").items():
            agreement[k][rater] = v
    score = metrics.get("pairwise_model_f1_balanced", float("nan"))
    ci95 = own_interval(own, labels, samples, seed) if graded else [float("nan")] * 2
    errors = sum(1 for c in case_ids if c in last and "error" in last[c])
    return {
        **head,
        "score": score,
        "metrics": metrics,
        "metadata": {
            "model_agreement_metrics": model,
            "physician_agreement_metric_lists": dict(agreement),
        },
        "examples": len(case_ids),
        "graded": len(graded),
        "errors": errors,
        "bootstrap": {"samples": BOOTSTRAP_SAMPLES, "seed": seed, "rng": "numpy default_rng"},
        "benchmarks": {"healthbench-meta": {"n": len(graded), "mean": score, "ci95": ci95}},
        "overall_macro_mean": score,
        "overall_ci95": ci95,
        "completed_cases": len(graded),
    }


def summary_text(summary: Mapping[str, Any]) -> str:
    """The summary as the run prints it: the grader against the physicians, overall and
    per category (simple-evals' pairwise figures), with the counts."""
    m = summary["metrics"]
    ci = summary["overall_ci95"]
    lines = [
        f"grader {summary['judge_model']} against physicians  protocol"
        f" {summary['protocol_version']}",
        f"dataset {summary['dataset_sha256']}",
        f"balanced F1 (simple-evals' score) {summary['score']:.4f}  95% CI"
        f" [{ci[0]:.4f}, {ci[1]:.4f}] (ours)",
    ]
    for name in ("precision", "recall", "f1"):
        pos, neg = m.get(f"pairwise_model_{name}_pos"), m.get(f"pairwise_model_{name}_neg")
        lines.append(f"  {name:<9} pos {_f(pos)}  neg {_f(neg)}")
    cats = sorted(k.split(": ", 1)[0] for k in m if k.endswith(": pairwise_model_f1_balanced"))
    for cat in cats:
        lines.append(f"  {cat}: balanced F1 {_f(m[f'{cat}: pairwise_model_f1_balanced'])}")
    boot = summary["bootstrap"]
    lines.append(
        f"graded {summary['graded']} of {summary['examples']} lines  errors {summary['errors']}"
        f"  bootstrap {boot['samples']} resamples, seed {boot['seed']}"
    )
    return "\n".join(lines)


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
