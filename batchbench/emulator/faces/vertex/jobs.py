"""Vertex AI batch prediction jobs, emulated: their states, their lines, their outputs.

As the service runs them (the issue's account of Vertex, ``provider-batch-apis.md``
§2.6): a create is checked at once (display name, model, input and output URIs,
labels as Google's label rules have them; a project runs at most four Claude jobs
at a time, a fifth is 429 RESOURCE_EXHAUSTED), then the job is ``QUEUED``,
``PENDING``, ``RUNNING`` (its lines run progressively, in any order), and ends
``SUCCEEDED`` with ``predictions.jsonl`` under
``<outputUriPrefix>/prediction-model-<time>/``, named by ``outputInfo``. A job
running past the window ends ``PARTIALLY_SUCCEEDED`` (the lines that ran are
written and billed), one queued past three windows ``EXPIRED``; a cancel goes
``CANCELLING`` → ``CANCELLED`` with what ran written.

A Gemini line is ``{"request": {…, "labels"}}`` and comes back as ``{"status",
"processed_time", "request", "response"}`` — no id but the request's own labels;
a Claude line is ``{"custom_id", "request"}`` (``anthropic_version``
``vertex-2023-10-16``, no model) and comes back with ``response`` and ``status``.
A failed line's ``status`` is the reason and the error body; a good line's is "".
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from ...anomalies import misfiled, missing_lines
from ...core import DIGITS, ApiFailure, Store, due_lines, last_line, rfc3339
from .gcs import Storage, split_uri
from .job import ENDED, Job
from .lines import LABEL_KEY, LABEL_VALUE, line_id, run_claude, run_gemini

MAX_LINES = 200_000
MAX_BYTES = 1024**3
CLAUDE_JOBS = 4  # concurrent Claude batch jobs per project, by default
MODEL = re.compile(r"^publishers/(google|anthropic)/models/([^/]+)$")


def publisher_of(model: str) -> str | None:
    """Whose model a name is: Claude's are Anthropic's, Gemini's Google's (a Claude model
    named under publishers/google is not found there)."""
    if model.startswith("claude"):
        return "anthropic"
    if model.startswith("gemini"):
        return "google"
    return None  # another family (a simulated or added model): either publisher's


def invalid(message: str) -> ApiFailure:
    return ApiFailure(400, message, code="INVALID_ARGUMENT")


class Jobs:
    """The project's batch prediction jobs and the Cloud Storage they read and write."""

    def __init__(self, store: Store, storage: Storage) -> None:
        self.store = store
        self.storage = storage
        self.jobs: dict[str, Job] = {}

    def create(self, parent: str, payload: Any) -> dict[str, Any]:
        if not isinstance(payload, dict):
            raise invalid("Invalid JSON payload received.")
        name = payload.get("displayName")
        if not isinstance(name, str) or not name or len(name) > 128:
            raise invalid("BatchPredictionJob.display_name must be 1 to 128 characters.")
        found = MODEL.match(str(payload.get("model", "")))
        if found is None:
            raise invalid(f"Invalid model name {payload.get('model')!r}.")
        publisher, model = found.groups()
        bare = model.split("@", 1)[0]
        if publisher_of(bare) not in (None, publisher) or not self.store.known_model(bare):
            raise ApiFailure(
                404,
                f"Publisher Model `{parent}/publishers/{publisher}/models/{model}` not found.",
                code="NOT_FOUND",
            )
        source = ((payload.get("inputConfig") or {}).get("gcsSource") or {}).get("uris") or []
        prefix = ((payload.get("outputConfig") or {}).get("gcsDestination") or {}).get(
            "outputUriPrefix"
        )
        if len(source) != 1 or not str(source[0]).startswith("gs://"):
            raise invalid("inputConfig.gcsSource.uris must name one gs:// object.")
        if not isinstance(prefix, str) or not prefix.startswith("gs://"):
            raise invalid("outputConfig.gcsDestination.outputUriPrefix must be a gs:// URI.")
        try:  # the input is looked up at create, as the service does
            self.storage.get(*split_uri(str(source[0])))
        except ApiFailure:
            raise ApiFailure(
                400,
                f"Failed to read the input {source[0]}: the object does not exist.",
                code="FAILED_PRECONDITION",
            ) from None
        labels = payload.get("labels") or {}
        if not isinstance(labels, dict) or len(labels) > 64:
            raise invalid("labels must be a map of at most 64 entries.")
        for key, value in labels.items():
            if not LABEL_KEY.match(str(key)) or not LABEL_VALUE.match(str(value)):
                raise invalid(f"Label {key}={value} does not meet the label requirements.")
        if publisher == "anthropic":
            running = [j for j in self.jobs.values() if j.publisher == publisher]
            if sum(1 for j in running if j.state not in ENDED) >= CLAUDE_JOBS:
                raise ApiFailure(
                    429,
                    "Quota exceeded for aiplatform.googleapis.com/"
                    "concurrent_anthropic_batch_prediction_jobs_per_project.",
                    code="RESOURCE_EXHAUSTED",
                )
        job = Job(
            id=self.store.decide.token(DIGITS, 19).lstrip("0") or "1",
            parent=parent,
            display_name=name,
            publisher=publisher,
            model=model,
            input_uri=str(source[0]),
            output_prefix=prefix.rstrip("/"),
            labels={str(k): str(v) for k, v in labels.items()},
            created=self.store.now(),
        )
        self.jobs[job.id] = job
        return job.obj(self.store.now())

    def get(self, ident: str) -> Job:
        found = self.jobs.get(ident)
        if found is None:
            raise ApiFailure(404, f"BatchPredictionJob {ident} not found.", code="NOT_FOUND")
        return found

    def delete(self, parent: str, ident: str) -> dict[str, Any]:
        """Delete an ended job (googleapis aiplatform v1 ``batchPredictionJobs.delete``:
        "Can only be called on jobs that already finished"), as a done operation."""
        job = self.get(ident)
        if job.state not in ENDED:
            raise ApiFailure(
                400,
                f"BatchPredictionJob {job.name} is in state {job.state}; only a finished job"
                " can be deleted.",
                code="FAILED_PRECONDITION",
            )
        del self.jobs[ident]
        return {
            "name": f"{parent}/operations/{self.store.decide.token(DIGITS, 19)}",
            "metadata": {
                "@type": "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata",
                "genericMetadata": {"createTime": rfc3339(self.store.now())},
            },
            "done": True,
            "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
        }

    def cancel(self, ident: str) -> dict[str, Any]:
        job = self.get(ident)
        if job.state in ENDED:
            raise ApiFailure(
                400,
                f"BatchPredictionJob {job.name} is in state {job.state} and cannot be cancelled.",
                code="FAILED_PRECONDITION",
            )
        if job.state != "JOB_STATE_CANCELLING":
            job.state = "JOB_STATE_CANCELLING"
            job.stamps["cancelling"] = self.store.now()
        return {}

    def listed(self, parent: str, query: dict[str, str], page_size: int) -> dict[str, Any]:
        jobs = sorted(
            (j for j in self.jobs.values() if j.parent == parent),
            key=lambda j: (j.created, j.id),
            reverse=True,
        )
        for clause in _clauses(query.get("filter", "")):
            jobs = [j for j in jobs if clause(j)]
        start = int(query.get("pageToken") or 0)
        page = jobs[start : start + page_size]
        out: dict[str, Any] = {"batchPredictionJobs": [j.obj(self.store.now()) for j in page]}
        if start + page_size < len(jobs):
            out["nextPageToken"] = str(start + page_size)
        return out

    # the clock ----------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        latency, window = self.store.settings.latency, self.store.settings.completion_window
        for job in sorted(self.jobs.values(), key=lambda j: j.created):
            if job.state == "JOB_STATE_QUEUED" and (flush or now >= job.created):
                self._validate(job)
            start = job.created + min(latency, 60.0)
            stuck = self.store.anomaly("stuck-pending", job.id)
            if job.state == "JOB_STATE_PENDING" and not stuck and (flush or now >= start):
                job.state = "JOB_STATE_RUNNING"
                job.stamps["started"] = start
                if self.store.anomaly("failed-while-running", job.id):
                    job.failed_reads, job.failed_until = 2, start + latency / 2
            if job.state == "JOB_STATE_RUNNING":
                begun, total = job.stamps["started"], len(job.lines)
                deadline = begun + window
                run = self.store.run_seconds("vertex", job.id)  # its recorded turnaround
                due = due_lines(total, begun, min(now, deadline), run, flush)
                while job.executed < due:
                    self._execute(job, job.order[job.executed])
                    job.executed += 1
                if job.executed >= total:
                    when = now if flush else last_line(begun, total, run)
                    self._end(job, when, "JOB_STATE_SUCCEEDED")
                elif now >= deadline and not flush:
                    self._end(job, deadline, "JOB_STATE_PARTIALLY_SUCCEEDED")
            elif job.state == "JOB_STATE_PENDING" and now >= job.created + 3 * window:
                self._end(job, job.created + 3 * window, "JOB_STATE_EXPIRED")
            elif job.state == "JOB_STATE_CANCELLING":
                ready = job.stamps["cancelling"] + latency
                if flush or now >= ready:
                    self._end(job, now if flush else ready, "JOB_STATE_CANCELLED")

    def _fail(self, job: Job, message: str) -> None:
        job.state, job.error = "JOB_STATE_FAILED", {"code": 3, "message": message}
        job.stamps["ended"] = job.created

    def _validate(self, job: Job) -> None:
        bucket, name = split_uri(job.input_uri)
        try:
            data = self.storage.get(bucket, name).data
        except ApiFailure:
            return self._fail(job, f"Failed to read the input {job.input_uri}.")
        if len(data) > MAX_BYTES:
            return self._fail(job, "The input file is larger than 1 GB.")
        lines = []
        for n, text in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError:
                return self._fail(job, f"Invalid JSON at line {n} of {job.input_uri}.")
            if not isinstance(line, dict) or not isinstance(line.get("request"), dict):
                return self._fail(job, f"Line {n} of {job.input_uri} has no request object.")
            lines.append(line)
        if len(lines) > MAX_LINES:
            return self._fail(job, f"The input has more than {MAX_LINES} requests.")
        job.lines = lines
        job.order = self.store.decide.shuffled(range(len(lines)), job.id)
        job.state = "JOB_STATE_PENDING"

    def _execute(self, job: Job, index: int) -> None:
        line = job.lines[index]
        request = line["request"]
        where = f"{job.id}/{index}"
        if job.publisher == "google":
            code, out = run_gemini(self.store, job.model, request, where)
            # A line's other keys (Curator's custom_id, say) ride along into its prediction,
            # as Google documents for a table's other columns ("ignored for content
            # generation, but included in the output table": vertex-ai generative-ai
            # batch-prediction-from-bigquery); the same job runs a file's lines.
            carried = {k: v for k, v in line.items() if k != "request"}
            stamp = rfc3339(self.store.now())
            out = {**carried, "status": out.pop("status"), "processed_time": stamp, **out}
        else:
            code, out = run_claude(self.store, job.model, request, where)
            out = {"custom_id": line.get("custom_id"), "request": request, **out}
        job.results[index] = out
        self.store.executed("vertex", job.id, line_id(line, index), code, out.get("response"))

    def _end(self, job: Job, when: float, state: str) -> None:
        store = self.store
        if state == "JOB_STATE_PARTIALLY_SUCCEEDED" and not job.results:
            state = "JOB_STATE_EXPIRED"
        if job.results or state == "JOB_STATE_SUCCEEDED":
            results = job.results
            if job.publisher == "google":  # replies moved to other lines' requests
                order = sorted(results)
                reply = ("status", "processed_time", "response")
                bare = [{k: v for k, v in results[i].items() if k in reply} for i in order]
                moved = misfiled(store, job.id, bare)
                results = {
                    i: {**{k: v for k, v in results[i].items() if k not in reply}, **m}
                    for i, m in zip(order, moved)
                }
            ok = [str(i) for i, r in results.items() if not r.get("status")]
            gone = missing_lines(store, job.id, ok)
            lines = [json.dumps(r) for i, r in results.items() if str(i) not in gone]
            lines = store.mangled("output", store.decide.shuffled(lines, job.id))
            stamp = datetime.fromtimestamp(when, timezone.utc).strftime("%Y_%m_%dT%H_%M_%S_%fZ")
            folder = f"{job.output_prefix}/prediction-model-{stamp}"
            bucket, name = split_uri(folder)
            data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
            try:
                self.storage.put(
                    bucket,
                    f"{name}/predictions.jsonl",
                    data,
                    when,
                    withheld=lambda: store.anomaly("empty-results", job.id),
                )
                job.output_dir = folder
            except ApiFailure:
                job.error = {"code": 7, "message": f"Cannot write to {job.output_prefix}."}
                state = "JOB_STATE_FAILED"
        if state == "JOB_STATE_SUCCEEDED" and store.anomaly("failed-with-output", job.id):
            job.error = {"code": 13, "message": "Internal error occurred."}
            state = "JOB_STATE_FAILED"
        job.state = state
        job.stamps["ended"] = when

    def ledger(self) -> list[dict[str, Any]]:
        return [
            {
                "id": j.id,
                "provider": "vertex",
                "status": j.state,
                "custom_ids": [line_id(line, i) for i, line in enumerate(j.lines)],
                "created_at": int(j.created),
                "name": j.display_name,
                "labels": dict(j.labels),
            }
            for j in self.jobs.values()
        ]


def _clauses(text: str) -> list[Callable[[Job], bool]]:
    """A list filter (``labels.k="v" AND display_name="n"``) as predicates; a clause the
    emulator does not read is refused, as the service refuses a malformed filter."""
    out: list[Callable[[Job], bool]] = []
    for part in (p.strip() for p in re.split(r"\s+AND\s+", text) if p.strip()):
        found = re.fullmatch(r'(labels\.[a-z0-9_-]+|display_name|state)\s*=\s*"?([^"]*)"?', part)
        if found is None:
            raise invalid(f"Unsupported filter: {part}")
        key, value = found.group(1), found.group(2)
        out.append(functools.partial(_holds, key, value))
    return out


def _holds(key: str, value: str, job: Job) -> bool:
    if key == "display_name":
        return job.display_name == value
    if key == "state":
        return job.state == value
    return job.labels.get(key.removeprefix("labels.")) == value
