"""Compare 10 runs of 500 cases (10 benchmarks × 50): batchbench vs the plain definition.

batchbench compares 9 runs against the baseline with 10,000 resamples each; the
plain-Python implementation of the same definition (``tests/support/reference.py``)
does one pair, and its time is multiplied by 9. Both results are checked equal
for that pair. Target: the whole comparison in under 2 s.

    python benchmarks/compare_speed.py [--samples 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # support.reference


def make_sides(runs: int = 10, benchmarks: int = 10, per: int = 50):
    from batchbench.scores.compare import Side

    rng = random.Random(5)
    order = [f"c{b}-{i}" for b in range(benchmarks) for i in range(per)]
    bench = {c: c.split("-")[0] for c in order}
    sides = []
    for r in range(runs):
        skill = 0.3 + 0.04 * r
        scores = {c: round(min(1.0, max(0.0, rng.gauss(skill, 0.25))), 4) for c in order}
        summary = {
            "completed_cases": len(order),
            "errors": 0,
            "overall_macro_mean": skill,
            "overall_ci95": [0, 1],
        }
        sides.append(
            Side(
                f"run{r}",
                f"model-{r}",
                "judge",
                "bedside-bench-grading-v1",
                "d" * 64,
                order,
                bench,
                scores,
                summary,
            )
        )
    return sides


def main() -> None:
    from support import reference as plain_reference

    from batchbench.scores.compare import compare

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=10_000)
    args = ap.parse_args()
    sides = make_sides()
    start = time.perf_counter()
    result = compare(sides, samples=args.samples)
    ours = time.perf_counter() - start
    a, b = sides[1], sides[0]
    by = {}
    for side in (a, b):
        per: dict[str, list[float]] = {}
        for c in side.order:
            per.setdefault(side.benchmark_of[c], []).append(side.scores[c])
        by[side.name] = per
    start = time.perf_counter()
    plain = plain_reference.paired_difference(by[a.name], by[b.name], samples=args.samples)
    one = time.perf_counter() - start
    overall = result["comparisons"][0]["overall"]
    # p_holm is adjusted over the call's family of 9 comparisons; a single pair has none.
    same = all(
        json.dumps(overall[k]) == json.dumps(v)
        for k, v in plain["overall"].items()
        if k != "p_holm"
    )
    print(f"10 runs x 500 cases, {args.samples:,} resamples, 9 comparisons")
    verdict = "met" if ours < 2 else "NOT met"
    print(f"batchbench                 {ours:6.2f} s   (target < 2 s: {verdict})")
    print(f"plain Python, 9 x one pair {9 * one:6.2f} s   ({one:.2f} s a pair)")
    print(f"speed-up                   {9 * one / ours:6.1f} x")
    print(f"identical (first pair)     {same}   (all but p_holm, a family's)")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
