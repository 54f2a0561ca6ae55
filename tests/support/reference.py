"""A plain-Python implementation of the BedsideBench scoring and summary protocol.

Written from the specification, one case and one pick at a time, with the
standard library only. It is the baseline the benchmarks measure batchbench
against, and the tests use it as an independent second implementation: it
shares no code with ``batchbench``.
"""

from __future__ import annotations

import math
import random
import statistics

CLASS = {3: 9, 2: 8, 1: 7, 0: 5, -1: 3, -2: 2, -3: 1}
WEIGHT = {1: 72, 9: 72, 2: 24, 8: 24, 3: 3, 7: 3}


def score_case(case, matched_ids):
    items = case["rubric_items"]
    hit = [it["item_id"] in matched_ids for it in items]
    if case["grading_method"] == "points_rubric":
        den = sum(max(float(it["points"]), 0.0) for it in items)
        num = sum(float(it["points"]) for it, m in zip(items, hit) if m)
        raw = num / den
        return min(1.0, max(0.0, raw)), {
            "matched_signed_points": num,
            "available_positive_points": den,
            "raw_score": raw,
        }
    classes = [CLASS.get(int(it["points"]), 5) for it in items]
    weights = [WEIGHT.get(c, 1) for c in classes]
    tp = sum(w for w, c, m in zip(weights, classes, hit) if m and c >= 7)
    pos = sum(w for w, c in zip(weights, classes) if c >= 7)
    got = sum(w for w, m in zip(weights, hit) if m)
    recall = tp / pos if pos else 0.0
    precision = tp / got if got else None
    if precision is None or precision + recall == 0:
        f1 = 0.0
    else:
        f1 = 2 * precision * recall / (precision + recall)
    severe = any(
        (it["points"] == 3 and not m) or (it["points"] == -3 and m) for it, m in zip(items, hit)
    )
    return round(f1, 4), {
        "f1_weighted": round(f1, 4),
        "precision_weighted": None if precision is None else round(precision, 4),
        "recall_weighted": round(recall, 4),
        "severe_rate": 1.0 if severe else 0.0,
    }


def _percentile(values, p):
    v = sorted(values)
    pos = (len(v) - 1) * p
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return v[lo]
    f = pos - lo
    return v[lo] * (1 - f) + v[hi] * f


def _resample_mean(rng, scores):
    n = len(scores)
    total = 0
    for _ in range(n):
        total += scores[rng.randrange(n)]
    return total / n


def summarize(rows, samples=10000, seed=42, expected_case_ids=None, dataset_sha256=None):
    if expected_case_ids is not None:
        wanted = set(expected_case_ids)
        rows = [r for r in rows if r["case_id"] in wanted]
    last, last_ok = {}, {}
    for r in rows:
        last[r["case_id"]] = r
        if "score" in r and "error" not in r:
            last_ok[r["case_id"]] = r
    ok_rows = [r for r in rows if "score" in r and "error" not in r]
    by_bench = {}
    for r in last_ok.values():
        by_bench.setdefault(r["benchmark"], []).append(r["score"])
    names = sorted(by_bench)
    means = {b: statistics.fmean(by_bench[b]) for b in names}
    rng = random.Random(seed)
    cis = {}
    for b in names:
        vals = [_resample_mean(rng, by_bench[b]) for _ in range(samples)]
        cis[b] = [_percentile(vals, 0.025), _percentile(vals, 0.975)]
    overall = []
    for _ in range(samples):
        overall.append(statistics.fmean([_resample_mean(rng, by_bench[b]) for b in names]))
    models_a = {r["answer_model"] for r in ok_rows}
    models_j = {r["judge_model"] for r in ok_rows}
    temps = {(r.get("answer_temperature"), r.get("judge_temperature")) for r in ok_rows}
    temp = next(iter(temps)) if len(temps) == 1 else (None, None)
    started = [r["started_at"] for r in rows if "started_at" in r]
    finished = [r["finished_at"] for r in rows if "finished_at" in r]
    return {
        "protocol_version": "bedside-bench-grading-v1",
        "dataset_sha256": dataset_sha256,
        "answer_model": next(iter(models_a)) if len(models_a) == 1 else None,
        "judge_model": next(iter(models_j)) if len(models_j) == 1 else None,
        "answer_temperature": temp[0],
        "judge_temperature": temp[1],
        "judge_passes_per_answer": 1,
        "started_at": min(started) if started else None,
        "finished_at": max(finished) if finished else None,
        "completed_cases": len(last_ok),
        "errors": sum(1 for r in last.values() if "error" in r),
        "overall_macro_mean": statistics.fmean(means.values()),
        "overall_ci95": [_percentile(overall, 0.025), _percentile(overall, 0.975)],
        "benchmarks": {b: {"n": len(by_bench[b]), "mean": means[b], "ci95": cis[b]} for b in names},
        "bootstrap_samples": samples,
        "bootstrap_seed": seed,
    }


