"""The real services' bad days, from reports (``../shared/spec/batch-api.md`` §4 and
``provider-batch-apis.md``), as fault modes a rehearsal can switch on:
``batchbench emulator --anomaly NAME[=RATE]``.

Whether an anomaly strikes is a seeded decision about the object it strikes (a
batch, a line, a poll), never a draw from a shared stream: the same run meets
the same bad day however often it polls.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, TypeVar

from .core import Store

T = TypeVar("T")

# name → (what happens, the rate or factor used when none is given)
ANOMALIES: dict[str, tuple[str, float]] = {
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
    "stuck-pending": (
        "Gemini: a job never leaves PENDING; Bedrock: never leaves Scheduled (a share of jobs)",
        0.5,
    ),
    "ended-before-results": (
        "Anthropic: a batch says ended a while before its results_url is set; Fireworks: a job"
        " says COMPLETED before its output dataset exists; OpenAI and Azure: a batch says"
        " completed before its output and error files are named (a share)",
        1.0,
    ),
    "not-found-after-create": (
        "Anthropic: a batch answers 404 for a while right after its create and right after it"
        " ends, then is found again (anthropic-sdk-python#1432; a share of batches)",
        1.0,
    ),
    "wrong-keys": (
        "Gemini: some replies come back under another line's key (python-genai#1909; a share"
        " of jobs)",
        1.0,
    ),
    "misfiled": (
        "Gemini (the API and Vertex AI): a share of a job's lines get each other's replies,"
        " each moved one on among them (python-genai#1909; a share of lines)",
        0.05,
    ),
    "failed-while-running": (
        "Vertex AI: a running job reads FAILED (an internal error, nothing written) for its"
        " first two reads and the first half of its run, then runs on and ends as it would"
        " have (a share of jobs)",
        1.0,
    ),
    "failed-with-output": (
        "Bedrock: a job that ran ends Failed, the output of the records it ran written (a share)",
        1.0,
    ),
    "stuck-tail": (
        "OpenAI and Azure: a batch's last lines (this share of them, at least one) do not run"
        " while it is in progress: they wait for a cancel or the window's end, the"
        " lingering tail --tail-flex is for",
        0.05,
    ),
    "s3-slowdown": (
        "S3: a share of calls answer 503 SlowDown (Please reduce your request rate)",
        0.2,
    ),
    "s3-conflict": (
        "S3: a share of conditional creates answer 409 ConditionalRequestConflict and write"
        " nothing (two creates racing, as S3's user guide says)",
        0.3,
    ),
    "s3-lost-reply": (
        "S3: a share of writes take effect and then answer 500 InternalError (a put that"
        " timed out after it succeeded)",
        0.3,
    ),
    "snapshot-change": (
        "OpenAI-shaped services: a share of replies name another snapshot of the model"
        " asked for, and another system_fingerprint (the alias moved mid-run)",
        0.3,
    ),
    "empty-results": (
        "a batch ends with its counts saying every line succeeded, but its results file is"
        " empty (a share of batches)",
        1.0,
    ),
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


def served(store: Store, model: str, where: str) -> tuple[str, str]:
    """The snapshot and fingerprint a reply to ``model`` names: the model itself, with a
    fingerprint of it, unless the snapshot-change anomaly strikes this line."""
    if store.anomaly("snapshot-change", where):
        model = f"{model}-next"
    return model, "fp_" + hashlib.sha256(model.encode()).hexdigest()[:10]


def stuck_tail(store: Store, total: int) -> int:
    """How many of a batch's ``total`` lines the stuck-tail anomaly holds back (the last
    in its running order): its share of them, at least one (none of a batch of one line);
    0 when it is off."""
    rate = store.settings.anomalies.get("stuck-tail")
    if rate is None or total < 2:
        return 0
    return max(1, int(total * rate + 1e-9))


def missing_lines(store: Store, batch_id: str, ids: list[str]) -> set[str]:
    """The successful lines the missing-lines anomaly leaves out of a batch's results:
    some, never all (a file with none of them is ``empty-results``)."""
    gone = {cid for cid in ids if store.anomaly("missing-lines", f"{batch_id}/{cid}")}
    if ids and gone >= set(ids):
        gone.discard(ids[0])
    return gone


def misfiled(store: Store, job_id: str, replies: list[T]) -> list[T]:
    """The misfiled bad day on a job's replies, in line order: the struck lines (at least
    two, when any) each get the next struck line's reply. The service does it with no
    word: the counts say every line succeeded."""
    struck = [i for i in range(len(replies)) if store.anomaly("misfiled", f"{job_id}/{i}")]
    if len(struck) == 1 and len(replies) > 1:
        struck.append((struck[0] + 1) % len(replies))
    out = list(replies)
    for n, i in enumerate(struck):
        out[i] = replies[struck[(n + 1) % len(struck)]]
    return out


def damage_results(
    out_lines: list[str], err_lines: list[str], store: Store, batch_id: str
) -> tuple[list[str], list[str]]:
    """status-zero and missing-lines, on an ended batch's result lines."""
    records = [json.loads(line) for line in out_lines]
    gone = missing_lines(store, batch_id, [str(r.get("custom_id")) for r in records])
    kept = []
    for line, record in zip(out_lines, records):
        key = f"{batch_id}/{record.get('custom_id')}"
        if store.anomaly("status-zero", key):  # the counts still say this line completed
            record["response"] = {"status_code": 0, "request_id": None, "body": None}
            err_lines = [*err_lines, json.dumps(record)]
        elif str(record.get("custom_id")) not in gone:
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
