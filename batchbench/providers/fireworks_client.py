"""Fireworks batch inference through the fireworks-ai SDK: datasets, jobs, output files.

A submission's request file becomes a dataset (created, then uploaded in one
request) and a batch inference job whose id the run chooses — its run id and
submission — so a create whose outcome was lost is found by that id, and a
second create of it is refused by the service (409), never run twice. Jobs live
under the account of ``FIREWORKS_ACCOUNT_ID``. The output dataset's files (a
results file, an error file) are listed and fetched through signed URLs.

Two things are not the SDK's own calls: a job's cancel (``:cancel``, which the
SDK 1.2 does not wrap; sent through the SDK's client) and the signed URLs (plain
HTTP GETs, as the service intends). ``continuedFromJobName`` is not used: a
continued job reruns the unfinished lines under their old ids, while a run gives
every retry its own id, budget and parameters, so the unfinished lines are
planned again as a new submission instead.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import fireworks
from fireworks.types.batch_inference_job_create_params import InferenceParameters

from ..errors import ApiConflictError, ApiError, ApiNotFoundError, ConfigError, InvariantError
from ..kinds import Ending, Phase
from . import tls
from .base import (
    BatchError,
    BatchView,
    Marks,
    Tag,
    cancel_unless_ended,
    timestamp,
    walk_list,
)
from .client_base import ClientBase, sdk_calls, stainless_sdk
from .closing import shut
from .http_errors import status_error
from .one_by_one import CallKind, Calls

PHASES: dict[str, Phase] = {
    "JOB_STATE_CREATING": "pending",
    "JOB_STATE_VALIDATING": "pending",
    "JOB_STATE_PENDING": "pending",
    "JOB_STATE_CREATING_INPUT_DATASET": "pending",
    "JOB_STATE_RE_QUEUEING": "pending",
    "JOB_STATE_IDLE": "pending",
    "JOB_STATE_RUNNING": "running",
    "JOB_STATE_WRITING_RESULTS": "running",
    "JOB_STATE_PAUSED": "running",
    "JOB_STATE_CANCELLING": "cancelling",
    "JOB_STATE_DELETING": "cancelling",
    "JOB_STATE_DELETING_CLEANING_UP": "cancelling",
}
ENDINGS: dict[str, Ending] = {
    "JOB_STATE_COMPLETED": "completed",
    "JOB_STATE_EARLY_STOPPED": "completed",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_EXPIRED": "expired",
}
PAGE = 200  # the list's largest page


def _http() -> Any:
    """An HTTP client for the signed URLs: httpx2 (the SDKs of late 2026) or httpx."""
    for name in ("httpx2", "httpx"):
        with contextlib.suppress(ImportError):
            return importlib.import_module(name)
    raise ImportError("neither httpx2 nor httpx is installed")  # pragma: no cover


def short_id(tag: Tag, suffix: str = "") -> str:
    """The job's (and its datasets') id: the run's id and the submission, lower case."""
    return f"bb-{tag.run_id[:12]}-{tag.sub}{suffix}".lower().replace("_", "-")[:63]


