"""Amazon Bedrock batch inference through boto3: S3 for the records, ``bedrock`` for jobs.

Where a run's jobs live is its *account* (:class:`.base.Service`): the service role
the jobs run as (``BEDROCK_ROLE_ARN``) and the S3 location of their inputs and outputs
(``BATCHBENCH_S3_URI``), both remembered by the run. Credentials and region come from
AWS's standard chain; the endpoints from ``AWS_ENDPOINT_URL_BEDROCK`` (the run's base
URL), ``AWS_ENDPOINT_URL_S3`` and ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` when set; boto3's
retries off (:mod:`.retry` is the one policy).

Exactly once: a job is named after the run and submission (``bb-<run tag>-<sub>``); its
create carries a ``clientRequestToken`` derived from them, so a create repeated after a
lost reply is ignored and the job found by its name. Requests under the minimum per job,
when asked, go one by one through ``InvokeModel`` (:mod:`.bedrock_on_demand`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import boto3
import boto3.session
import botocore.config
import botocore.exceptions
import botocore.session

from ..errors import ApiError, ConfigError
from ..kinds import Ending, Phase
from . import retry, tls
from .aws_errors import aws_errors
from .base import (
    CLOCK_SKEW,
    BatchError,
    BatchView,
    Marks,
    Service,
    Tag,
    cancel_unless_ended,
    timestamp,
)
from .bedrock_on_demand import on_demand_calls, reach_runtime
from .bedrock_wire import claude, model_id
from .client_base import ClientBase
from .closing import shut
from .downloads import Sink, verbatim
from .one_by_one import CallKind, Calls

T = TypeVar("T")
PHASES: dict[str, tuple[Phase, Ending | None]] = {
    "Submitted": ("pending", None),
    "Validating": ("pending", None),
    "Scheduled": ("pending", None),
    "InProgress": ("running", None),
    "Stopping": ("cancelling", None),
    "Completed": ("ended", "completed"),
    # Records that did not run in time are absent from the output: sent again.
    "PartiallyCompleted": ("ended", "expired"),
    "Expired": ("ended", "expired"),
    "Stopped": ("ended", "cancelled"),
    "Failed": ("ended", "failed"),
}
PROFILE = re.compile(r"^(us|eu|apac|global|us-gov|jp|au)\.")  # a cross-region profile
# A bucket as S3 names one, and a prefix of the characters AWS calls safe in a key
# (docs.aws.amazon.com AmazonS3 "object-keys": 0-9 a-z A-Z ! - _ . * ' ( ), and "/"):
# a query (?x=1) or a space would pass a look and fail at the create.
S3_URI = re.compile(r"^s3://([a-z0-9][-.a-z0-9]{1,61}[a-z0-9])(/[A-Za-z0-9!_.*'()/-]*)?$")


def region(env: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    return env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None


def job_name(tag: Tag) -> str:
    return f"bb-{tag.token}-{tag.sub}"[:63]


def request_token(tag: Tag) -> str:
    """The create's idempotency token: the same for every create of one submission."""
    digest = hashlib.sha256(f"{tag.run_id}/{tag.sub}".encode()).hexdigest()
    return f"bb{digest[:40]}"


def output_ref(job: dict[str, Any]) -> str:
    """Where a job writes the output of its records (``s3://…/<job id>/<input>.out``)."""
    job_id = str(job["jobArn"]).rsplit("/", 1)[-1]
    out = job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"].rstrip("/")
    name = job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"].rsplit("/", 1)[-1]
    return f"{out}/{job_id}/{name}.out"


def view(job: dict[str, Any]) -> BatchView:
    status = str(job.get("status"))
    if status not in PHASES:
        raise ApiError(f"job {job.get('jobArn')} has an unknown status {status!r}")
    phase, ending = PHASES[status]
    job_id = str(job["jobArn"]).rsplit("/", 1)[-1]
    files: tuple[str, ...] = ()
    if ending is not None and ending != "failed":
        files = (output_ref(job),)
    errors = (BatchError(status, job.get("message")),) if ending == "failed" else None
    return BatchView(
        id=job_id,
        status=status,
        phase=phase,
        ending=ending,
        total=int(job.get("totalRecordCount") or 0),
        completed=int(job.get("successRecordCount") or 0),
        failed=int(job.get("errorRecordCount") or 0),
        files=files,
        errors=errors,
        created_at=timestamp(job.get("submitTime"), f"job {job_id}"),
    )


