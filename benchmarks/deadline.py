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

    .venv/bin/python benchmarks/deadline.py [--runs 1000] [--workers 2] [--other-runs 200]

Beside them, runs whose answers go to another service, the same scenarios: Gemini (its
flex tier, at the batch price), and Bedrock and Anthropic (no flex tier: with
--allow-list-price, on demand at the list price): how often those meet the deadline, and
what their fallback costs over all-batch.
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


BEDROCK_MODEL = "bedrock/anthropic.claude-opus-5-v1:0"
ANSWERS = {  # venue → its answer model (the judges stay on OpenAI)
    "openai": MODELS[0],
    "bedrock": BEDROCK_MODEL,
    "gemini": "gemini-3.1-pro-preview",
    "anthropic": "claude-opus-5",
}
LISTED = {"bedrock", "anthropic"}  # no flex tier: --allow-list-price
BEDROCK_ENV = {  # the emulator's Bedrock face, as boto3 reaches it
    "AWS_ACCESS_KEY_ID": "AKIDBENCH",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": "/dev/null",
    "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    "BEDROCK_ROLE_ARN": "arn:aws:iam::123456789012:role/bench",
    "BATCHBENCH_S3_URI": "s3://batchbench/runs",
    "BATCHBENCH_BEDROCK_MIN_RECORDS": "1",
}


def _env(venue: str, url: str) -> dict[str, str]:
    """The answers' service reached at the emulator's face (the judges': OpenAI)."""
    env = {"OPENAI_API_KEY": "sk-bench"}
    if venue == "bedrock":
        env |= BEDROCK_ENV | {
            "AWS_ENDPOINT_URL_S3": url,
            "AWS_ENDPOINT_URL_BEDROCK": url,
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": url,
        }
    elif venue == "gemini":
        env |= {"GEMINI_API_KEY": "bench", "GOOGLE_GEMINI_BASE_URL": url}
    elif venue == "anthropic":
        env |= {"ANTHROPIC_API_KEY": "sk-ant-bench", "ANTHROPIC_BASE_URL": url}
    return env


def _listed(e: dict) -> bool:
    """An on-demand call, at the list price (Bedrock's InvokeModel, Anthropic's Messages)."""
    return e["provider"] == "bedrock-runtime" or (
        e["provider"] == "anthropic" and e["batch_id"] == "sync"
    )


def one(seed: int, scenario: str, venue: str = "openai") -> dict[str, float | bool]:
    """One simulated run: met, the price paid, the all-batch and list prices. ``venue``:
    where the answers go — OpenAI or Gemini (flex: the batch price), or Bedrock or
    Anthropic (no flex tier: --allow-list-price, on demand at the list price)."""
    from typer.testing import CliRunner

    from batchbench.cli import app
    from batchbench.emulator import Emulator
    from batchbench.emulator.clock import FakeClock

    clock = FakeClock(1_800_000_000.0 + seed)
    answers = ANSWERS[venue]
    with (
        tempfile.TemporaryDirectory() as tmp,
        Emulator(
            clock=clock,
            seed=seed,
            models=(*MODELS, *ANSWERS.values()),
            turnaround={venue: SCENARIOS[scenario], "openai": SCENARIOS[scenario]},
        ) as emu,
    ):
        emu.store.settings.flex_seconds = FLEX_SECONDS
        emu.store.settings.bedrock_min_records = 1
        prices = Path(tmp) / "prices.json"
        table = dict.fromkeys((*MODELS, *ANSWERS.values()), PRICE)
        prices.write_text(json.dumps({"batch_discount": 0.5, "models": table}))
        argv = ["run", "--answer-model", answers, "--judge-model", MODELS[1]]
        argv += ["--dataset", str(FIXTURE), "--limit", "6", "--jobs-dir", f"{tmp}/jobs"]
        argv += ["--base-url", emu.base_url, "--poll-interval", "120", "--deadline", DEADLINE]
        argv += ["--pricing", str(prices), "--no-canary"]
        argv += ["--allow-list-price"] if venue in LISTED else []
        env = _env(venue, emu.base_urls[venue])
        start = clock.time()
        result = CliRunner().invoke(app, argv, env=env, obj={"clock": clock})
        ended = clock.time()
        executions = [e for e in emu.ledger()["executions"] if e["status_code"] == 200]

    def usd(lines: list[dict]) -> float:
        billed = [e["billed"] for e in lines]
        return (
            sum(b["input"] * PRICE["input"] + b["output"] * PRICE["output"] for b in billed) / 1e6
        )

    listed = [e for e in executions if _listed(e)]  # on demand
    return {
        "met": result.exit_code == 0 and ended <= start + 6 * HOUR,
        # batch and flex lines at the batch price, on-demand calls at the list price
        "paid": usd(executions) * 0.5 + usd(listed) * 0.5,
        "all_batch": usd(executions) * 0.5,  # each request ran once (the tests prove it)
        "list": usd(executions),
        "fallback": sum(1 for e in executions if e["batch_id"] == "flex") + len(listed),
        "listed": len(listed),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--other-runs", type=int, default=200, help="on each other service")
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
    flexed = sum(1 for r in results if r["fallback"])
    others = {}
    for venue in ("gemini", "bedrock", "anthropic"):
        aside = [(seed, names[seed % len(names)], venue) for seed in range(opts.other_runs)]
        with ProcessPoolExecutor(opts.workers) as pool:
            others[venue] = list(pool.map(one, *zip(*aside), chunksize=8)) if aside else []
    for scenario in names:
        n = sum(1 for _, s in jobs if s == scenario)
        print(f"{scenario} ({SCENARIOS[scenario]} s): deadline met in {by[scenario]} of {n}")
    print(f"runs that finished some lines on flex: {flexed} of {len(results)}")
    for venue, done in others.items():
        if not done:
            continue
        how = "--allow-list-price, on demand" if venue in LISTED else "its flex tier"
        o_met = sum(bool(r["met"]) for r in done)
        o_paid = sum(float(r["paid"]) for r in done)
        o_all = sum(float(r["all_batch"]) for r in done)
        o_fell = sum(1 for r in done if r["fallback"])
        print(
            f"answers on {venue} ({how}): deadline met in {o_met} of {len(done)};"
            f" {o_fell} finished some lines by the fallback; price {o_paid / o_all:.3f} x"
            " the all-batch price"
        )
    print(f"paid ${paid:,.4f}; all-batch ${all_batch:,.4f}; list price ${listed:,.4f}")
    print(
        f"deadline met in {met} of {len(results)} simulated runs;"
        f" price {paid / all_batch:.3f} x the all-batch price"
    )


if __name__ == "__main__":
    main()
