"""The long crash test: many seeded kills over a whole 250-case run, paid once.

Runs an uninterrupted reference run, then the same run killed again and again
(failpoints and external SIGKILLs), finishes it, and prints: kills survived by
kind and stage, faults injected, wall time, and duplicates found in the
emulator's ledger (batches created twice, lines executed twice) — which must
be zero — and whether results and summary equal the reference's.

    python benchmarks/crash_soak.py [--kills 60] [--limit 250] [--cap 5] [--fault-rate 0.1]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from crash_harness import REPO, duplicates, kill_and_restart, normalised  # noqa: E402

from batchbench.emulator import Emulator  # noqa: E402

ENV = {"OPENAI_API_KEY": "soak-key", "OPENAI_BASE_URL": ""}


def args_for(emu: Emulator, jobs: Path, dataset: str, limit: int, cap: int) -> list[str]:
    return [
        "run",
        "--answer-model",
        "ans",
        "--judge-model",
        "judge",
        "--jobs-dir",
        str(jobs),
        "--dataset",
        dataset,
        "--base-url",
        emu.base_url,
        "--poll-interval",
        "0.05",
        "--limit",
        str(limit),
        "--max-requests-per-batch",
        str(cap),
    ]


def finish(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "batchbench", *args],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **ENV},
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise SystemExit(f"run failed: {proc.stderr}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kills", type=int, default=60)
    ap.add_argument("--limit", type=int, default=250)
    ap.add_argument("--cap", type=int, default=5)
    ap.add_argument("--fault-rate", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--dataset", default=str(REPO.parent / "shared" / "bedside-bench"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        with Emulator(latency=0.2) as ref:
            started = time.perf_counter()
            finish(args_for(ref, tmp_path / "ref", args.dataset, args.limit, args.cap))
            ref_time = time.perf_counter() - started
        expected = normalised(tmp_path / "ref" / "ans")
        kinds: Counter = Counter()
        stages: Counter = Counter()
        runs = dup_subs = dup_lines = 0
        equal = True
        faults: Counter = Counter()
        started = time.perf_counter()
        while sum(kinds.values()) < args.kills:
            with Emulator(
                latency=0.2,
                fault_rate=args.fault_rate,
                truncate_rate=args.fault_rate,
                seed=args.seed + runs,
            ) as emu:
                jobs = tmp_path / f"crash{runs}"
                run_args = args_for(emu, jobs, args.dataset, args.limit, args.cap)
                k, st = kill_and_restart(
                    run_args,
                    jobs / "ans" / "journal.jsonl",
                    rng,
                    args.kills - sum(kinds.values()),
                    ENV,
                )
                kinds += k
                stages += st
                finish(run_args)
                subs, lines = duplicates(emu.ledger())
                dup_subs += len(subs)
                dup_lines += len(lines)
                equal = equal and normalised(jobs / "ans") == expected
                faults += Counter(emu.ledger()["faults"])
            runs += 1
        soak_time = time.perf_counter() - started
    print(f"cases {args.limit}, shard cap {args.cap}, fault rate {args.fault_rate}")
    print(f"uninterrupted run           {ref_time:7.1f} s")
    print(f"killed runs                 {runs} (restarted until complete), {soak_time:.1f} s")
    print(f"kills survived              {sum(kinds.values())}")
    print(f"  by kind                   {dict(sorted(kinds.items()))}")
    print(f"  by stage                  {dict(sorted(stages.items()))}")
    print(f"faults injected             {dict(sorted(faults.items()))}")
    print(f"batches created twice       {dup_subs}")
    print(f"lines executed twice        {dup_lines}")
    print(f"results and summary equal   {equal}")
    if dup_subs or dup_lines or not equal:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
