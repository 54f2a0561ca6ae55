"""One command grading an OpenAI, a Claude and a Gemini model vs each alone.

Each provider's batches take their time at the service; a group should cost no
more than its slowest member, since one loop advances every run and each
service's list is walked once per tick. Against one emulator (a fixed latency
per batch phase, the same for every face), this times ``batchbench run`` for
each model alone, then for the three in one command (each its own process,
fresh jobs folder), and prints the group's time over the slowest single run.
The bar: about 1 (the issue says "about the time of the slowest single provider").

    .venv/bin/python benchmarks/mixed_providers.py [--cases 50] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from batchbench.emulator import Emulator

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO / "tests" / "fixtures" / "dataset"
MODELS = ("gpt-4o-mini", "claude-opus-5", "gemini-3-flash-preview")


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "batchbench", *argv], env=env, capture_output=True, text=True
    )
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"batchbench {' '.join(argv)} failed: {proc.stderr}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=50)
    ap.add_argument("--latency", type=float, default=1.0)
    opts = ap.parse_args()
    with Emulator(latency=opts.latency) as emu, tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "OPENAI_API_KEY": "k",
            "OPENAI_BASE_URL": emu.base_url,
            "ANTHROPIC_API_KEY": "k",
            "ANTHROPIC_BASE_URL": emu.url,
            "GEMINI_API_KEY": "k",
            "GOOGLE_GEMINI_BASE_URL": emu.url,
        }

        def run(models: tuple[str, ...], folder: str) -> float:
            picks = [a for m in models for a in ("--answer-model", m)]
            return timed(
                [
                    "run",
                    *picks,
                    "--judge-model",
                    "gpt-4.1",
                    "--dataset",
                    str(DATASET),
                    "--limit",
                    str(opts.cases),
                    "--poll-interval",
                    "0.2",
                    "--max-requests-per-batch",
                    "25",
                    "--jobs-dir",
                    str(Path(tmp) / folder),
                ],
                env,
            )

        alone = {m: run((m,), f"alone-{i}") for i, m in enumerate(MODELS)}
        group = run(MODELS, "group")
    for model, took in alone.items():
        print(f"{model:<26} alone   {took:6.2f} s")
    slowest = max(alone.values())
    print(f"{'all three, one command':<26}         {group:6.2f} s")
    total = sum(alone.values())
    print(f"group / slowest single: {group / slowest:.2f} x  (sum of singles: {total:.2f} s)")


if __name__ == "__main__":
    main()
