"""The fireworks service's book, emulated: its records and their clock (the face,
:mod:`.fireworks`, serves them over HTTP)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..anomalies import missing_lines
from ..core import HEX, Store, due_lines, last_line, rfc3339
from ..endpoints import check_body, shape

MAX_UPLOAD_BYTES = 150 * 1024 * 1024  # the single-request upload
RESULTS, ERRORS = "BIJOutputSet.jsonl", "error-data.jsonl"
ENDED = ("JOB_STATE_COMPLETED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")
GRPC = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
A = r"^/v1/accounts/([^/:]+)"


def error_body(status: int, message: str) -> dict[str, Any]:
    """Fireworks' error envelope (gRPC-gateway style)."""
    return {"code": status, "message": message, "status": GRPC.get(status, "UNKNOWN")}


@dataclass
class Dataset:
    name: str
    created: float
    display_name: str | None = None
    state: str = "UPLOADING"
    files: dict[str, bytes] = field(default_factory=dict)  # file name → bytes
    expected: dict[str, int] = field(default_factory=dict)  # signed uploads: name → size
    job: str | None = None  # the job whose output it is (empty-results withholds it)

    def obj(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "displayName": self.display_name,
            "state": self.state,
            "createTime": rfc3339(self.created),
            "format": "CHAT",
            "exampleCount": str(sum(f.count(b"\n") for f in self.files.values())),
        }


@dataclass
class Job:
    name: str
    model: str
    input_dataset: str
    output_dataset: str
    parameters: dict[str, Any]
    display_name: str
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
            "name": self.name,
            "displayName": self.display_name,
            "model": self.model,
            "createTime": rfc3339(self.created),
            "updateTime": rfc3339(max(self.stamps.values(), default=self.created)),
            "state": self.state,
            "status": {
                "code": "OK" if self.status_message is None else "INVALID_ARGUMENT",
                "message": self.status_message or "",
            },
            "inputDatasetId": self.input_dataset,
            "outputDatasetId": self.output_dataset,
            "inferenceParameters": self.parameters,
            "jobProgress": {
                "percent": int(100 * len(self.results) / len(self.lines)) if self.lines else 0,
                "totalInputRequests": len(self.lines),
                "totalProcessedRequests": len(self.results),
                "successfullyProcessedRequests": ok,
                "failedRequests": len(self.results) - ok,
                "outputRows": ok,
            },
        }


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