class BedrockClient(ClientBase):
    marks: Marks = "tag"  # the job's name and token name the run and submission
    lands_within: float = 0.0  # its clientRequestToken: a create repeated is the same job

    def connect(self, api_key: str) -> None:
        service = self.service
        where = f"{self.context.base_url_variable} and the region"
        self.preflight = functools.partial(
            self.retry.preflight, url=service.base_url, where=where, errors=self.errors
        )
        role, location = service.setting("BEDROCK_ROLE_ARN"), service.setting("BATCHBENCH_S3_URI")
        if not role:
            raise ConfigError(
                "Bedrock jobs run as a service role: set BEDROCK_ROLE_ARN or --bedrock-role"
            )
        found = S3_URI.match(location or "")
        if not location:
            raise ConfigError(
                "Bedrock reads and writes its records in S3: give the run --s3-uri"
                " s3://BUCKET/PREFIX (or set BATCHBENCH_S3_URI)"
            )
        if not found:
            raise ConfigError(
                f"the run's S3 location (--s3-uri, or BATCHBENCH_S3_URI) is {location!r}, not"
                " s3://BUCKET/PREFIX (a prefix of letters, digits and ! - _ . * ' ( ) /)"
            )
        self.role = role
        self.bucket, self.prefix = found.group(1), (found.group(2) or "").strip("/")
        config = botocore.config.Config(
            retries={"total_max_attempts": 1},
            connect_timeout=5,
            read_timeout=60,
            s3={"addressing_style": "path"},
        )
        with self.errors("AWS's settings"):
            self._connect(service, config)

    def _connect(self, service: Service, config: botocore.config.Config) -> None:
        where = region() or "us-east-1"
        core = botocore.session.get_session()  # this client's own credentials and settings
        core.register_component("data_loader", tls.boto_loader())  # the models: shared
        aws = boto3.session.Session(botocore_session=core)
        self.bedrock = aws.client(
            "bedrock", region_name=where, endpoint_url=service.base_url, config=config
        )
        # Before a run, a silent server is named after one short attempt (retry.PREFLIGHT_
        # TIMEOUT), not five of a minute each.
        quick = config.merge(
            botocore.config.Config(
                connect_timeout=retry.PREFLIGHT_TIMEOUT, read_timeout=retry.PREFLIGHT_TIMEOUT
            )
        )
        self.look = aws.client(
            "bedrock", region_name=where, endpoint_url=service.base_url, config=quick
        )
        self.s3 = aws.client("s3", region_name=where, config=config)
        self.s3_look = aws.client("s3", region_name=where, config=quick)
        self.runtime = aws.client("bedrock-runtime", region_name=where, config=config)
        self.runtime_look = aws.client("bedrock-runtime", region_name=where, config=quick)

    # errors -------------------------------------------------------------------
    def errors(
        self, what: str, batch_id: str | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return aws_errors(what, batch_id)

    def _call(
        self, what: str, fn: Callable[[], T], batch_id: str | None = None, *, once: bool = False
    ) -> T:
        """``fn`` under the retry policy (``once``: a single attempt, for a call that
        costs money and carries no idempotency token), its failures typed."""
        if once:
            with self.errors(what, batch_id):
                return fn()

        def attempt() -> T:
            with self.errors(what, batch_id):
                return fn()

        return self.retry(attempt)

    # the service ---------------------------------------------------------------
    def close(self) -> None:  # the run has ended: each boto3 client's pool released
        shut(self.bedrock, self.look, self.s3, self.runtime, self.runtime_look)

    def check_models(self, models: Iterable[str]) -> None:
        """Before anything is paid: the S3 location readable (first: its own endpoint,
        which no other look-up tests), then each model a Claude model the account can use
        (its foundation model or inference profile)."""
        try:  # S3 has its own endpoint: a silent one is named as such, not as Bedrock's
            self.retry.preflight(
                f"list s3://{self.bucket}/{self.prefix}",
                lambda: self.s3_look.list_objects_v2(
                    Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1
                ),
                url=self.s3.meta.endpoint_url,
                where="AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) and the region",
                errors=self.errors,
            )
        except ApiError as exc:
            if exc.status == 404:
                raise ConfigError(
                    f"the run's S3 location (--s3-uri, or BATCHBENCH_S3_URI) names"
                    f" s3://{self.bucket}, which does not exist (or is not visible to these"
                    " credentials)"
                ) from None
            raise
        for model in dict.fromkeys(models):
            found = claude(model)
            profile = bool(PROFILE.match(found)) or ":inference-profile/" in found
            look_up: Callable[[], Any] = (
                functools.partial(self.look.get_inference_profile, inferenceProfileIdentifier=found)
                if profile
                else functools.partial(self.look.get_foundation_model, modelIdentifier=found)
            )
            try:
                self.preflight(f"look up model {found!r}", look_up)
            except ApiError as exc:
                if exc.status in (400, 404):
                    raise ConfigError(
                        f"model {model!r} is not available on Bedrock at"
                        f" {self.service.base_url} (HTTP {exc.status}); check its name and"
                        " the region"
                    ) from None
                raise

    def _key(self, tag: Tag, name: str) -> str:
        return "/".join(p for p in (self.prefix, f"bb-{tag.token}", name) if p)

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """Records too few for a job, on demand (:mod:`.bedrock_on_demand`)."""
        if kind != "ondemand":
            return None
        found = model_id(model)
        return on_demand_calls(
            self.runtime,
            self._call,
            found,
            functools.partial(reach_runtime, self.retry, self.runtime_look, self.errors, found),
        )

    def upload(self, path: Path, tag: Tag) -> str | None:
        key = self._key(tag, path.name)
        data = path.read_bytes()
        self._call(
            f"upload {path.name}",
            lambda: self.s3.put_object(Bucket=self.bucket, Key=key, Body=data),
        )
        return f"s3://{self.bucket}/{key}"

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        if input_ref is None:
            raise ApiError("a Bedrock job needs its records in S3")
        out = f"s3://{self.bucket}/{self._key(tag, 'out')}/"
        with self.errors(f"create job for {input_ref}"):  # once: never retried blind
            made = self.bedrock.create_model_invocation_job(
                jobName=job_name(tag),
                roleArn=self.role,
                clientRequestToken=request_token(tag),
                modelId=model_id(tag.model),
                inputDataConfig={
                    "s3InputDataConfig": {"s3Uri": input_ref, "s3InputFormat": "JSONL"}
                },
                outputDataConfig={"s3OutputDataConfig": {"s3Uri": out}},
                timeoutDurationInHours=24,
            )
        return self.retrieve(str(made["jobArn"]).rsplit("/", 1)[-1])

    def _jobs_since(self, since: float, name: str | None = None) -> Iterator[dict[str, Any]]:
        after = datetime.fromtimestamp(max(0.0, since - CLOCK_SKEW), timezone.utc)
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {
                "submitTimeAfter": after,
                "sortBy": "CreationTime",
                "sortOrder": "Descending",
                "maxResults": 100,
            }
            if name:
                kwargs["nameContains"] = name
            if token:
                kwargs["nextToken"] = token
            list_jobs = functools.partial(self.bedrock.list_model_invocation_jobs, **kwargs)
            page = self._call("list jobs", list_jobs)
            yield from page.get("invocationJobSummaries", [])
            token = page.get("nextToken")
            if not token:
                return

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        name = job_name(tag)
        for job in self._jobs_since(since, name):
            if job.get("jobName") == name or job.get("clientRequestToken") == request_token(tag):
                found = self._view(job)
                return [] if found.id in known else [found]
        return []

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        want, found = set(batch_ids), {}
        for job in self._jobs_since(since):
            job_id = str(job["jobArn"]).rsplit("/", 1)[-1]
            if job_id in want:
                found[job_id] = self._view(job)
                if len(found) == len(want):
                    break
        return found

    def retrieve(self, batch_id: str) -> BatchView:
        job = self._call(
            f"retrieve job {batch_id}",
            lambda: self.bedrock.get_model_invocation_job(jobIdentifier=batch_id),
            batch_id,
        )
        return self._view(job)

    def _view(self, job: dict[str, Any]) -> BatchView:
        """A job, normalised. One that Failed may have written the output of the records
        it ran: read first (kept, the rest sent again, as for an expired job), never
        bought again unread."""
        found = view(job)
        if found.ending != "failed":
            return found
        ref = output_ref(job)
        bucket, key = S3_URI.match(ref).group(1), ref.split("/", 3)[3]  # type: ignore[union-attr]
        listed = self._call(
            f"look for job {found.id}'s output",
            lambda: self.s3.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=1),
            found.id,
        )
        if not any(o.get("Key") == key for o in listed.get("Contents") or []):
            return found
        status = f"{found.status} (the output of the records it ran kept)"
        return dataclasses.replace(found, status=status, ending="expired", files=(ref,))

    def cancel(self, batch_id: str) -> BatchView | None:
        return cancel_unless_ended(lambda: self._stop(batch_id), lambda: self.retrieve(batch_id))

    def _stop(self, batch_id: str) -> BatchView:
        self._call(
            f"stop job {batch_id}",
            lambda: self.bedrock.stop_model_invocation_job(jobIdentifier=batch_id),
            batch_id,
        )
        return self.retrieve(batch_id)

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        found = S3_URI.match(ref)
        if not found:
            raise ApiError(f"job {batch_id}: its output {ref!r} is not an s3:// URI")
        bucket, key = found.group(1), (found.group(2) or "").lstrip("/")

        def fill(sink: Sink) -> None:
            body = self.s3.get_object(Bucket=bucket, Key=key)["Body"]
            for chunk in body.iter_chunks(1 << 20):
                sink.write(chunk)

        def attempt() -> int:
            with self.errors(f"download {ref}", batch_id):
                return verbatim(dest, fill)

        return self.retry(attempt)

    def delete(self, refs: Sequence[str]) -> None:
        """Nothing: the records and outputs are in the user's own bucket, theirs to keep."""
