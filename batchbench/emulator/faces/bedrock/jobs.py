"""Bedrock's batch inference jobs, emulated: their states, their records, their outputs.

As the service runs them (``../shared/spec/provider-batch-apis.md`` §5): a create is
checked at once (names, ARNs, URIs, the model, the timeout; the same
``clientRequestToken`` again creates nothing and answers the first job), then the
job is ``Submitted``, ``Validating`` (the input object, its records, the account's
minimum number of records per job: a job below it ends ``Failed``), ``Scheduled``,
``InProgress`` (records run progressively), and ends ``Completed``, or, when its
timeout comes first, ``PartiallyCompleted`` (some records ran) or ``Expired`` (none);
a stop goes ``Stopping`` → ``Stopped``. The output — ``<input name>.out`` lines
``{recordId, modelInput, modelOutput | error}`` in any order, and
``manifest.json.out`` — is written under ``<output URI>/<job id>/``; records that
never ran are not in it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ...anomalies import missing_lines
from ...core import LOWER, ApiFailure, Store, due_lines, iso8601, last_line
from .invoke import invoke
from .s3 import Buckets, split_uri

JOB_NAME = re.compile(r"^[a-zA-Z0-9]{1,63}(-*[a-zA-Z0-9\+\-\.]){0,63}$")
ROLE_ARN = re.compile(r"^arn:aws(-[^:]+)?:iam::([0-9]{12})?:role/.+$")
S3_URI = re.compile(r"^s3://[a-z0-9][-.a-z0-9]{1,61}[a-z0-9](?:/[-!_*'().a-z0-9A-Z]+)*/?$")
TOKEN = re.compile(r"^[a-zA-Z0-9]{1,256}(-*[a-zA-Z0-9]){0,256}$")
MAX_RECORDS = 50_000
ACCOUNT = "123456789012"
REGION = "us-east-1"
ENDED = ("Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired")


def validation(message: str) -> ApiFailure:
    return ApiFailure(400, message, code="ValidationException")


@dataclass
class Job:
    id: str
    name: str
    model_id: str
    token: str
    role: str
    input_uri: str
    output_uri: str
    hours: int
    submitted: float
    status: str = "Submitted"
    message: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    executed: int = 0
    stamps: dict[str, float] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)  # tests: fields it misreports

    @property
    def arn(self) -> str:
        return f"arn:aws:bedrock:{REGION}:{ACCOUNT}:model-invocation-job/{self.id}"

    def obj(self) -> dict[str, Any]:
        ok = sum(1 for r in self.results.values() if "modelOutput" in r)
        out: dict[str, Any] = {
            "jobArn": self.arn,
            "jobName": self.name,
            "modelId": self.model_id,
            "clientRequestToken": self.token,
            "roleArn": self.role,
            "status": self.status,
            "submitTime": iso8601(self.submitted),
            "lastModifiedTime": iso8601(max([self.submitted, *self.stamps.values()])),
            "inputDataConfig": {
                "s3InputDataConfig": {"s3InputFormat": "JSONL", "s3Uri": self.input_uri}
            },
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": self.output_uri}},
            "timeoutDurationInHours": self.hours,
            "jobExpirationTime": iso8601(self.submitted + self.hours * 3600),
            "totalRecordCount": len(self.records),
            "processedRecordCount": len(self.results),
            "successRecordCount": ok,
            "errorRecordCount": len(self.results) - ok,
        }
        if self.message is not None:
            out["message"] = self.message
        if self.status in ENDED:
            out["endTime"] = iso8601(self.stamps.get("ended", self.submitted))
        return out | self.overrides


class Jobs:
    """The account's jobs and the S3 buckets they read and write."""

    def __init__(self, store: Store, buckets: Buckets) -> None:
        self.store = store
        self.buckets = buckets
        self.jobs: dict[str, Job] = {}

    def create(self, payload: Any) -> dict[str, Any]:
        if not isinstance(payload, dict):
            raise validation("The request body must be a JSON object.")
        for key in ("jobName", "roleArn", "modelId", "inputDataConfig", "outputDataConfig"):
            if key not in payload:
                raise validation(f"1 validation error detected: '{key}' must not be null")
        name, role, model_id = payload["jobName"], payload["roleArn"], payload["modelId"]
        token = payload.get("clientRequestToken") or self.store.decide.token(LOWER, 32)
        if not isinstance(name, str) or not JOB_NAME.match(name):
            raise validation(f"Value '{name}' at 'jobName' failed to satisfy constraint")
        if not isinstance(role, str) or not ROLE_ARN.match(role):
            raise validation(f"Value '{role}' at 'roleArn' failed to satisfy constraint")
        if not isinstance(token, str) or not TOKEN.match(token):
            raise validation("Value at 'clientRequestToken' failed to satisfy constraint")
        for job in self.jobs.values():
            if job.token == token:  # "ignores the request, but does not return an error"
                return {"jobArn": job.arn}
        in_uri = _uri(payload["inputDataConfig"], "s3InputDataConfig")
        out_uri = _uri(payload["outputDataConfig"], "s3OutputDataConfig")
        hours = payload.get("timeoutDurationInHours", 24)
        if not isinstance(hours, int) or not 24 <= hours <= 168:
            raise validation("timeoutDurationInHours must be between 24 and 168")
        if not isinstance(model_id, str) or not self.knows(model_id):
            raise validation("The provided model identifier is invalid.")
        for uri, what in ((in_uri, "input"), (out_uri, "output")):
            if split_uri(uri)[0] not in self.buckets.objects:  # looked up at create
                raise validation(
                    f"The provided S3 {what} bucket {split_uri(uri)[0]} does not exist."
                )
        if any(job.name == name for job in self.jobs.values()):
            raise ApiFailure(
                409, f"A job with the name {name} already exists", code="ConflictException"
            )
        job = Job(
            id=self.store.decide.token(LOWER, 12),
            name=name,
            model_id=model_id,
            token=token,
            role=role,
            input_uri=in_uri,
            output_uri=out_uri.rstrip("/"),
            hours=hours,
            submitted=self.store.now(),
        )
        self.jobs[job.id] = job
        return {"jobArn": job.arn}

    def knows(self, model_id: str) -> bool:
        """A foundation model or inference profile id whose model the catalogue knows."""
        base = re.sub(r"^(us|eu|apac|global|us-gov|jp|au)\.", "", model_id.split("/")[-1])
        vendor, _, name = base.partition(".")
        name = re.sub(r"-v\d+(:\d+)?$", "", name)
        return bool(vendor and name) and self.store.known_model(name)

    def model_ids(self) -> list[str]:
        """The Claude models the catalogue lists, as Bedrock's foundation model ids."""
        names = self.store.catalogue.listed("claude-")
        return [f"anthropic.{name}-v1:0" for name in names]

    def get(self, ident: str) -> Job:
        found = self.jobs.get(unquote(ident).rsplit("/", 1)[-1])
        if found is None:
            raise ApiFailure(404, f"Could not find job {ident}", code="ResourceNotFoundException")
        return found

    def stop(self, ident: str) -> dict[str, Any]:
        job = self.get(ident)
        if job.status in ENDED or job.status == "Stopping":
            raise validation(f"The job {job.id} is in {job.status} state and cannot be stopped")
        job.status = "Stopping"
        job.stamps["stopping"] = self.store.now()
        return {}

    def listed(self, query: dict[str, str], max_results: int) -> dict[str, Any]:
        jobs = sorted(self.jobs.values(), key=lambda j: (j.submitted, j.id))
        if query.get("sortOrder", "Descending") == "Descending":
            jobs.reverse()
        after = query.get("submitTimeAfter")
        if after:
            from datetime import datetime

            floor = datetime.fromisoformat(after.replace("Z", "+00:00")).timestamp()
            jobs = [j for j in jobs if j.submitted >= floor]
        if query.get("nameContains"):
            jobs = [j for j in jobs if query["nameContains"] in j.name]
        if query.get("statusEquals"):
            jobs = [j for j in jobs if j.status == query["statusEquals"]]
        start = int(query.get("nextToken") or 0)
        page = jobs[start : start + max_results]
        out: dict[str, Any] = {"invocationJobSummaries": [j.obj() for j in page]}
        if start + max_results < len(jobs):
            out["nextToken"] = str(start + max_results)
        return out

    # the clock ----------------------------------------------------------------
    def advance(self, now: float, flush: bool) -> None:
        latency = self.store.settings.latency
        for job in sorted(self.jobs.values(), key=lambda j: j.submitted):
            deadline = job.submitted + min(job.hours * 3600, self.store.settings.completion_window)
            if job.status == "Submitted" and (flush or now >= job.submitted):
                self._validate(job)
            # Validating and scheduling take a moment (a minute at most), unless the job
            # is stuck (stuck-pending: it never starts, and expires).
            start = job.submitted + min(latency, 60.0)
            stuck = self.store.anomaly("stuck-pending", job.id)
            if job.status == "Scheduled" and not stuck and (flush or now >= start):
                job.status = "InProgress"
                job.stamps["started"] = start
            if job.status == "InProgress":
                start, total = job.stamps["started"], len(job.records)
                run = self.store.run_seconds("bedrock", job.id)  # its recorded turnaround
                due = due_lines(total, start, min(now, deadline), run, flush)
                while job.executed < due:
                    self._execute(job, job.records[job.order[job.executed]])
                    job.executed += 1
                if job.executed >= total:
                    self._end(job, now if flush else last_line(start, total, run), "Completed")
                elif now >= deadline and not flush:
                    self._end(job, deadline, "PartiallyCompleted")
            elif job.status == "Scheduled" and now >= deadline and not flush:
                self._end(job, deadline, "Expired")
            elif job.status == "Stopping":
                ready = job.stamps["stopping"] + latency
                if flush or now >= ready:
                    self._end(job, now if flush else ready, "Stopped")

    def _validate(self, job: Job) -> None:
        bucket, key = split_uri(job.input_uri)
        try:
            data = self.buckets.get(bucket, key).data
        except ApiFailure:
            return self._fail(job, f"The input file {job.input_uri} could not be read.")
        if not key.endswith(".jsonl"):
            return self._fail(job, "The input file must have the .jsonl extension.")
        records = []
        for n, text in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            try:
                record = json.loads(text)
            except json.JSONDecodeError:
                return self._fail(job, f"Invalid JSON at line {n} of the input file.")
            if not isinstance(record, dict) or not isinstance(record.get("modelInput"), dict):
                return self._fail(job, f"Record {n} has no modelInput object.")
            record.setdefault("recordId", f"{n:011d}")
            records.append(record)
        minimum = self.store.settings.bedrock_min_records
        if len(records) < minimum:
            return self._fail(
                job,
                f"The number of records in the input ({len(records)}) is less than the minimum"
                f" number of records per batch inference job ({minimum}) for this model.",
            )
        if len(records) > MAX_RECORDS:
            return self._fail(job, f"The job has more than {MAX_RECORDS} records.")
        job.records = records
        job.order = self.store.decide.shuffled(range(len(records)), job.id)
        job.status = "Scheduled"

    def _fail(self, job: Job, message: str) -> None:
        job.status, job.message = "Failed", message
        job.stamps["ended"] = job.submitted

    def _execute(self, job: Job, record: dict[str, Any]) -> None:
        rid = str(record["recordId"])
        status, body = invoke(self.store, job.model_id, record["modelInput"], f"{job.id}/{rid}")
        line: dict[str, Any] = {"recordId": rid, "modelInput": record["modelInput"]}
        if status == 200:
            line["modelOutput"] = body
        else:
            line["error"] = {"errorCode": status, "errorMessage": body.get("message", "")}
        job.results[rid] = line
        self.store.executed("bedrock", job.id, rid, status, body if status == 200 else None)

    def _end(self, job: Job, when: float, status: str) -> None:
        store = self.store
        if status == "PartiallyCompleted" and not job.results:
            status = "Expired"
        ok = [rid for rid, r in job.results.items() if "modelOutput" in r]
        gone = missing_lines(store, job.id, ok)
        lines = [json.dumps(r) for rid, r in job.results.items() if rid not in gone]
        lines = store.mangled("output", store.decide.shuffled(lines, job.id))
        bucket, prefix = split_uri(job.output_uri)
        folder = f"{prefix}/{job.id}/" if prefix else f"{job.id}/"
        name = split_uri(job.input_uri)[1].rsplit("/", 1)[-1]
        data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
        usage = [
            r["modelOutput"].get("usage") or {} for r in job.results.values() if "modelOutput" in r
        ]
        manifest = {  # docs.aws.amazon.com bedrock userguide batch-inference-results
            "totalRecordCount": len(job.records),
            "processedRecordCount": len(job.results),
            "successRecordCount": len(ok),
            "errorRecordCount": len(job.results) - len(ok),
            "inputTokenCount": sum(int(u.get("input_tokens", 0)) for u in usage),
            "outputTokenCount": sum(int(u.get("output_tokens", 0)) for u in usage),
        }
        try:
            self.buckets.put(
                bucket,
                f"{folder}{name}.out",
                data,
                when,
                withheld=lambda: store.anomaly("empty-results", job.id),
            )
            self.buckets.put(
                bucket, f"{folder}manifest.json.out", json.dumps(manifest).encode(), when
            )
        except ApiFailure:
            job.message = f"The output location {job.output_uri} could not be written."
            status = "Failed"
        if status != "Failed" and job.results and store.anomaly("failed-with-output", job.id):
            job.message = "Internal server error."  # its output written all the same
            status = "Failed"
        job.status = status
        job.stamps["ended"] = when

    def ledger(self) -> list[dict[str, Any]]:
        return [
            {
                "id": j.id,
                "provider": "bedrock",
                "status": j.status,
                "custom_ids": [str(r.get("recordId")) for r in j.records],
                "created_at": int(j.submitted),
                "name": j.name,
                "token": j.token,
            }
            for j in self.jobs.values()
        ]


def _uri(config: Any, key: str) -> str:
    inner = config.get(key) if isinstance(config, dict) else None
    uri = inner.get("s3Uri") if isinstance(inner, dict) else None
    if not isinstance(uri, str) or not S3_URI.match(uri):
        raise validation(f"Value '{uri}' at '{key}.s3Uri' failed to satisfy constraint")
    return uri