def paired_difference(a_by_bench, b_by_bench, samples=10000, seed=42):
    """The compare issue's paired bootstrap, written plainly: ``{bench: [a scores]}`` and
    ``{bench: [b scores]}`` of the paired cases, in registry order, same keys; with the
    statistics issue's standard errors, MDE (80 % power, 5 % level) and p-values."""
    rng = random.Random(seed)
    names = sorted(a_by_bench)
    out = {"benchmarks": {}}

    def stats(mean_a, mean_b, diffs, se, ties):
        at_most = sum(1 for d in diffs if d <= 0)
        at_least = sum(1 for d in diffs if d >= 0)
        return {
            "mean_a": mean_a,
            "mean_b": mean_b,
            "diff": mean_a - mean_b,
            "ci95": [_percentile(diffs, 0.025), _percentile(diffs, 0.975)],
            # undefined (null) when every paired case ties: no resample can differ
            "share_a_better": None if ties else sum(1 for d in diffs if d > 0) / len(diffs),
            "se_diff": se,
            "mde80": None if se is None else 2.801585218112968 * se,
            "p_value": min(1.0, 2 * min(at_most, at_least) / samples),
            "p_holm": None,  # set over a family, overall only
            "non_inferior": None,  # only with a margin
        }

    ses = []
    for b in names:
        a, bb = a_by_bench[b], b_by_bench[b]
        n = len(a)
        diffs = []
        for _ in range(samples):
            picks = [rng.randrange(n) for _ in range(n)]
            sum_a = sum_b = 0
            for p in picks:
                sum_a += a[p]
                sum_b += bb[p]
            diffs.append(sum_a / n - sum_b / n)
        per_case = [x - y for x, y in zip(a, bb)]
        sd = statistics.stdev(per_case) if n >= 2 else None
        se = None if sd is None else sd / math.sqrt(n)
        ses.append(se)
        out["benchmarks"][b] = {
            "n": n,
            **stats(statistics.fmean(a), statistics.fmean(bb), diffs, se, a == bb),
            "sd_diff": sd,
            "small_n": n < 20,
        }
    diffs = []
    for _ in range(samples):
        means_a, means_b = [], []
        for b in names:
            a, bb = a_by_bench[b], b_by_bench[b]
            n = len(a)
            picks = [rng.randrange(n) for _ in range(n)]
            sum_a = sum_b = 0
            for p in picks:
                sum_a += a[p]
                sum_b += bb[p]
            means_a.append(sum_a / n)
            means_b.append(sum_b / n)
        diffs.append(statistics.fmean(means_a) - statistics.fmean(means_b))
    total = 0.0
    for se in ses:
        total = None if total is None or se is None else total + se * se
    n = sum(len(a_by_bench[b]) for b in names)
    se = None if total is None else math.sqrt(total) / len(names)
    out["overall"] = {
        "n": n,
        **stats(
            statistics.fmean([statistics.fmean(a_by_bench[b]) for b in names]),
            statistics.fmean([statistics.fmean(b_by_bench[b]) for b in names]),
            diffs,
            se,
            all(a_by_bench[b] == b_by_bench[b] for b in names),
        ),
        # the benchmarks' rule on the overall's cases, and no verdict without a spread
        "small_n": n < 20 or se is None,
    }
    return out


def holm(p_values):
    """Holm's step-down adjustment, plainly: sort, multiply by m - rank, keep monotone."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [None] * m, 0
    for rank, i in enumerate(order):
        running = max(running, min(1, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
