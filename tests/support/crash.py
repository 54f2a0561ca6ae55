"""Kill a batchbench run at seeded moments and restart it: the crash tests' tools.

Moments are either a failpoint (``BATCHBENCH_FAILPOINT=name:n``, exactly where
a crash is most dangerous) or an external SIGKILL after a random delay.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections import Counter
from pathlib import Path

from .cli import spawn

FAILPOINTS = [
    "planned",  # request file written, plan not journaled
    "uploaded",  # file uploaded, id not journaled
    "created",  # batch created (billable), id not journaled
    "downloading",  # in the middle of a download
    "rows_half_written",  # half of a collection's result rows appended
    "rows_written",  # rows written, collection not journaled
    "journal_half_written",  # a journal line torn in half
]


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
