"""Vertex AI batch prediction through google-genai (``Client(vertexai=True)``) and
google-cloud-storage: requests up to Cloud Storage, a job per submission, predictions
back down.

Where a run's jobs live is its *account* (:class:`.base.Service`): the project
(``GOOGLE_CLOUD_PROJECT``), the location (``GOOGLE_CLOUD_LOCATION``, ``us-central1``
when unset; ``global`` for Gemini only) and the Cloud Storage prefix
(``BATCHBENCH_GCS_URI``), all remembered by the run. Credentials are Application
Default Credentials (:func:`.gcs.credentials`); the API's base URL is the run's
(``GOOGLE_VERTEX_BASE_URL``, else the location's endpoint).

Exactly once: Vertex takes no idempotency token, so a job carries the run's mark in
its display name (``batchbench-<run id>-<submission>``) and labels
(``batchbench-run``, ``batchbench-sub``); before every create the project's jobs
are listed with a filter on them, and a job is the run's only when both say so.
Each submission writes under its own output prefix (the SDK's default, the input's
folder, would mix runs). A job that ran part of its lines
(``JOB_STATE_PARTIALLY_SUCCEEDED``, or failed with predictions written) keeps
them; the rest are sent again. A job read failed with nothing written is read again
for :data:`FAILED_GRACE` (unless its error ends a job for good): such a job has run
on and written its predictions, which must not be bought a second time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Literal, TypeVar

from google import genai
from google.genai import types

from ..errors import (
    ApiError,
    ApiNotFoundError,
    ConfigError,
    InvariantError,
    NoRoom,
    TransientApiError,
)
from ..formats import article
from ..kinds import Ending
from . import gcs, retry, tls
from .base import (
    LANDS_WITHIN,
    BatchError,
    BatchView,
    Marks,
    Tag,
    cancel_unless_ended,
)
from .client_base import ClientBase
from .closing import shut
from .downloads import verbatim
from .gemini_client import ENDINGS as GEMINI_ENDINGS
from .gemini_client import PHASES
from .gemini_flex import flex_calls
from .google_errors import genai_errors
from .one_by_one import CallKind, Calls
from .vertex_wire import family, model_name

T = TypeVar("T")
Family = Literal["google", "anthropic"]
TIMEOUT_MS = 60_000
# google-genai's job states, as the Gemini API's client reads them — but for a job that
# ran part of its lines: Vertex leaves the rest out of its predictions (sent again).
ENDINGS: dict[str, Ending] = {**GEMINI_ENDINGS, "JOB_STATE_PARTIALLY_SUCCEEDED": "expired"}
# A job read failed with nothing written is read again this long (seconds since it said
# so) before its requests go out again — unless its error ends a job for good
# (google.rpc.Code: INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED,
# FAILED_PRECONDITION, OUT_OF_RANGE, UNAUTHENTICATED).
FAILED_GRACE = 1800.0
DEFINITE = frozenset({3, 5, 6, 7, 9, 11, 16})


def display_name(tag: Tag) -> str:
    return f"batchbench-{tag.run_id}-{tag.sub}"


def labels(tag: Tag) -> dict[str, str]:
    """The run's mark as Google labels (lower case, digits, ``-`` and ``_``, 63 at most)."""
    sub = re.sub(r"[^a-z0-9_-]", "-", tag.sub.lower())[:63]
    return {"batchbench-run": tag.run_id.lower()[:63], "batchbench-sub": sub}


def _time(job: types.BatchJob) -> float | None:
    return job.create_time.timestamp() if job.create_time is not None else None


