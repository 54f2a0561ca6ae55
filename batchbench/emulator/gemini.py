"""Gemini Batch Mode (the Developer API), emulated: files, batch jobs, their clock, results.

As the service runs them (``../shared/spec/provider-batch-apis.md`` §2): the
input is a JSONL file uploaded through the Files API (resumable upload), one
``{"key", "request"}`` a line with the protobuf (snake_case) field names the
batch file parser requires, or inline requests in the create call. A job is
``BATCH_STATE_PENDING`` while its input is checked, then ``RUNNING`` with its
lines run progressively, then ``SUCCEEDED`` with a responses file (or, inline,
``inlinedResponses`` in input order); a cancel ends it ``CANCELLED`` and the
window ``EXPIRED``, each keeping what ran. ``batchStats`` counts are int64
strings. Two known bad days are anomalies: ``succeeded-before-file`` (the
state says SUCCEEDED a while before the responses file is named) and
``stuck-pending`` (a job never leaves PENDING).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .anthropic import rfc3339
from .gemini_model import run_request
from .objects import ApiFailure, due_lines

if TYPE_CHECKING:
    from .store import Store

MAX_FILE_BYTES = 2 * 1024**3
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED")


@dataclass
class GeminiFile:
    name: str
    display_name: str | None
    mime_type: str
    data: bytes
    created: float

    def obj(self) -> dict[str, Any]:
        return {"name": self.name, "displayName": self.display_name, "mimeType": self.mime_type,
                "sizeBytes": str(len(self.data)), "createTime": rfc3339(self.created),
                "updateTime": rfc3339(self.created),
                "expirationTime": rfc3339(self.created + 48 * 3600),
                "state": "ACTIVE", "source": "UPLOADED"}  # fmt: skip


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
    stuck: bool = False

    def obj(self) -> dict[str, Any]:
        ok = sum(1 for r in self.results.values() if "response" in r)
        total = len(self.lines)
        meta: dict[str, Any] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
            "model": self.model, "displayName": self.display_name,
            "createTime": rfc3339(self.created),
            "updateTime": rfc3339(max(self.stamps.values(), default=self.created)),
            "batchStats": {"requestCount": str(total),
                           "pendingRequestCount": str(total - len(self.results)),
                           "successfulRequestCount": str(ok),
                           "failedRequestCount": str(len(self.results) - ok)},
            "state": f"BATCH_STATE_{self.state}",
        }  # fmt: skip
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
                    "GenerateContentBatchOutput", **output,
                }  # fmt: skip
        if self.error is not None:
            out["error"] = self.error
        return out


class GeminiBook:
    """The files and batch jobs the emulated Gemini service holds (the store's lock)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.files: dict[str, GeminiFile] = {}
        self.uploads: dict[str, dict[str, Any]] = {}  # upload id → the session
        self.jobs: dict[str, Job] = {}
        self.made: list[Job] = []

    def _id(self, prefix: str, n: int = 16) -> str:
        alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
        return prefix + "".join(self.store.rng.choice(alphabet) for _ in range(n))

    # files --------------------------------------------------------------------
    def start_upload(self, meta: Any, size: int, mime: str) -> str:
        if size > MAX_FILE_BYTES:
            raise ApiFailure.gemini(400, f"File too large: {size} bytes, the limit is 2 GB")
        file = (meta or {}).get("file") or {} if isinstance(meta, dict) else {}
        upload_id = self._id("", 24)
        display = file.get("display_name", file.get("displayName"))
        self.uploads[upload_id] = {"display": display, "mime": mime, "size": size, "data": b""}
        return upload_id

    def upload_chunk(
        self, upload_id: str, offset: int, chunk: bytes, final: bool
    ) -> GeminiFile | None:
        session = self.uploads.get(upload_id)
        if session is None:
            raise ApiFailure.gemini(404, "The upload session was not found.")
        if offset > len(session["data"]):
            raise ApiFailure.gemini(
                400, f"Invalid offset {offset}: {len(session['data'])} received"
            )
        session["data"] = session["data"][:offset] + chunk  # a chunk sent again replaces itself
        if not final:
            return None
        del self.uploads[upload_id]
        if len(session["data"]) != session["size"]:
            raise ApiFailure.gemini(400, "The upload ended before its declared length.")
        mime = {"jsonl": "application/jsonl"}.get(session["mime"], session["mime"])
        f = GeminiFile(
            self._id("files/", 12), session["display"], mime, session["data"], time.time()
        )
        self.files[f.name] = f
        return f

    def file(self, name: str) -> GeminiFile:
        found = self.files.get(name)
        if found is None:
            raise ApiFailure.gemini(404, f"Requested entity was not found: {name}")
        return found

    # jobs ---------------------------------------------------------------------
    def create(self, model: str, payload: Any) -> Job:
        batch = payload.get("batch") if isinstance(payload, dict) else None
        if not isinstance(batch, dict):
            raise ApiFailure.gemini(400, "Invalid JSON payload received. 'batch' is required.")
        source = batch.get("inputConfig") or batch.get("input_config") or {}
        file_name = source.get("fileName", source.get("file_name"))
        inline = (source.get("requests") or {}).get("requests")
        if (file_name is None) == (inline is None):
            raise ApiFailure.gemini(400, "inputConfig needs exactly one of fileName or requests")
        if file_name is not None:
            self.file(file_name)
        store = self.store
        store.seq += 1
        job = Job(self._id("batches/", 20), f"models/{model.removeprefix('models/')}",
                  batch.get("displayName", batch.get("display_name")), time.time(), store.seq,
                  file_name)  # fmt: skip
        if inline is not None:
            job.lines = [(str(i), r.get("request") if isinstance(r, dict) else r)
                         for i, r in enumerate(inline)]  # fmt: skip
        job.stuck = store.roll("stuck-pending")
        self.jobs[job.id] = job
        self.made.append(job)
        return job

    def job(self, name: str) -> Job:
        found = self.jobs.get(name)
        if found is None:
            raise ApiFailure.gemini(404, f"Requested entity was not found: {name}")
        return found

    def page(self, size: int, token: str | None) -> tuple[list[Job], str | None]:
        ordered = sorted(self.jobs.values(), key=lambda j: j.seq, reverse=True)
        try:
            start = int(token) if token else 0
        except ValueError:
            raise ApiFailure.gemini(400, f"Invalid page token {token!r}") from None
        chunk = ordered[start : start + size]
        return chunk, str(start + size) if start + size < len(ordered) else None

    def cancel(self, name: str) -> None:
        job = self.job(name)
        if job.state in ENDED:
            raise ApiFailure.gemini(400, f"Batch {name} has already ended ({job.state}).")
        self._end(job, "CANCELLED", time.time())

    def delete(self, name: str) -> None:
        job = self.job(name)
        if job.state not in ENDED:
            raise ApiFailure.gemini(400, f"Batch {name} is still running; cancel it first.")
        del self.jobs[name]

    # the clock ----------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        settings = self.store.settings
        for job in sorted(self.jobs.values(), key=lambda j: j.seq):
            if job.output_hidden_until is not None and (flush or now >= job.output_hidden_until):
                job.output_hidden_until = None  # the responses file is named at last
            deadline = job.created + settings.completion_window
            if (
                job.state == "PENDING"
                and not job.stuck
                and (flush or now >= job.created + settings.latency)
            ):
                self._validate(job, min(now, deadline))
            if job.state == "RUNNING":
                start = job.stamps["running"]
                due = due_lines(len(job.lines), start, min(now, deadline), settings.latency, flush)
                while job.executed < due:
                    self._execute(job, job.order[job.executed])
                    job.executed += 1
                if job.executed >= len(job.lines):
                    self._end(job, "SUCCEEDED", now)
            if job.state in ("PENDING", "RUNNING") and now >= deadline and not flush:
                self._end(job, "EXPIRED", now)

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
        job.order = list(range(len(job.lines)))
        self.store.rng.shuffle(job.order)
        job.state = "RUNNING"
        job.stamps["running"] = now

    def _execute(self, job: Job, index: int) -> None:
        key, request = job.lines[index]
        result = run_request(self.store, request, job.model, job.input_file is not None)
        job.results[index] = result
        status = 200 if "response" in result else int(result["error"].get("code") or 500)
        self.store.executions.append({"batch_id": job.id, "custom_id": key, "status_code": status})

    def _end(self, job: Job, state: str, now: float) -> None:
        job.state = state
        job.stamps[state.lower()] = now
        if job.input_file is None or not job.results:
            return
        roll = self.store.roll
        lines = [
            json.dumps({"key": job.lines[i][0], **result})
            for i, result in job.results.items()
            if not ("response" in result and roll("missing-lines"))
        ]
        self.store.rng.shuffle(lines)  # in any order
        if self.store.mangle is not None:
            lines = self.store.mangle("responses", lines)
        name = f"files/batch-{job.id.removeprefix('batches/')}"
        data = "".join(line + "\n" for line in lines).encode()
        self.files[name] = GeminiFile(name, None, "application/jsonl", data, now)
        job.output_file = name
        if state == "SUCCEEDED" and roll("succeeded-before-file"):
            job.output_hidden_until = now + 4 * max(self.store.settings.latency, 0.05)

    def ledger(self) -> list[dict[str, Any]]:
        return [{"id": j.id, "provider": "gemini", "status": j.state,
                 "display_name": j.display_name, "custom_ids": [k for k, _ in j.lines],
                 "created_at": int(j.created)} for j in self.made]  # fmt: skip
