"""A 50,000-line batch through the emulator: time and peak memory.

Uploads 50,000 chat-completion lines with the openai SDK, waits for the batch
to validate, run and finalize, downloads the output, and prints the time of
each step and the process's peak resident memory (emulator and client share
the process, so the figure covers both).

    python benchmarks/emulator_50k.py [--lines 50000] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from openai import OpenAI

from batchbench.emulator import Emulator


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lines", type=int, default=50_000)
    ap.add_argument("--latency", type=float, default=1.0)
    args = ap.parse_args()
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    with Emulator(latency=args.latency) as emu:
        c = OpenAI(api_key="bench", base_url=emu.base_url, timeout=600)
        data = "".join(
            json.dumps(
                {
                    "custom_id": f"answer:{i:06d}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": "m",
                        "messages": [{"role": "user", "content": f"case {i} " * 20}],
                    },
                }
            )
            + "\n"
            for i in range(args.lines)
        ).encode()
        t0 = time.perf_counter()
        f = c.files.create(file=("in.jsonl", data), purpose="batch")
        t1 = time.perf_counter()
        b = c.batches.create(
            input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        while b.status not in ("completed", "failed", "expired", "cancelled"):
            time.sleep(0.05)
            b = c.batches.retrieve(b.id)
        t2 = time.perf_counter()
        out = c.files.content(b.output_file_id).read()
        t3 = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"lines {args.lines}, input {len(data) / 1e6:.1f} MB, output {len(out) / 1e6:.1f} MB")
    print(f"status {b.status}, completed {b.request_counts.completed}")
    print(
        f"upload {t1 - t0:.2f} s, batch (3 phases of {args.latency} s) {t2 - t1:.2f} s,"
        f" download {t3 - t2:.2f} s"
    )
    print(f"peak RSS {peak:.0f} MiB (process start {base_rss:.0f} MiB)")


if __name__ == "__main__":
    main()