class VertexClient(ClientBase):
    marks: Marks = "tag"  # the job's display name and labels name the run and submission
    lands_within: float = LANDS_WITHIN  # a create of unknown outcome may land this late

    publisher: Family  # whose models its jobs run (:class:`VertexGeminiClient`, …Claude…)
    _flex_sdk: genai.Client | None = None  # on the global endpoint, made when first asked

    def connect(self, api_key: str) -> None:
        service, context, publisher = self.service, self.context, self.publisher
        where = f"{context.base_url_variable} and GOOGLE_CLOUD_LOCATION"
        self.preflight = functools.partial(
            self.retry.preflight, url=service.base_url, where=where, errors=self._errors
        )
        project = service.setting("GOOGLE_CLOUD_PROJECT")
        if not project:
            raise ConfigError("Vertex AI jobs run in a project: set GOOGLE_CLOUD_PROJECT")
        self.location = service.setting("GOOGLE_CLOUD_LOCATION") or context.default_location
        if self.location == "global" and publisher == "anthropic":
            raise ConfigError(
                "Claude batch jobs on Vertex AI run in a region, not 'global': set"
                " GOOGLE_CLOUD_LOCATION to one (us-east5, europe-west1…)"
            )
        creds = self.creds = gcs.credentials()
        self.project, self._flex_sdk = project, None
        self.bucket = gcs.Bucket(service.setting("BATCHBENCH_GCS_URI"), project, creds)
        shared = tls.context()
        options = types.HttpOptions(
            base_url=service.base_url,
            api_version="v1",
            timeout=TIMEOUT_MS,
            client_args={"verify": shared},
            async_client_args={"verify": shared, "ssl": shared},
        )
        with self._errors("Vertex AI's settings"):
            self.sdk = genai.Client(
                vertexai=True,
                project=project,
                location=self.location,
                credentials=creds,
                http_options=options,
            )

    # errors -------------------------------------------------------------------
    @contextlib.contextmanager
    def _errors(self, what: str, batch_id: str | None = None) -> Iterator[None]:
        with (
            gcs.storage_errors(what, batch_id),
            genai_errors(what, self.service.base_url, "", gcs.KEY_HINT, batch_id),
        ):
            yield

    def _call(self, what: str, fn: Callable[[], T], batch_id: str | None = None) -> T:
        def attempt() -> T:
            with self._errors(what, batch_id):
                return fn()

        return self.retry(attempt)

    def _model(self, model: str) -> str:
        """The name the SDK resolves to the publisher's model (``anthropic/claude-…``)."""
        name = model_name(model)
        return name if self.publisher == "google" else f"anthropic/{name}"

    # the service ---------------------------------------------------------------
    def close(self) -> None:
        """Its connections released (the run has ended)."""
        shut(self.sdk, self._flex_sdk, getattr(self.bucket, "client", None))

    def check_models(self, models: Iterable[str]) -> None:
        """Before anything is paid: each model the publisher's (and there), the bucket."""
        quick = types.HttpOptions(timeout=int(retry.PREFLIGHT_TIMEOUT * 1000))
        for model in dict.fromkeys(models):
            if family(model) != self.publisher:
                raise ConfigError(f"model {model!r} is not {article(self.publisher)} model")
            look_up = functools.partial(
                self.sdk.models.get,
                model=self._model(model),
                config=types.GetModelConfig(http_options=quick),
            )
            try:
                self.preflight(f"look up model {model!r}", look_up)
            except ApiNotFoundError:
                raise ConfigError(
                    f"model {model!r} is not available on Vertex AI at {self.service.base_url}"
                    f" in {self.location} (HTTP 404); check its name and the location"
                ) from None
        self.preflight("look up the Cloud Storage bucket", self.bucket.check)

    def _folder(self, tag: Tag) -> str:
        return f"bb-{tag.token}"

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """Gemini's Flex PayGo (:mod:`.gemini_flex`), on the global endpoint whatever
        the jobs' location (the only one it is served on); Claude: none."""
        if kind != "flex" or self.publisher != "google":
            return None
        return flex_calls(self._global(), model_name(model), vertex=True)

    def _global(self) -> genai.Client:
        """A client of the project on the global endpoint: the run's base URL where one
        is given (an emulator, a proxy), else Google's global one."""
        if self._flex_sdk is None:
            base, google = self.service.base_url, self.context.region_url
            if google is not None and base == google({"GOOGLE_CLOUD_LOCATION": self.location}):
                base = google({"GOOGLE_CLOUD_LOCATION": "global"})  # Google's own: its twin
            shared = tls.context()
            options = types.HttpOptions(
                base_url=base, api_version="v1", client_args={"verify": shared}
            )
            with self._errors("Vertex AI's settings"):
                self._flex_sdk = genai.Client(
                    vertexai=True,
                    project=self.project,
                    location="global",
                    credentials=self.creds,
                    http_options=options,
                )
        return self._flex_sdk

    def upload(self, path: Path, tag: Tag) -> str:
        uri = self.bucket.uri(self._folder(tag), path.name)
        self._call(f"upload {path.name}", lambda: self.bucket.put(path, uri))
        return uri

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        if input_ref is None:
            raise InvariantError("a Vertex AI job needs its requests in Cloud Storage")
        config = types.CreateBatchJobConfig(
            display_name=display_name(tag),
            dest=self.bucket.uri(self._folder(tag), tag.sub, "out"),
            http_options=types.HttpOptions(extra_body={"labels": labels(tag)}),
        )
        try:
            with self._errors(f"create job for {input_ref}"):  # once: never retried blind
                job = self.sdk.batches.create(
                    model=self._model(tag.model), src=input_ref, config=config
                )
        except TransientApiError as exc:
            # Vertex's quota of concurrent jobs (4 Claude jobs a project): a definite
            # refusal, 429 RESOURCE_EXHAUSTED naming the quota; nothing was made.
            if exc.status == 429 and "concurrent" in str(exc):
                raise NoRoom(str(exc), status=429, retry_after=exc.retry_after) from None
            raise
        return self._view(job)

    def _jobs(self, filter_text: str) -> Iterator[types.BatchJob]:
        config = types.ListBatchJobsConfig(page_size=100, filter=filter_text)
        pager = self._call("list jobs", lambda: self.sdk.batches.list(config=config))
        while True:
            yield from pager.page
            if not pager.config.get("page_token"):
                return
            self._call("list jobs", pager.next_page)

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """The job whose display name and labels both name this run and submission."""
        name, marks = display_name(tag), labels(tag)
        wanted = " AND ".join(
            [f'labels.{k}="{v}"' for k, v in marks.items()] + [f'display_name="{name}"']
        )
        for job in self._jobs(wanted):
            ours = job.display_name == name
            if ours and job.name not in known:
                return [self._view(job)]
        return []

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        """Nothing from a list: each job is retrieved by name (the list is filtered)."""
        return {}

    def retrieve(self, batch_id: str) -> BatchView:
        job = self._call(
            f"get job {batch_id}", lambda: self.sdk.batches.get(name=batch_id), batch_id
        )
        return self._view(job)

    def _view(self, job: types.BatchJob) -> BatchView:
        """A job, normalised, its predictions listed once it has ended. One that said it
        succeeded with none there yet is still running (their wait is bounded); one
        that failed or stopped with predictions written keeps them."""
        state = str(job.state.value if job.state is not None else "")
        if state not in PHASES and state not in ENDINGS:
            raise ApiError(f"job {job.name} has an unknown state {state!r}", batch_id=job.name)
        ident, ending = str(job.name), ENDINGS.get(state)
        stats = job.completion_stats
        base = BatchView(
            id=ident,
            status=state,
            phase="running",
            created_at=_time(job),
            completed=int(stats.successful_count or 0) if stats else 0,
            failed=int(stats.failed_count or 0) if stats else 0,
        )
        if ending is None:
            return dataclasses.replace(base, phase=PHASES[state])
        folder = job.output_info.gcs_output_directory if job.output_info else None
        if folder is None and ending == "failed" and job.dest is not None:
            folder = job.dest.gcs_uri  # a failed job may not name its folder: ours, asked
        files: tuple[str, ...] = ()
        if folder:
            names = self._call(f"list {folder}", lambda: self.bucket.names(folder), ident)
            files = tuple(n for n in names if n.endswith(".jsonl"))
        if ending == "completed" and not files:
            status = f"{state} (its predictions not yet there)"
            return dataclasses.replace(base, status=status, awaiting=True)
        message = job.error.message if job.error is not None else None
        if ending == "failed" and not files and self._may_run_on(job):
            status = f"{state} (nothing written yet; read again, as a job read failed may run on)"
            return dataclasses.replace(base, status=status)
        if ending == "failed" and files:
            status = f"{state} (the predictions of the lines it ran kept)"
            return dataclasses.replace(
                base, status=status, phase="ended", ending="expired", files=files
            )
        errors = None if files else (BatchError(state, message),)
        return dataclasses.replace(base, phase="ended", ending=ending, files=files, errors=errors)

    def _may_run_on(self, job: types.BatchJob) -> bool:
        """Whether a job read failed with nothing written may yet be running: its error
        not one that ends a job for good (a bad input, a refused permission), and less
        than :data:`FAILED_GRACE` since it said so. Its requests are not sent again until
        then: a job read failed has run on and written its predictions."""
        code = job.error.code if job.error is not None else None
        if code in DEFINITE:
            return False
        said = job.update_time or job.end_time
        return said is None or self.clock.time() - said.timestamp() < FAILED_GRACE

    def cancel(self, batch_id: str) -> BatchView | None:
        def cancel() -> BatchView:
            self._call(
                f"cancel job {batch_id}", lambda: self.sdk.batches.cancel(name=batch_id), batch_id
            )
            return self.retrieve(batch_id)

        return cancel_unless_ended(cancel, functools.partial(self.retrieve, batch_id))

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        def attempt() -> int:
            with self._errors(f"download {ref}", batch_id):
                return verbatim(dest, self.bucket.fill(ref))

        return self.retry(attempt)

    def delete(self, refs: Sequence[str]) -> None:
        """Nothing: the requests and predictions are in the user's own bucket, theirs."""


class VertexGeminiClient(VertexClient):
    publisher: Family = "google"


class VertexClaudeClient(VertexClient):
    publisher: Family = "anthropic"
