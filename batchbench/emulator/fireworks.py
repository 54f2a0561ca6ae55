"""Fireworks batch inference, emulated: datasets, batch inference jobs, their clock.

As ``../shared/spec/provider-batch-apis.md`` §3 and the fireworks-ai SDK have it:
a dataset is created, then its JSONL uploaded in one request (150 MB at most);
its lines are ``{"custom_id", "body"}`` with no ``model``, ``method`` or
``url`` (the model and the shared ``inferenceParameters`` are the job's). A job
is created with an id the caller chooses (a second create of that id is a 409),
goes ``JOB_STATE_VALIDATING`` -> ``JOB_STATE_RUNNING`` (lines run progressively,
``jobProgress`` counting them) -> ``JOB_STATE_COMPLETED``, and writes its output
dataset: ``BIJOutputSet.jsonl`` (``{"custom_id", "response"}``) and
``error-data.jsonl`` (``{"custom_id", "error"}``), fetched through signed URLs
(``:getDownloadEndpoint``). A cancel ends it ``JOB_STATE_CANCELLED`` and the
window ``JOB_STATE_EXPIRED``, each keeping the rows that ran.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .anthropic import rfc3339
from .endpoints import check_body, shape
from .model import default_content
from .objects import ApiFailure, due_lines

if TYPE_CHECKING:
    from .store import Store

MAX_UPLOAD_BYTES = 150 * 1024 * 1024  # the single-request upload
RESULTS, ERRORS = "BIJOutputSet.jsonl", "error-data.jsonl"
ENDED = ("JOB_STATE_COMPLETED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")
GRPC = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
        404: "NOT_FOUND", 409: "ALREADY_EXISTS", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
        503: "UNAVAILABLE"}  # fmt: skip


def error_body(status: int, message: str) -> dict[str, Any]:
    """Fireworks' error envelope (gRPC-gateway style)."""
    return {"code": status, "message": message, "status": GRPC.get(status, "UNKNOWN")}


def merged(body: dict[str, Any], job: Job) -> dict[str, Any]:
    """What the model receives: the job's model and inference parameters, then the line."""
    params = job.parameters
    out: dict[str, Any] = {"model": job.model}
    if "maxTokens" in params:
        out["max_tokens"] = params["maxTokens"]
    for name, key in (("temperature", "temperature"), ("topP", "top_p"), ("topK", "top_k")):
        if name in params:
            out[key] = params[name]
    extra = params.get("extraBody")
    if extra:
        out.update(json.loads(extra))
    return {**out, **body}


def run_line(store: Store, line: Any, job: Job) -> dict[str, Any]:
    """One executed line: ``{"response": ...}`` or ``{"error": ...}``."""
    body = line.get("body") if isinstance(line, dict) else None
    if not isinstance(body, dict) or {"model", "method", "url"} & set(body):
        return {"error": error_body(400, "each line's body is a chat request without model,"
                                         " method or url (the job names the model)")}  # fmt: skip
    request = merged(body, job)
    refusal = check_body("/v1/chat/completions", request)
    if refusal is not None:
        return {"error": error_body(400, refusal["body"]["error"]["message"])}
    try:
        reply = store.responder(request) if store.responder else default_content(request)
    except Exception as exc:  # a broken responder is a 500 for that line
        return {"error": error_body(500, f"responder failed: {exc}")}
    request_id = f"{store.rng.getrandbits(64):016x}"
    if isinstance(reply, str):
        return {"response": shape("/v1/chat/completions", request, reply, request_id)}
    if isinstance(reply, dict) and isinstance(reply.get("status_code"), int):
        status, reply_body = reply["status_code"], reply.get("body")
        if 200 <= status < 300:
            return {"response": reply_body}
        if isinstance(reply_body, dict) and isinstance(reply_body.get("error"), dict):
            return {"error": {"code": status, **reply_body["error"]}}
        return {"error": error_body(status, json.dumps(reply_body))}
    raise TypeError(f"responder returned {type(reply).__name__}; expected str or dict")


@dataclass
class Dataset:
    name: str
    created: float
    display_name: str | None = None
    state: str = "UPLOADING"
    files: dict[str, bytes] = field(default_factory=dict)  # file name → bytes

    def obj(self) -> dict[str, Any]:
        return {"name": self.name, "displayName": self.display_name, "state": self.state,
                "createTime": rfc3339(self.created), "format": "CHAT",
                "exampleCount": str(sum(f.count(b"\n") for f in self.files.values()))}  # fmt: skip


