"""``run --deadline``: how often the deadline is met, and at what price against all-batch.

Each simulated run is a real ``batchbench run --deadline`` (in this process, on a fake
clock) against a fresh emulator whose OpenAI batches take a time drawn, per batch and
seeded, from a recorded turnaround (p50/p90/p99 seconds, a heavy tail to 4x p99 past
it): the scenarios below; each flex call takes five seconds, and a fifth of them are
refused for want of capacity first. The forecast starts from its prior (no history in a fresh
jobs folder), so it is not told the distribution it faces.

Per run: the deadline is met when the run exits 0 with the emulator's clock at or before
it. The price is what the emulator executed (its ledger's billed tokens: batch lines and
flex calls, both at the batch price on OpenAI) over the all-batch price of the same
requests (each request once, at the batch price): above 1 only if something ran twice.
The list price is said beside it, for the receipt.

    .venv/bin/python benchmarks/deadline.py [--runs 1000] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HOUR = 3600.0
REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "dataset"
# Recorded turnarounds (seconds: p50, p90, p99), heavy-tailed: the scenarios a run faces.
SCENARIOS = {
    "quick": [0.5 * HOUR, 2 * HOUR, 6 * HOUR],
    "typical": [2 * HOUR, 8 * HOUR, 20 * HOUR],
    "slow day": [6 * HOUR, 18 * HOUR, 30 * HOUR],
}
DEADLINE = "+6h"
PRICE = {"input": 2.0, "output": 8.0}  # USD per 1M tokens at list price, both models
MODELS = ("ans-model", "judge-model")
FLEX_SECONDS = 5.0  # each flex call (OpenAI: "slower response times"); a fifth refused 429


def one(seed: int, scenario: str) -> dict[str, float | bool]:
    """One simulated run: met, the price paid, the all-batch and list prices."""
    from typer.testing import CliRunner

    from batchbench.cli import app
    from batchbench.emulator import Emulator
    from batchbench.emulator.clock import FakeClock

    clock = FakeClock(1_800_000_000.0 + seed)
    with (
        tempfile.TemporaryDirectory() as tmp,
        Emulator(
            clock=clock,
            seed=seed,
            models=MODELS,
            turnaround={"openai": SCENARIOS[scenario]},
        ) as emu,
    ):
        emu.store.settings.flex_seconds = FLEX_SECONDS
        prices = Path(tmp) / "prices.json"
        prices.write_text(json.dumps({"models": dict.fromkeys(MODELS, PRICE)}))
        argv = ["run", "--answer-model", MODELS[0], "--judge-model", MODELS[1]]
        argv += ["--dataset", str(FIXTURE), "--limit", "6", "--jobs-dir", f"{tmp}/jobs"]
        argv += ["--base-url", emu.base_url, "--poll-interval", "120", "--deadline", DEADLINE]
        argv += ["--pricing", str(prices), "--no-canary"]
        start = clock.time()
        result = CliRunner().invoke(
            app, argv, env={"OPENAI_API_KEY": "sk-bench"}, obj={"clock": clock}
        )
        ended = clock.time()
        executions = emu.ledger()["executions"]
    billed = [e["billed"] for e in executions if e["status_code"] == 200]
    paid = sum(b["input"] * PRICE["input"] + b["output"] * PRICE["output"] for b in billed)
    once: dict[str, dict[str, int]] = {}
    for e in executions:
        if e["status_code"] == 200:
            once.setdefault(e["custom_id"], e["billed"])
    single = sum(b["input"] * PRICE["input"] + b["output"] * PRICE["output"] for b in once.values())
    return {
        "met": result.exit_code == 0 and ended <= start + 6 * HOUR,
        "paid": paid * 0.5 / 1e6,  # batch and flex: the batch price
        "all_batch": single * 0.5 / 1e6,
        "list": single / 1e6,
        "flex": sum(1 for e in executions if e["batch_id"] == "flex"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    opts = ap.parse_args()
    names = list(SCENARIOS)
    jobs = [(seed, names[seed % len(names)]) for seed in range(opts.runs)]
    with ProcessPoolExecutor(opts.workers) as pool:
        results = list(pool.map(one, *zip(*jobs), chunksize=8))
    by = Counter[str]()
    for (_, scenario), r in zip(jobs, results):
        by[scenario] += bool(r["met"])
    met = sum(bool(r["met"]) for r in results)
    paid = sum(float(r["paid"]) for r in results)
    all_batch = sum(float(r["all_batch"]) for r in results)
    listed = sum(float(r["list"]) for r in results)
    flexed = sum(1 for r in results if r["flex"])
    for scenario in names:
        n = sum(1 for _, s in jobs if s == scenario)
        print(f"{scenario} ({SCENARIOS[scenario]} s): deadline met in {by[scenario]} of {n}")
    print(f"runs that finished some lines on flex: {flexed} of {len(results)}")
    print(f"paid ${paid:,.4f}; all-batch ${all_batch:,.4f}; list price ${listed:,.4f}")
    print(
        f"deadline met in {met} of {len(results)} simulated runs;"
        f" price {paid / all_batch:.3f} x the all-batch price"
    )


if __name__ == "__main__":
    main()
