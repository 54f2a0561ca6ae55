"""The gemini service's book, emulated: its records and their clock (the face,
:mod:`.gemini`, serves them over HTTP)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..anomalies import misfiled, missing_lines
from ..core import Store, due_lines, last_line, rfc3339
from .gemini_model import STATUS_NAMES, run_request

MAX_FILE_BYTES = 2 * 1024**3
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")
V = r"(v1|v1beta)"


def error_body(status: int, message: str) -> dict[str, Any]:
    """Google's error envelope."""
    return {
        "error": {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}
    }


@dataclass
class GeminiFile:
    name: str
    display_name: str | None
    mime_type: str
    data: bytes
    created: float
    generated: bool = False  # a responses file (downloadable), not an upload
    job: str | None = None  # the job whose responses it holds (empty-results withholds them)

    def obj(self, base: str) -> dict[str, Any]:
        out = {
            "name": self.name,
            "displayName": self.display_name,
            "mimeType": self.mime_type,
            "sizeBytes": str(len(self.data)),
            "createTime": rfc3339(self.created),
            "updateTime": rfc3339(self.created),
            "expirationTime": rfc3339(self.created + 48 * 3600),
            "state": "ACTIVE",
            "source": "GENERATED" if self.generated else "UPLOADED",
        }
        if self.generated:
            out["downloadUri"] = f"{base}/download/v1beta/{self.name}:download?alt=media"
        return out


@dataclass
class Job:
    id: str
    model: str
    display_name: str | None
    created: float
    seq: int
    input_file: str | None  # the input's file name, or None for inline requests
    lines: list[tuple[str, Any]] = field(default_factory=list)  # (key, request)
    order: list[int] = field(default_factory=list)
    state: str = "PENDING"
    executed: int = 0
    results: dict[int, dict[str, Any]] = field(default_factory=dict)  # line index → result
    stamps: dict[str, float] = field(default_factory=dict)
    output_file: str | None = None
    output_hidden_until: float | None = None  # succeeded-before-file
    error: dict[str, Any] | None = None
    deleted: bool = False  # gone from the API, but still running if it was

    def obj(self) -> dict[str, Any]:
        ok = sum(1 for r in self.results.values() if "response" in r)
        total = len(self.lines)
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": self.model,
            "displayName": self.display_name,
            "createTime": rfc3339(self.created),
            "updateTime": rfc3339(max(self.stamps.values(), default=self.created)),
            "batchStats": {
                "requestCount": str(total),
                "pendingRequestCount": str(total - len(self.results)),
                "successfulRequestCount": str(ok),
                "failedRequestCount": str(len(self.results) - ok),
            },
            "state": f"BATCH_STATE_{self.state}",
        }
        meta["inputConfig"] = {"fileName": self.input_file} if self.input_file else {"requests": {}}
        out: dict[str, Any] = {"name": self.id, "metadata": meta, "done": self.state in ENDED}
        if self.state in ENDED:
            meta["endTime"] = rfc3339(self.stamps.get(self.state.lower()))
        if self.state in ENDED and self.output_hidden_until is None:
            if self.input_file is None:
                inlined = [self.results.get(i, {}) for i in range(len(self.lines))]
                output: dict[str, Any] = {"inlinedResponses": {"inlinedResponses": inlined}}
            else:
                output = {"responsesFile": self.output_file} if self.output_file else {}
            if output:
                meta["output"] = output
                out["response"] = {
                    "@type": "type.googleapis.com/google.ai.generativelanguage.v1main."
                    "GenerateContentBatchOutput",
                    **output,
                }
        if self.error is not None:
            out["error"] = self.error
        return out


