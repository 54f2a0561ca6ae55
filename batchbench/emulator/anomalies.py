"""The real service's bad days, from reports (``../shared/spec/batch-api.md`` §4), as
fault modes a rehearsal can switch on: ``batchbench emulator --anomaly NAME[=RATE]``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

# name → (what happens, the rate or factor used when none is given)
ANOMALIES = {
    "status-zero": (
        "some successful lines land in the error file with status_code 0, while the"
        " counts say completed",
        0.2,
    ),
    "long-finalizing": ("finalizing lasts FACTOR times longer, with the counts at 100%", 20.0),
    "file-not-found": (
        "creating a batch right after its upload fails: 400 Cannot find file (a share of files)",
        1.0,
    ),
    "expired-500": ("an expired batch's unfinished lines are generic 500 rows", 1.0),
    "lagging-counts": ("request_counts lag the batch's real progress (a share of polls)", 0.5),
    "missing-lines": ("the output file leaves some finished lines out entirely", 0.2),
    "succeeded-before-file": (
        "Gemini: a job says SUCCEEDED a while before its responses file is named (a share)",
        1.0,
    ),
    "stuck-pending": ("Gemini: a job never leaves PENDING (a share of jobs)", 0.5),
}


SERVER_ERROR: dict[str, Any] = {
    "status_code": 500,
    "request_id": None,
    "body": {
        "error": {
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    },
}


def damage_results(
    out_lines: list[str], err_lines: list[str], roll: Callable[[str], bool]
) -> tuple[list[str], list[str]]:
    """status-zero and missing-lines, applied to a finished batch's result lines."""
    kept = []
    for line in out_lines:
        if roll("status-zero"):  # the counts still say this line completed
            record = json.loads(line)
            record["response"] = {"status_code": 0, "request_id": None, "body": None}
            err_lines = [*err_lines, json.dumps(record)]
        elif not roll("missing-lines"):
            kept.append(line)
    return kept, err_lines


def parse_anomaly(spec: str) -> tuple[str, float]:
    """``NAME`` or ``NAME=RATE`` → (name, rate); ValueError naming the known ones."""
    name, _, rate = spec.partition("=")
    if name not in ANOMALIES:
        raise ValueError(f"unknown anomaly {name!r} (known: {', '.join(ANOMALIES)})")
    try:
        value = float(rate) if rate else ANOMALIES[name][1]
    except ValueError:
        value = float("nan")
    if not value == value or value < 0 or (name != "long-finalizing" and value > 1):
        raise ValueError(f"anomaly {name}: {rate!r} is not a rate from 0 to 1")
    return name, value