class FireworksBook:
    """What the emulated fireworks service holds, and how its batches move with the clock."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.datasets: dict[str, Dataset] = {}
        self.jobs: dict[str, Job] = {}
        self.made: list[Job] = []
        self.seq = 0
        self.blobs: dict[str, tuple[str, str]] = {}  # signed-URL token → (dataset, file)
        self.late: list[tuple[float, Dataset]] = []  # output datasets not there yet (anomaly)

    # the clock --------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        settings = self.store.settings
        for when, dataset in [d for d in self.late if flush or now >= d[0]]:
            self.late.remove((when, dataset))
            self.datasets[dataset.name] = dataset  # the output dataset exists at last
        for job in sorted(self.jobs.values(), key=lambda j: j.seq):
            deadline = job.created + settings.completion_window
            lat = settings.latency
            if job.state == "JOB_STATE_VALIDATING" and (flush or now >= job.created + lat):
                self._validate(job, now if flush else min(job.created + lat, deadline))
            if job.state == "JOB_STATE_RUNNING":
                start = job.stamps["running"]
                due = due_lines(len(job.lines), start, min(now, deadline), lat, flush)
                while job.executed < due:
                    self._execute(job, job.order[job.executed])
                    job.executed += 1
                if job.executed >= len(job.lines):
                    last = last_line(start, len(job.lines), lat)
                    self._end(job, "JOB_STATE_COMPLETED", now if flush else min(now, last))
            if (
                job.state in ("JOB_STATE_VALIDATING", "JOB_STATE_RUNNING")
                and now >= deadline
                and not flush
            ):
                self._end(job, "JOB_STATE_EXPIRED", deadline)
            for state, stamp, end in (
                ("JOB_STATE_CANCELLING", "cancelling", "JOB_STATE_CANCELLED"),
                ("JOB_STATE_DELETING", "deleting", ""),
            ):
                if job.state == state and (flush or now >= job.stamps[stamp] + lat):
                    if end:
                        self._end(job, end, now if flush else job.stamps[stamp] + lat)
                    else:
                        del self.jobs[job.name]

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
        job.order = self.store.decide.shuffled(range(len(job.lines)), job.name)
        job.state = "JOB_STATE_RUNNING"
        job.stamps["running"] = now

    def _fail(self, job: Job, now: float, message: str) -> None:
        job.lines, job.status_message = [], message
        job.state = "JOB_STATE_FAILED"
        job.stamps["failed"] = now

    def _execute(self, job: Job, index: int) -> None:
        line = job.lines[index]
        result = self._run(job, line, f"{job.name}/{line['custom_id']}")
        job.results[index] = result
        status = 200 if "response" in result else int(result["error"].get("code") or 500)
        self.store.executed(
            "fireworks", job.name, line["custom_id"], status, result.get("response")
        )

    def _run(self, job: Job, line: Any, key: str) -> dict[str, Any]:
        """One executed line: ``{"response": ...}`` or ``{"error": ...}``."""
        body = line.get("body") if isinstance(line, dict) else None
        if not isinstance(body, dict) or {"model", "method", "url"} & set(body):
            return {
                "error": error_body(
                    400,
                    "each line's body is a chat request without model,"
                    " method or url (the job names the model)",
                )
            }
        request = merged(body, job)
        refusal = check_body("/v1/chat/completions", request)
        if refusal is not None:
            return {"error": error_body(400, refusal["body"]["error"]["message"])}
        try:
            reply = self.store.model.reply(request, request, key, self.store.settings.judge_noise)
        except Exception as exc:  # a broken responder is a 500 for that line
            return {"error": error_body(500, f"responder failed: {exc}")}
        if isinstance(reply, str):
            request_id = self.store.decide.token(HEX, 16)
            return {
                "response": shape(
                    "/v1/chat/completions", request, reply, request_id, self.store.now()
                )
            }
        if isinstance(reply, dict) and isinstance(reply.get("status_code"), int):
            status, reply_body = reply["status_code"], reply.get("body")
            if 200 <= status < 300:
                return {"response": reply_body}
            if isinstance(reply_body, dict) and isinstance(reply_body.get("error"), dict):
                detail = {k: v for k, v in reply_body["error"].items() if k != "code"}
                return {"error": {"code": status, **detail}}  # the line's HTTP status
            return {"error": error_body(status, json.dumps(reply_body))}
        return {"error": error_body(500, f"responder returned {type(reply).__name__}")}

    def _end(self, job: Job, state: str, now: float) -> None:
        job.state = state
        job.stamps[state] = now
        if not job.results:
            return
        store = self.store
        ok, failed = [], []
        answered = [job.lines[i]["custom_id"] for i, r in job.results.items() if "response" in r]
        gone = missing_lines(store, job.name, answered)
        for index, result in job.results.items():
            cid = job.lines[index]["custom_id"]
            if "response" in result:
                if cid not in gone:
                    ok.append(json.dumps({"custom_id": cid, "response": result["response"]}))
            else:
                failed.append(json.dumps({"custom_id": cid, "error": result["error"]}))
        ok = store.mangled("output", store.decide.shuffled(ok, job.name))
        out = Dataset(job.output_dataset, now, state="READY", job=job.name)
        out.files[RESULTS] = "".join(x + "\n" for x in ok).encode("utf-8", "surrogateescape")
        if failed:
            out.files[ERRORS] = "".join(x + "\n" for x in failed).encode()
        if store.anomaly("ended-before-results", job.name):
            self.late.append((now + 4 * max(store.settings.latency, 0.05), out))
        else:
            self.datasets[out.name] = out


def _page(items: list[Any], size: int, token: str | None) -> tuple[list[Any], str | None]:
    start = int(token) if token and token.isdigit() else 0
    chunk = items[start : start + size]
    return chunk, str(start + size) if start + size < len(items) else None