class GeminiBook:
    """What the emulated gemini service holds, and how its batches move with the clock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.files: dict[str, GeminiFile] = {}
        self.uploads: dict[str, dict[str, Any]] = {}  # upload id → the session
        self.jobs: dict[str, Job] = {}
        self.made: list[Job] = []
        self.seq = 0

    # the clock --------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        settings = self.store.settings
        for job in sorted(self.jobs.values(), key=lambda j: j.seq):
            if job.output_hidden_until is not None and (flush or now >= job.output_hidden_until):
                job.output_hidden_until = None  # the responses file is named at last
            deadline = job.created + settings.completion_window
            stuck = self.store.anomaly("stuck-pending", job.id)
            if (
                job.state == "PENDING"
                and not stuck
                and (flush or now >= job.created + settings.latency)
            ):
                self._validate(job, now if flush else min(job.created + settings.latency, deadline))
            if job.state == "RUNNING":
                start = job.stamps["running"]
                run = self.store.run_seconds("gemini", job.id)  # its recorded turnaround
                due = due_lines(len(job.lines), start, min(now, deadline), run, flush)
                while job.executed < due:
                    self._execute(job, job.order[job.executed])
                    job.executed += 1
                if job.executed >= len(job.lines):
                    last = last_line(start, len(job.lines), run)
                    self._end(job, "SUCCEEDED", now if flush else min(now, last))
            if job.state in ("PENDING", "RUNNING") and now >= deadline and not flush:
                self._end(job, "EXPIRED", deadline)

    def _validate(self, job: Job, now: float) -> None:
        if job.input_file is not None:
            f = self.files.get(job.input_file)
            problem = None if f is not None else "The input file was deleted."
            seen: set[str] = set()
            for n, raw in enumerate((f.data if f else b"").splitlines(), 1):
                try:
                    line = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    problem = f"Invalid JSON on line {n} of the input file."
                    break
                key = line.get("key") if isinstance(line, dict) else None
                if not isinstance(key, str) or "request" not in line:
                    problem = f"Line {n} of the input file needs a string key and a request."
                    break
                if key in seen:
                    problem = f"Duplicate key {key!r} on line {n} of the input file."
                    break
                seen.add(key)
                job.lines.append((key, line["request"]))
            if problem is not None or not job.lines:
                job.lines = []
                job.error = {"code": 400, "message": problem or "The input file is empty."}
                job.state = "FAILED"
                job.stamps["failed"] = now
                return
        job.order = self.store.decide.shuffled(range(len(job.lines)), job.id)
        job.state = "RUNNING"
        job.stamps["running"] = now

    def _execute(self, job: Job, index: int) -> None:
        key, request = job.lines[index]
        result = run_request(
            self.store, request, job.model, job.input_file is not None, f"{job.id}/{key}"
        )
        job.results[index] = result
        status = 200 if "response" in result else int(result["error"].get("code") or 500)
        self.store.executed("gemini", job.id, key, status, result.get("response"))

    def _end(self, job: Job, state: str, now: float) -> None:
        job.state = state
        job.stamps[state.lower()] = now
        if job.input_file is None or not job.results:
            return
        store = self.store
        keyed = [(job.lines[i][0], result) for i, result in job.results.items()]
        if store.anomaly("wrong-keys", job.id) and len(keyed) > 1:
            # python-genai#1909: replies under another line's key (here, each moved one on).
            keys = [k for k, _ in keyed]
            keyed = [(keys[(n + 1) % len(keys)], result) for n, (_, result) in enumerate(keyed)]
        keyed = list(zip([k for k, _ in keyed], misfiled(store, job.id, [r for _, r in keyed])))
        gone = missing_lines(store, job.id, [k for k, r in keyed if "response" in r])
        lines = [json.dumps({"key": key, **result}) for key, result in keyed if key not in gone]
        lines = store.mangled("responses", store.decide.shuffled(lines, job.id))  # in any order
        name = f"files/batch-{job.id.removeprefix('batches/')}"
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
        self.files[name] = GeminiFile(
            name, None, "application/jsonl", data, now, generated=True, job=job.id
        )
        job.output_file = name
        if state == "SUCCEEDED" and store.anomaly("succeeded-before-file", job.id):
            job.output_hidden_until = now + 4 * max(store.settings.latency, 0.05)
