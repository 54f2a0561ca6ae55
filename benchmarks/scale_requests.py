"""Build and shard the request files of 100,000 cases: MB/s and peak memory.

Builds the judge stage (the larger one: prompt, a ~6,000-character answer and
the rubric lines per request) for synthetic cases with batchbench's own
request code, streams it into files under the Batch API's 200 MB / 50,000-line
limits (each fsynced and renamed into place), as a run does; then the same lines with a naive
baseline (``json.dumps`` per line, written sequentially, a new file whenever
the next line would not fit, each fsynced and renamed too: the same durability).
The synthetic cases are made before either clock starts; each side runs in its own
process, its peak RSS counted above what the cases hold; the two sides' files are
checked byte for byte.

    python benchmarks/scale_requests.py [--cases 100000] [--answer-chars 6000]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAX_BYTES = 200 * 1024 * 1024


def make_case(i: int) -> dict:
    import hashlib

    prompt = f"Case {i}: a 64-year-old with chest pain and dyspnoea. " * 8
    digest = hashlib.md5(prompt.encode()).hexdigest()
    items = [
        {
            "item_id": f"{digest}_{k}",
            "text": f"Criterion {k} for case {i}, stated fully.",
            "points": (k % 5) - 1 or 1,
        }
        for k in range(20)
    ]
    return {
        "case_id": f"{i:032x}",
        "benchmark": "b",
        "grading_method": "points_rubric",
        "prompt": prompt,
        "rubric_items": items,
        "split": "train",
    }


def batchbench_build(cases: list[dict], answer: str, folder: Path) -> tuple[int, int]:
    from batchbench.engine.requests import build_request, write_shards
    from batchbench.providers.openai_wire import OpenAIWire

    total = 0
    wire = OpenAIWire()

    def entries():
        nonlocal total
        for i, case in enumerate(cases):
            line = build_request(wire, "judges", case, "judge", 1, "r", answer=answer).line
            total += len(line)
            yield i, line, 0

    files = write_shards(
        entries(),
        lambda k: folder / f"judges-{k:04d}.jsonl",
        max_lines=50_000,
        max_bytes=MAX_BYTES,
    )
    return total, len(files)


def _durable(out, folder: Path, k: int) -> None:
    """A full file, as a run keeps one: fsynced, renamed into place."""
    out.flush()
    os.fsync(out.fileno())
    out.close()
    os.replace(folder / f".judges-{k:04d}.jsonl.tmp", folder / f"judges-{k:04d}.jsonl")


def baseline_build(cases: list[dict], answer: str, folder: Path) -> tuple[int, int]:
    from batchbench.bench import protocol  # the prompts' texts; the body is built here

    files, size, total, count = 0, 0, 0, 0
    out = open(folder / ".judges-0000.jsonl.tmp", "wb")  # noqa: SIM115 - reopened per file
    for case in cases:
        line = (
            json.dumps(
                {
                    "custom_id": f"r-j1-{case['case_id']}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": "judge",
                        "messages": [
                            {"role": "system", "content": protocol.JUDGE_SYSTEM_MESSAGE},
                            {
                                "role": "user",
                                "content": protocol.judge_user_message(case, answer),
                            },
                        ],
                        "response_format": {"type": "json_object"},
                        "max_completion_tokens": 5000,
                        "temperature": 0,
                    },
                },
                separators=(",", ":"),
                ensure_ascii=False,
            )
            + "\n"
        ).encode()
        if size + len(line) > MAX_BYTES or count == 50_000:
            _durable(out, folder, files)
            files += 1
            out = open(folder / f".judges-{files:04d}.jsonl.tmp", "wb")  # noqa: SIM115
            size = count = 0
        out.write(line)
        size += len(line)
        count += 1
        total += len(line)
    _durable(out, folder, files)
    return total, files + 1


def _rss() -> float:
    """The process's resident memory now, MiB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def child(which: str, n: int, chars: int, folder: Path) -> None:
    answer = ("The answer considers the differential diagnosis carefully. " * 200)[:chars]
    cases = [make_case(i) for i in range(n)]  # before the clock
    import batchbench.engine.requests  # noqa: F401  (imports, too, before the clock)

    held = _rss()
    start = time.perf_counter()
    fn = batchbench_build if which == "batchbench" else baseline_build
    size, files = fn(cases, answer, folder)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - held
    digest = hashlib.sha256()
    for k in range(files):
        digest.update((folder / f"judges-{k:04d}.jsonl").read_bytes())
    print(
        json.dumps(
            {
                "seconds": seconds,
                "bytes": size,
                "files": files,
                "peak": peak,
                "sha256": digest.hexdigest(),
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--answer-chars", type=int, default=6000)
    ap.add_argument("--child", choices=["batchbench", "baseline"])
    ap.add_argument("--folder", type=Path)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.cases, args.answer_chars, args.folder)
        return
    results = {}
    for which in ("batchbench", "baseline"):
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    which,
                    "--cases",
                    str(args.cases),
                    "--answer-chars",
                    str(args.answer_chars),
                    "--folder",
                    tmp,
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            results[which] = json.loads(out)
    for which, r in results.items():
        print(
            f"{which:<11} {r['bytes'] / 1e6:8.0f} MB in {r['files']} files  {r['seconds']:6.1f} s"
            f"  {r['bytes'] / 1e6 / r['seconds']:6.0f} MB/s"
            f"  peak RSS {r['peak']:6.0f} MiB above the cases"
        )
    same = results["batchbench"]["sha256"] == results["baseline"]["sha256"]
    print(f"files byte-identical: {same}")
    ratio = results["baseline"]["seconds"] / results["batchbench"]["seconds"]
    print(f"batchbench vs baseline: {ratio:.2f} x the speed")


if __name__ == "__main__":
    main()
