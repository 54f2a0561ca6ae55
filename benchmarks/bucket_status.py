"""A team's bucket as fast as a local folder to read: ``status`` of a 25,000-case run and
``list`` of 20 runs, in the emulator's S3 face against the same runs in a local folder.

A dataset of k × the public split (``scale_run.synthesise``) is graded once locally
against the emulator (its own process, zero latency), with 19 more runs of 250 cases
beside it; every run is then moved into the emulator's bucket (``batchbench move``).
Each command is timed in its own process (best of ``--repeat``), on the local folder
(the baseline) and on the bucket; the ratio is bucket over local. Bars (#49.7): each
under 1 s on the bucket. Also printed: the requests the store received for one idle
``--no-wait`` tick of an unfinished run (the emulator's own count of S3 calls).

    .venv/bin/python benchmarks/bucket_status.py [--cases 25000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_run import FIXTURE, PUBLIC, synthesise  # noqa: E402


def bb(argv: list[str], env: dict[str, str], ok: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "batchbench", *argv], env=env, capture_output=True, text=True
    )
    took = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"batchbench {' '.join(argv)} exited {proc.returncode}: {proc.stderr}")
    return took


def s3_calls(url: str) -> int:
    """The calls the emulator's S3 face (with Bedrock's, unused here) has answered."""
    with urllib.request.urlopen(f"{url}/_emulator/calls") as reply:
        return sum(json.load(reply).get("bedrock", {}).values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=25_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dataset", type=Path, default=PUBLIC if PUBLIC.is_dir() else FIXTURE)
    opts = ap.parse_args()
    emulator = subprocess.Popen(
        [sys.executable, "-m", "batchbench", "emulator", "--port", "0", "--latency", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert emulator.stdout is not None
        url = emulator.stdout.readline().strip().rsplit(" ", 1)[-1]
        env = {
            **os.environ,
            "OPENAI_API_KEY": "rehearsal",
            "OPENAI_BASE_URL": "",
            "AWS_ENDPOINT_URL_S3": url,
            "AWS_ACCESS_KEY_ID": "bench-not-secret",
            "AWS_SECRET_ACCESS_KEY": "bench-not-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            big, small = root / "big", root / "small"
            made = synthesise(opts.dataset, max(1, opts.cases // 250), big)
            synthesise(opts.dataset, 1, small)
            local, bucket = str(root / "jobs"), "s3://batchbench/bench"
            common = ["--judge-model", "sim-judge", "--base-url", f"{url}/v1"]
            common += ["--poll-interval", "0.2", "--jobs-dir", local]
            print(f"grading {made:,} cases and 19 runs of 250 locally…", flush=True)
            bb(
                ["run", "--answer-model", "sim-a", "--run", "big", "--dataset", str(big), *common],
                env,
            )
            for i in range(19):
                name = f"small-{i:02d}"
                bb(
                    [
                        "run",
                        "--answer-model",
                        f"sim-{i}",
                        "--run",
                        name,
                        "--dataset",
                        str(small),
                        *common,
                    ],
                    env,
                )
            figures = {}
            for where in ("local", "bucket"):
                jobs = ["--jobs-dir", local if where == "local" else bucket]
                for name, argv in (("status", ["status", "big", *jobs]), ("list", ["list", *jobs])):
                    figures[(name, where)] = min(bb(argv, env) for _ in range(opts.repeat))
                if where == "local":
                    took = time.perf_counter()
                    for run in ["big", *(f"small-{i:02d}" for i in range(19))]:
                        bb(["move", run, "--jobs-dir", local, "--to", bucket], env)
                    print(f"moved 20 runs into {bucket} in {time.perf_counter() - took:.1f} s")
            print(f"{'command':<28} {'local':>8} {'bucket':>8} {'ratio':>6}")
            for name, label in (("status", f"status, {made:,} cases"), ("list", "list, 20 runs")):
                a, b = figures[(name, "local")], figures[(name, "bucket")]
                print(f"{label:<28} {a:7.2f}s {b:7.2f}s {b / a:5.1f}×  (bar: bucket < 1 s)")
            # an idle tick: a run whose batches never finish, ticked twice
            slow = ["--judge-model", "sim-judge", "--base-url", f"{url}/v1", "--jobs-dir", bucket]
            tick = ["run", "--answer-model", "sim-slow", "--run", "idle", "--dataset", str(small)]
            urllib.request.urlopen(
                urllib.request.Request(
                    f"{url}/_emulator/config", method="POST", data=b'{"latency": 100000}'
                )
            ).read()
            bb([*tick, *slow, "--no-wait"], env, ok=(3,))
            before = s3_calls(url)
            bb([*tick, *slow, "--no-wait"], env, ok=(3,))
            print(f"an idle --no-wait tick: {s3_calls(url) - before} requests to the store")
    finally:
        emulator.terminate()
        emulator.wait(timeout=30)


if __name__ == "__main__":
    main()