class FireworksClient(ClientBase):
    """Datasets and batch inference jobs through the SDK, errors turned into batchbench's."""

    marks: Marks = "tag"  # the job's id is the run's and the submission's
    lands_within: float = 0.0  # the job id the run chose: a second create is refused (409)

    def connect(self, api_key: str) -> None:
        service = self.service
        self.account = service.setting("FIREWORKS_ACCOUNT_ID") or ""  # the run's
        if not self.account:
            raise ConfigError("grading Fireworks models needs FIREWORKS_ACCOUNT_ID (your account)")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", self.account):  # it goes in paths
            raise ConfigError(f"FIREWORKS_ACCOUNT_ID {self.account!r} is not an account id")
        make = fireworks.Fireworks
        self.sdk: fireworks.Fireworks = stainless_sdk(
            fireworks, make, service, api_key, account_id=self.account
        )
        self._call = sdk_calls(self, fireworks, api_key)
        self._jobs = self.sdk.batch_inference_jobs
        http = _http()  # for the signed URLs, on the process's one TLS context
        self._http = http.Client(verify=tls.context(), timeout=http.Timeout(60.0, connect=5.0))

    def _name(self, kind: str, short: str) -> str:
        return f"accounts/{self.account}/{kind}/{short}"

    def close(self) -> None:
        """Its connections released (the run has ended)."""
        shut(self.sdk, self._http)

    def check_models(self, models: Iterable[str]) -> None:
        """Each model (``accounts/<a>/models/<m>``, or a router) exists for this key."""

        def look_up(model: str, timeout: float) -> Any:
            return self.sdk.get(f"/v1/{model}", cast_to=object, options={"timeout": timeout})

        def list_models(timeout: float) -> Any:
            path = f"/v1/accounts/{self.account}/models"
            return self.sdk.get(path, cast_to=object, options={"timeout": timeout})

        self._call.check_models(models, look_up, list_models, self.where)

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """None: no flex tier, no on-demand remainder."""
        return None

    def upload(self, path: Path, tag: Tag) -> str:
        """The request file as a dataset: created (once), then uploaded (once)."""
        short = short_id(tag, "-input")
        try:
            self._call(
                f"create dataset {short}",
                functools.partial(
                    self.sdk.datasets.create,
                    dataset_id=short,
                    dataset={"display_name": path.name, "format": "CHAT"},
                ),
            )
        except ApiConflictError:  # made before a crash: uploaded too, or not yet
            made = self._call(
                f"get dataset {short}", functools.partial(self.sdk.datasets.get, short)
            )
            if made.state == "READY":
                return self._name("datasets", short)
        data = path.read_bytes()
        upload = functools.partial(self.sdk.datasets.upload, short, file=(path.name, data))

        def once() -> Any:
            """An upload whose reply was lost took effect: tried again, the service
            refuses it (the dataset is READY), and that is the upload done."""
            try:
                return upload()
            except fireworks.BadRequestError:
                if self.sdk.datasets.get(short).state == "READY":
                    return None
                raise

        self._call(f"upload {path.name}", once)
        return self._name("datasets", short)

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        """Once, under the run's own job id; a 409 is the job a lost create made."""
        if input_ref is None:
            raise InvariantError("a Fireworks job needs its dataset")
        short = short_id(tag)
        params = tag.shared or {}
        inference: InferenceParameters = {}
        if "maxTokens" in params:
            inference["max_tokens"] = int(params["maxTokens"])
        if "extraBody" in params:
            inference["extra_body"] = str(params["extraBody"])
        if "temperature" in params:
            inference["temperature"] = params["temperature"]
        with self._call.errors(f"create batch inference job {short}"):
            try:
                job = self._jobs.create(
                    batch_inference_job_id=short,
                    model=tag.model,
                    input_dataset_id=input_ref,
                    output_dataset_id=self._name("datasets", short_id(tag, "-output")),
                    display_name=f"batchbench {tag.run} {tag.sub}"[:128],
                    inference_parameters=inference,
                )
            except fireworks.ConflictError:
                job = self._jobs.get(short)
        return self._view(job)

    def _view(self, job: Any) -> BatchView:
        """A job, normalised; an ended one's files are its output dataset's."""
        state = str(job.state or "")
        if state not in PHASES and state not in ENDINGS:
            raise ApiError(f"batch inference job {job.name} has an unknown state {state!r}")
        progress = job.job_progress
        ending = ENDINGS.get(state)
        files: tuple[str, ...] = ()
        if ending is not None and job.output_dataset_id:
            files = self._output_files(str(job.output_dataset_id))
        message = job.status.message if job.status is not None else None
        if ending == "completed" and not files:
            # COMPLETED before its output dataset exists (as the service does for a
            # while): not lost, still finishing: waited for like a running job.
            return BatchView(
                id=str(job.name).rsplit("/", 1)[-1],
                status=f"{state} (results not yet available)",
                phase="running",
                awaiting=True,
                total=int(progress.total_input_requests or 0) if progress else 0,
                completed=int(progress.successfully_processed_requests or 0) if progress else 0,
                failed=int(progress.failed_requests or 0) if progress else 0,
                created_at=timestamp(job.create_time, f"batch inference job {job.name}"),
            )
        return BatchView(
            id=str(job.name).rsplit("/", 1)[-1],
            status=state,
            phase="ended" if ending else PHASES[state],
            ending=ending,
            total=int(progress.total_input_requests or 0) if progress else 0,
            completed=int(progress.successfully_processed_requests or 0) if progress else 0,
            failed=int(progress.failed_requests or 0) if progress else 0,
            files=files,
            errors=(BatchError(state, message),) if ending and not files else None,
            created_at=timestamp(job.create_time, f"batch inference job {job.name}"),
        )

    def _output_files(self, dataset: str) -> tuple[str, ...]:
        short = dataset.rsplit("/", 1)[-1]
        try:
            found = self._call(
                f"list the files of {short}",
                functools.partial(self.sdk.datasets.get_download_endpoint, short),
            )
        except ApiNotFoundError:
            return ()
        return tuple(f"{short}/{name}" for name in sorted(found.filename_to_signed_urls or {}))

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """The job under this submission's own id, if one was made (one call, no walk)."""
        short = short_id(tag)
        try:
            job = self._call(
                f"get batch inference job {short}", functools.partial(self._jobs.get, short)
            )
        except ApiNotFoundError:
            return []
        return [] if short in known else [self._view(job)]

    def _all(self) -> Iterator[Any]:
        page = self._call(
            "list batch inference jobs", functools.partial(self._jobs.list, page_size=PAGE)
        )
        while True:
            yield from page.batch_inference_jobs or []
            if not page.next_page_token:
                return
            page = self._call(
                "list batch inference jobs",
                functools.partial(self._jobs.list, page_size=PAGE, page_token=page.next_page_token),
            )

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        return walk_list(
            self._all(), batch_ids, lambda j: str(j.name).rsplit("/", 1)[-1], self._view
        )

    def retrieve(self, batch_id: str) -> BatchView:
        job = self._call(
            f"get batch inference job {batch_id}",
            functools.partial(self._jobs.get, batch_id),
            batch_id,
        )
        return self._view(job)

    def cancel(self, batch_id: str) -> BatchView | None:
        """None when the job had already ended (:func:`.base.cancel_unless_ended`)."""
        path = f"/v1/{self._name('batchInferenceJobs', batch_id)}:cancel"

        def cancel() -> BatchView:
            self._call(
                f"cancel batch inference job {batch_id}",
                functools.partial(self.sdk.post, path, body={}, cast_to=object),
                batch_id,
            )
            return self.retrieve(batch_id)

        return cancel_unless_ended(cancel, functools.partial(self.retrieve, batch_id))

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        """One file of the output dataset, verbatim, through its signed URL."""
        dataset, _, name = ref.partition("/")

        def signed() -> str:
            found = self.sdk.datasets.get_download_endpoint(dataset)
            urls = found.filename_to_signed_urls or {}
            if name not in urls:
                raise ApiError(f"{name} is not a file of dataset {dataset}", batch_id=batch_id)
            return urls[name]

        @contextlib.contextmanager
        def stream() -> Iterator[Any]:
            with self._http.stream("GET", signed()) as resp:
                if resp.status_code >= 400:
                    raise status_error(
                        f"download {ref}",
                        resp.status_code,
                        resp.read().decode()[:300],
                        key_hint=self.context.key_hint,
                        batch_id=batch_id,
                    )
                yield resp

        return self._call.download(stream, f"download {ref}", batch_id, dest)

    def delete(self, refs: Sequence[str]) -> None:
        """A submission's datasets, input and output (the run keeps its copies)."""
        for dataset in dict.fromkeys(
            ref.split("/")[-1] if ref.startswith("accounts/") else ref.partition("/")[0]
            for ref in refs
        ):
            with contextlib.suppress(ApiNotFoundError):
                self._call(
                    f"delete dataset {dataset}",
                    functools.partial(self.sdk.datasets.delete, dataset),
                )
