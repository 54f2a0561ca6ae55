"""A whole run at 250, 2,500 and 25,000 cases: the local work of batchbench as it grows.

A dataset of k × the public split (250 cases) is synthesised into a temporary folder —
each case copied with a new case id and new item ids, never committed — and each size
is graded end to end against the in-process emulator (zero latency, its simulated
models, in a process of its own so no command inherits its memory): ``run``
(answers and judges on the OpenAI path), ``status``,
``summarize``, a second run (another answer model) and ``compare`` of the two,
``report`` and ``export``. Each command is its own process, timed on the wall clock,
its peak RSS read from the kernel (``wait4``). Printed per size: each command's time
and peak RSS, the total, and the time per case at the largest size over that at the
smallest (the bar: at most 1.2, local work linear or better), plus the report's size.

Without the public split beside the checkout (``../shared/bedside-bench``, or
``--dataset``), the fixture dataset is the seed instead.

    .venv/bin/python benchmarks/scale_run.py [--sizes 250,2500,25000]

Each size also times two baselines in processes of their own, and prints the ratios
#64.11 keeps: ``status`` over ``json.loads`` of its journal's lines, ``compare`` and
``report`` over the reference's own plain-Python summaries of both runs' rows (up to
25,000 cases: its bootstrap takes minutes there, and hours beyond).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BASELINES = ("json.loads", "reference")
REFERENCE_UP_TO = 25_000
PUBLIC = REPO.parent / "shared" / "bedside-bench"
FIXTURE = REPO / "tests" / "fixtures" / "dataset"


def synthesise(seed: Path, factor: int, into: Path) -> int:
    """``factor`` copies of every case of ``seed``, new ids throughout; the cases made."""
    registry = json.loads((seed / "registry.json").read_text())
    made = 0
    for panel in registry["panels"]:
        source = seed / panel["path"]
        manifest = json.loads((source / "manifest.json").read_text())
        target = into / panel["path"]
        (target / "cases").mkdir(parents=True)
        ids = []
        for case_id in manifest["case_ids"]:
            case = json.loads((source / "cases" / f"{case_id}.json").read_text())
            for k in range(factor):
                new = hashlib.md5(f"{case_id}/{k}".encode()).hexdigest()
                prompt = case["prompt"] if k == 0 else f"{case['prompt']} (variant {k})"
                key = hashlib.md5(prompt.encode()).hexdigest()  # item ids: md5(prompt)_n
                copy = {**case, "case_id": new, "prompt": prompt}
                copy["rubric_items"] = [
                    {**item, "item_id": f"{key}_{n}"} for n, item in enumerate(case["rubric_items"])
                ]
                (target / "cases" / f"{new}.json").write_text(json.dumps(copy))
                ids.append(new)
        made += len(ids)
        (target / "manifest.json").write_text(
            json.dumps({**manifest, "case_count": len(ids), "case_ids": ids})
        )
        panel["n"] = len(ids)
    (into / "registry.json").write_text(json.dumps(registry))
    return made


# The baselines, each in a process of its own as the commands are (#64.11): what the
# plainest Python does with the same files. `status` against json.loads of its journal's
# lines; `compare` and `report` against the reference's own plain-Python summary (its
# random.Random bootstrap, tests/support/reference.py) of both runs' rows.
JOURNAL_BASELINE = "import json,sys\nfor line in open(sys.argv[1], 'rb'): json.loads(line)"
SUMMARY_BASELINE = (
    "import json,sys\nsys.path.insert(0, sys.argv[1])\n"
    "from support.reference import summarize\n"
    "for path in sys.argv[2:]:\n"
    "    summarize([json.loads(line) for line in open(path, 'rb')])"
)


def timed(argv: list[str], env: dict[str, str], python: bool = False) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of ``batchbench ARGV`` in its own process (with
    ``python``: of ``python ARGV``, a baseline)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, *argv] if python else [sys.executable, "-m", "batchbench", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"batchbench {' '.join(argv)} exited {code}: {err[-500:]}")
    return took, usage.ru_maxrss / 1024


def one_size(cases: int, seed: Path, env: dict[str, str], base: str) -> dict[str, tuple]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        factor = max(1, cases // 250)
        made = synthesise(seed, factor, root / "data")
        jobs = ["--jobs-dir", str(root / "jobs")]
        common = ["--judge-model", "sim-judge", "--dataset", str(root / "data"), *jobs]
        common += ["--base-url", base, "--poll-interval", "0.2"]
        steps = {
            "run": ["run", "--answer-model", "sim-answer", "--run", "a", *common],
            "status": ["status", "a", *jobs],
            "summarize": [
                "summarize",
                str(root / "jobs" / "a" / "results.jsonl"),
                "--dataset",
                str(root / "data"),
                "-o",
                str(root / "summary.json"),
            ],
            "second run": ["run", "--answer-model", "sim-answer-2", "--run", "b", *common],
            "compare": ["compare", "a", "b", *jobs],
            "report": ["report", "a", "b", "-o", str(root / "page.html"), *jobs],
            "export": ["export", "a", "b", "-o", str(root / "scores.parquet"), *jobs],
        }
        out = {name: timed(argv, env) for name, argv in steps.items()}
        journal = str(root / "jobs" / "a" / "journal.jsonl")
        rows = [str(root / "jobs" / r / "results.jsonl") for r in ("a", "b")]
        out["json.loads"] = timed(["-c", JOURNAL_BASELINE, journal], env, python=True)
        if made <= REFERENCE_UP_TO:  # 10,000 resamples in plain Python: 5 min at 25,000
            tests = str(REPO / "tests")
            out["reference"] = timed(["-c", SUMMARY_BASELINE, tests, *rows], env, python=True)
        out["_cases"] = (made, (root / "page.html").stat().st_size / 2**20)
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="250,2500,25000")
    ap.add_argument("--dataset", type=Path, default=PUBLIC if PUBLIC.is_dir() else FIXTURE)
    opts = ap.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",")]
    # The emulator in its own process: a command forked from a process holding it would
    # start with (and report) that process's peak memory.
    emulator = subprocess.Popen(
        [sys.executable, "-m", "batchbench", "emulator", "--port", "0", "--latency", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert emulator.stdout is not None
        url = emulator.stdout.readline().strip().rsplit(" ", 1)[-1]
        env = {**os.environ, "OPENAI_API_KEY": "rehearsal", "OPENAI_BASE_URL": ""}
        per_case = {}
        for size in sizes:
            found = one_size(size, opts.dataset, env, f"{url}/v1")
            made, report_mb = found.pop("_cases")
            total = sum(t for name, (t, _) in found.items() if name not in BASELINES)
            local = found["run"][0] + found["second run"][0]
            per_case[made] = total / made
            print(f"{made:,} cases (seed: {opts.dataset.name})")
            for name, (took, rss) in found.items():
                print(f"  {name:<12} {took:7.2f} s   peak RSS {rss:7.0f} MiB")
            print(
                f"  {'all':<12} {total:7.2f} s   (the two runs: {local:.2f} s); report"
                f" {report_mb:.1f} MB"
            )
            said = f"status {found['status'][0] / found['json.loads'][0]:.2f} x json.loads of"
            said += " its journal"
            if "reference" in found:
                ref = found["reference"][0]
                said += f"; compare {found['compare'][0] / ref:.2f} x and report"
                said += f" {found['report'][0] / ref:.2f} x the reference's plain-Python summaries"
            print(f"  ratios: {said}")
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)
    small, large = min(per_case), max(per_case)
    if small != large:
        ratio = per_case[large] / per_case[small]
        print(f"time per case at {large:,} over that at {small:,}: {ratio:.2f} (bar: <= 1.2)")


if __name__ == "__main__":
    main()
