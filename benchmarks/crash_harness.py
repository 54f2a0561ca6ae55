"""Kill a batchbench run at seeded moments and restart it: shared by the crash test and soak.

Moments are either a failpoint (``BATCHBENCH_FAILPOINT=name:n``, exactly where
a crash is most dangerous) or an external SIGKILL after a random delay.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FAILPOINTS = [
    "planned",  # request file written, plan not journaled
    "uploaded",  # file uploaded, id not journaled
    "created",  # batch created (billable), id not journaled
    "downloading",  # in the middle of a download
    "rows_half_written",  # half of a collection's result rows appended
    "rows_written",  # rows written, collection not journaled
    "journal_half_written",  # a journal line torn in half
]


def spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "batchbench", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        cwd=REPO,
    )


def last_stage(journal: Path) -> str:
    if journal.exists():
        for line in reversed(journal.read_text().splitlines()):
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if "sub" in event:
                return event["sub"].split("-")[0]
    return "answers"


def kill_and_restart(
    args: list[str], journal: Path, rng: random.Random, kills_wanted: int, env: dict[str, str]
) -> tuple[Counter, Counter]:
    """Start the run again and again, killing it, until enough kills or it completes."""
    kinds: Counter = Counter()
    stages: Counter = Counter()
    for _ in range(kills_wanted * 4):
        if sum(kinds.values()) >= kills_wanted:
            break
        mode = rng.choice([*FAILPOINTS, "external", "external"])
        if mode == "external":
            proc = spawn(args, env)
            time.sleep(rng.uniform(0.8, 2.5))  # after start-up, at any moment of the run
            proc.send_signal(signal.SIGKILL)
        else:
            proc = spawn(args, {**env, "BATCHBENCH_FAILPOINT": f"{mode}:{rng.randint(1, 2)}"})
        err = proc.communicate(timeout=300)[1] or ""
        rc = proc.returncode
        if rc == -signal.SIGKILL:
            kinds[mode] += 1
            stages[last_stage(journal)] += 1
        elif rc == 0:
            break
        elif rc != 3:
            raise AssertionError(f"run exited {rc}: {err}")
    return kinds, stages


def normalised(run_dir: Path) -> tuple[list[dict], dict]:
    """Results and summary without the wall-clock fields that differ between runs."""
    rows = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows.append(
            {
                k: v
                for k, v in row.items()
                if k not in ("started_at", "finished_at", "elapsed_seconds")
            }
        )
    summary = json.loads((run_dir / "results.summary.json").read_text())
    summary.pop("started_at")
    summary.pop("finished_at")
    return sorted(rows, key=lambda r: r["case_id"]), summary


def duplicates(ledger: dict) -> tuple[list[str], list[str]]:
    """Submissions created more than once and lines executed more than once.

    An OpenAI batch names its submission in its metadata; an Anthropic one carries
    none, so a request id held by two batches is a submission made twice.
    """
    subs = Counter(b["metadata"]["batchbench_sub"] for b in ledger["batches"] if b.get("metadata"))
    held = Counter(cid for b in ledger["batches"] for cid in b.get("custom_ids", ()))
    lines = Counter(e["custom_id"] for e in ledger["executions"])
    made_twice = [s for s, n in subs.items() if n > 1] + [c for c, n in held.items() if n > 1]
    return made_twice, [c for c, n in lines.items() if n > 1]
