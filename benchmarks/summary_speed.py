"""Summary speed: batchbench's vectorised bootstrap against the plain-Python baseline.

500 synthetic cases (10 benchmarks x 50), 10,000 resamples, seed 42, in one run.
Prints both times and the ratio, and checks that the two summaries are identical.

    python benchmarks/summary_speed.py [--cases-per-benchmark 50] [--samples 10000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # support.reference

from support import reference as plain_reference  # noqa: E402

from batchbench import summarize  # noqa: E402


def synthetic_rows(benchmarks: int, per_benchmark: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for b in range(benchmarks):
        for i in range(per_benchmark):
            rows.append(
                {
                    "case_id": f"case-{b}-{i}",
                    "benchmark": f"bench_{b:02d}",
                    "answer_model": "m",
                    "judge_model": "j",
                    "answer_temperature": 1,
                    "judge_temperature": 0,
                    "started_at": "2026-01-01T00:00:00+00:00",
                    "finished_at": "2026-01-01T00:00:01+00:00",
                    "score": round(rng.random(), 4),
                }
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--benchmarks", type=int, default=10)
    ap.add_argument("--cases-per-benchmark", type=int, default=50)
    ap.add_argument("--samples", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=3, help="best of N for batchbench")
    args = ap.parse_args()
    rows = synthetic_rows(args.benchmarks, args.cases_per_benchmark)

    t0 = time.perf_counter()
    plain = plain_reference.summarize(rows, samples=args.samples)
    t_plain = time.perf_counter() - t0

    t_fast = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        fast = summarize(rows, samples=args.samples)
        t_fast = min(t_fast, time.perf_counter() - t0)

    same = json.dumps(plain, indent=2) == json.dumps(fast, indent=2)
    n = args.benchmarks * args.cases_per_benchmark
    print(f"cases {n} ({args.benchmarks} x {args.cases_per_benchmark}), resamples {args.samples}")
    print(f"plain-python baseline  {t_plain:8.3f} s")
    print(f"batchbench summarize   {t_fast:8.3f} s  (best of {args.repeat})")
    print(f"speed-up               {t_plain / t_fast:8.1f} x")
    print(f"identical output       {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
