"""How fast ``status``, ``list`` and ``--help`` answer from a cold start.

A user checks on runs from a shell or from cron, so these commands must come
back at once and must not import a provider's SDK. Each command runs as its
own process (best of ``--repeat``) over a jobs folder of ``--runs`` copies of a
mid-flight run (the 0.1 fixture: 50 cases, 191 journal events each). The
baseline, measured in the same run, is the floor any typer CLI pays here: the
interpreter starting and importing typer with the pydantic its argument
parsing loads. Targets: ``status``/``list`` of one run under 0.3 s (#19); of
200 runs under 0.5 s (#23).

    .venv/bin/python benchmarks/cold_start.py            # 1 run and 200 runs
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "tests" / "fixtures" / "previous-run" / "run"
FLOOR = "import typer, typer._adapters"


def best(argv: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr}")
    return min(times)


def jobs_of(runs: int, folder: Path) -> Path:
    jobs = folder / f"jobs-{runs}"
    for i in range(runs):
        shutil.copytree(RUN, jobs / f"run-{i:03d}")
    return jobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, nargs="*", default=[1, 200])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cli = [sys.executable, "-m", "batchbench"]
    floor = best([sys.executable, "-c", FLOOR], args.repeat)
    print(f"floor (python + typer + pydantic)  {floor:6.3f} s")
    print(f"--help                             {best([*cli, '--help'], args.repeat):6.3f} s")
    with tempfile.TemporaryDirectory() as tmp:
        for runs in args.runs:
            jobs = str(jobs_of(runs, Path(tmp)))
            for name, argv in (
                ("status run-000", [*cli, "status", "run-000", "--jobs-dir", jobs]),
                (f"status ({runs} runs)", [*cli, "status", "--jobs-dir", jobs]),
                (f"list ({runs} runs)", [*cli, "list", "--jobs-dir", jobs]),
            ):
                if runs == 1 and name.startswith("status ("):
                    continue
                took = best(argv, args.repeat)
                print(f"{name:<34} {took:6.3f} s   {took / floor:4.1f} x the floor")


if __name__ == "__main__":
    main()