@dataclass
class Job:
    name: str
    model: str
    input_dataset: str
    output_dataset: str
    parameters: dict[str, Any]
    display_name: str | None
    created: float
    seq: int
    state: str = "JOB_STATE_VALIDATING"
    lines: list[dict[str, Any]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    executed: int = 0
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    stamps: dict[str, float] = field(default_factory=dict)
    status_message: str | None = None

    def obj(self) -> dict[str, Any]:
        ok = sum(1 for r in self.results.values() if "response" in r)
        return {
            "name": self.name, "displayName": self.display_name, "model": self.model,
            "createTime": rfc3339(self.created),
            "updateTime": rfc3339(max(self.stamps.values(), default=self.created)),
            "state": self.state,
            "status": {"code": "OK" if self.status_message is None else "INVALID_ARGUMENT",
                       "message": self.status_message or ""},
            "inputDatasetId": self.input_dataset, "outputDatasetId": self.output_dataset,
            "inferenceParameters": self.parameters,
            "jobProgress": {
                "percent": int(100 * len(self.results) / len(self.lines)) if self.lines else 0,
                "totalInputRequests": len(self.lines),
                "totalProcessedRequests": len(self.results),
                "successfullyProcessedRequests": ok,
                "failedRequests": len(self.results) - ok,
                "outputRows": ok,
            },
        }  # fmt: skip


class FireworksBook:
    """The datasets and batch inference jobs the emulated service holds (the store's lock)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.datasets: dict[str, Dataset] = {}
        self.jobs: dict[str, Job] = {}
        self.made: list[Job] = []
        self.blobs: dict[str, tuple[str, str]] = {}  # signed-URL token → (dataset, file)

    # datasets -----------------------------------------------------------------
    def create_dataset(self, account: str, payload: Any) -> Dataset:
        dataset_id = payload.get("datasetId") if isinstance(payload, dict) else None
        if not isinstance(dataset_id, str) or not dataset_id:
            raise ApiFailure.fireworks(400, "datasetId is required")
        name = f"accounts/{account}/datasets/{dataset_id}"
        if name in self.datasets:
            raise ApiFailure.fireworks(409, f"dataset {name} already exists")
        meta = payload.get("dataset") or {}
        made = Dataset(name, time.time(), meta.get("displayName"))
        self.datasets[name] = made
        return made

    def dataset(self, name: str) -> Dataset:
        found = self.datasets.get(name)
        if found is None:
            raise ApiFailure.fireworks(404, f"dataset {name} not found")
        return found

    def upload(self, name: str, filename: str, data: bytes) -> Dataset:
        made = self.dataset(name)
        if made.state != "UPLOADING":
            raise ApiFailure.fireworks(400, f"dataset {name} is {made.state}: it takes no upload")
        if len(data) > MAX_UPLOAD_BYTES:
            raise ApiFailure.fireworks(400, "the file is over the 150 MB of a single upload;"
                                            " use the upload endpoint")  # fmt: skip
        made.files = {filename: data}
        made.state = "READY"
        return made

    def signed_urls(self, name: str, base: str) -> dict[str, str]:
        made = self.dataset(name)
        out = {}
        for filename in made.files:
            token = f"{self.store.rng.getrandbits(96):024x}"
            self.blobs[token] = (name, filename)
            out[filename] = f"{base}/_fireworks/blobs/{token}?X-Goog-Signature=emulated"
        return out

    def blob(self, token: str) -> bytes:
        name, filename = self.blobs.get(token, ("", ""))
        made = self.datasets.get(name)
        if made is None or filename not in made.files:
            raise ApiFailure.fireworks(403, "the signed URL is not valid")
        return made.files[filename]

    # jobs ---------------------------------------------------------------------
    def create_job(self, account: str, job_id: str | None, payload: Any) -> Job:
        if not isinstance(payload, dict):
            raise ApiFailure.fireworks(400, "the body must be a batch inference job")
        job_id = job_id or f"{self.store.rng.getrandbits(48):012x}"
        name = f"accounts/{account}/batchInferenceJobs/{job_id}"
        if name in self.jobs or any(j.name == name for j in self.made):
            raise ApiFailure.fireworks(409, f"batch inference job {name} already exists")
        model, source = payload.get("model"), payload.get("inputDatasetId")
        if not model or not source:
            raise ApiFailure.fireworks(400, "model and inputDatasetId are required")
        if self.dataset(source).state != "READY":
            raise ApiFailure.fireworks(400, f"dataset {source} is not READY")
        output = payload.get("outputDatasetId") or f"accounts/{account}/datasets/{job_id}-output"
        store = self.store
        store.seq += 1
        job = Job(name, model, source, output, dict(payload.get("inferenceParameters") or {}),
                  payload.get("displayName"), time.time(), store.seq)  # fmt: skip
        self.jobs[name] = job
        self.made.append(job)
        return job

    def job(self, name: str) -> Job:
        found = self.jobs.get(name)
        if found is None:
            raise ApiFailure.fireworks(404, f"batch inference job {name} not found")
        return found

    def page(self, account: str, size: int, token: str | None) -> tuple[list[Job], str | None]:
        ordered = sorted((j for j in self.jobs.values()
                          if j.name.startswith(f"accounts/{account}/")),
                         key=lambda j: j.seq, reverse=True)  # fmt: skip
        start = int(token) if token and token.isdigit() else 0
        return ordered[start : start + size], (
            str(start + size) if start + size < len(ordered) else None
        )

    def cancel(self, name: str) -> Job:
        job = self.job(name)
        if job.state in ENDED:
            raise ApiFailure.fireworks(400, f"batch inference job {name} has already ended")
        self._end(job, "JOB_STATE_CANCELLED", time.time())
        return job

    def delete(self, name: str) -> None:
        self.job(name)
        del self.jobs[name]

    # the clock ----------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        settings = self.store.settings
        for job in sorted(self.jobs.values(), key=lambda j: j.seq):
            deadline = job.created + settings.completion_window
            if job.state == "JOB_STATE_VALIDATING" and (
                flush or now >= job.created + settings.latency
            ):
                self._validate(job, min(now, deadline))
            if job.state == "JOB_STATE_RUNNING":
                start = job.stamps["running"]
                due = due_lines(len(job.lines), start, min(now, deadline), settings.latency, flush)
                while job.executed < due:
                    index = job.order[job.executed]
                    job.results[index] = run_line(self.store, job.lines[index], job)
                    self._ledger_line(job, index)
                    job.executed += 1
                if job.executed >= len(job.lines):
                    self._end(job, "JOB_STATE_COMPLETED", now)
            open_ = job.state in ("JOB_STATE_VALIDATING", "JOB_STATE_RUNNING")
            if open_ and now >= deadline and not flush:
                self._end(job, "JOB_STATE_EXPIRED", now)

    def _validate(self, job: Job, now: float) -> None:
        source = self.datasets.get(job.input_dataset)
        data = b"".join(source.files.values()) if source is not None else b""
        seen: set[str] = set()
        for n, raw in enumerate(data.splitlines(), 1):
            try:
                line = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return self._fail(job, now, f"line {n} of the input dataset is not JSON")
            cid = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(cid, str) or cid in seen:
                return self._fail(job, now, f"line {n}: custom_id missing or not unique")
            seen.add(cid)
            job.lines.append(line)
        if not job.lines:
            return self._fail(job, now, "the input dataset is empty")
        job.order = list(range(len(job.lines)))
        self.store.rng.shuffle(job.order)
        job.state = "JOB_STATE_RUNNING"
        job.stamps["running"] = now

    def _fail(self, job: Job, now: float, message: str) -> None:
        job.lines, job.status_message = [], message
        job.state = "JOB_STATE_FAILED"
        job.stamps["failed"] = now

    def _ledger_line(self, job: Job, index: int) -> None:
        result = job.results[index]
        status = 200 if "response" in result else int(result["error"].get("code") or 500)
        self.store.executions.append(
            {"batch_id": job.name, "custom_id": job.lines[index]["custom_id"],
             "status_code": status}
        )  # fmt: skip

    def _end(self, job: Job, state: str, now: float) -> None:
        job.state = state
        job.stamps[state] = now
        if not job.results:
            return
        ok, failed = [], []
        for index, result in job.results.items():
            cid = job.lines[index]["custom_id"]
            if "response" in result:
                if not self.store.roll("missing-lines"):
                    ok.append(json.dumps({"custom_id": cid, "response": result["response"]}))
            else:
                failed.append(json.dumps({"custom_id": cid, "error": result["error"]}))
        self.store.rng.shuffle(ok)
        if self.store.mangle is not None:
            ok = self.store.mangle("output", ok)
        out = Dataset(job.output_dataset, now, state="READY")
        out.files[RESULTS] = "".join(x + "\n" for x in ok).encode()
        if failed:
            out.files[ERRORS] = "".join(x + "\n" for x in failed).encode()
        self.datasets[out.name] = out

    def ledger(self) -> list[dict[str, Any]]:
        return [{"id": j.name, "provider": "fireworks", "status": j.state,
                 "custom_ids": [ln["custom_id"] for ln in j.lines],
                 "created_at": int(j.created)} for j in self.made]  # fmt: skip
