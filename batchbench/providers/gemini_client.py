"""Gemini Batch Mode through the google-genai SDK: files, batch jobs, models, its errors.

The request file is uploaded through the Files API and named in the create
call; the job carries a display name naming the run and the submission, so a
job whose create outcome was lost is found again by listing
(:meth:`GeminiClient.find`). The SDK says nothing of a job's counts (its
``BatchJob`` has no ``batchStats`` for this API), so progress comes from the
collected results. A job can say ``SUCCEEDED`` before its responses file is
named: it is not ended until the file is there.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from google import genai
from google.genai import types

from ..errors import (
    ApiError,
    ApiNotFoundError,
    ConfigError,
    InvariantError,
    Unreachable,
)
from ..kinds import Ending, Phase
from . import retry, tls
from .base import (
    LANDS_WITHIN,
    BatchError,
    BatchView,
    Marks,
    Tag,
    cancel_unless_ended,
    walk_list,
)
from .client_base import ClientBase
from .closing import shut
from .downloads import verbatim
from .gemini_flex import flex_calls
from .google_errors import genai_errors
from .marked import Marked
from .one_by_one import CallKind, Calls

T = TypeVar("T")
TIMEOUT_MS = 60_000
PHASES: dict[str, Phase] = {
    "JOB_STATE_QUEUED": "pending",
    "JOB_STATE_PENDING": "pending",
    "JOB_STATE_RUNNING": "running",
    "JOB_STATE_UPDATING": "running",
    "JOB_STATE_PAUSED": "running",
    "JOB_STATE_CANCELLING": "cancelling",
}
ENDINGS: dict[str, Ending] = {
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "completed",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_EXPIRED": "expired",
}


def display_name(tag: Tag) -> str:
    """What names a job as one submission of one run."""
    return f"batchbench-{tag.run_id}-{tag.sub}"


def view(job: types.BatchJob) -> BatchView:
    """A batch job, normalised. A job that ended with its responses file not yet named
    (SUCCEEDED before the file, as the service does) is still running."""
    state = str(job.state.value if job.state is not None else "")
    if state not in PHASES and state not in ENDINGS:
        raise ApiError(f"batch job {job.name} has an unknown state {state!r}", batch_id=job.name)
    file_name = job.dest.file_name if job.dest is not None else None
    ending = ENDINGS.get(state)
    if ending == "completed" and file_name is None:
        return BatchView(
            id=str(job.name),
            status=f"{state} (its responses file not yet named)",
            phase="running",
            awaiting=True,
            created_at=_time(job),
        )
    return BatchView(
        id=str(job.name),
        status=state,
        phase="ended" if ending else PHASES[state],
        ending=ending,
        files=(file_name,) if ending and file_name else (),
        errors=(BatchError(state, None),) if ending and not file_name else None,
        created_at=_time(job),
    )


def _time(job: types.BatchJob) -> float | None:
    return job.create_time.timestamp() if job.create_time is not None else None


class GeminiClient(ClientBase):
    """Files and batch jobs through the SDK, its errors turned into batchbench's."""

    marks: Marks = "tag"  # a job's display name names the run and submission
    lands_within: float = LANDS_WITHIN  # a create of unknown outcome may land this late

    def connect(self, api_key: str) -> None:
        self._marked: Marked[types.BatchJob] = Marked()
        shared = tls.context()
        options = types.HttpOptions(
            base_url=self.service.base_url,
            timeout=TIMEOUT_MS,
            client_args={"verify": shared},
            async_client_args={"verify": shared, "ssl": shared},  # httpx's, aiohttp's
        )
        self.sdk = genai.Client(api_key=api_key, http_options=options)  # no retries: ours
        self._secret = api_key

    def _errors(
        self, what: str, batch_id: str | None = None
    ) -> contextlib.AbstractContextManager[None]:
        return genai_errors(
            what, self.service.base_url, self._secret, self.context.key_hint, batch_id
        )

    def _call(self, what: str, fn: Callable[[], T], batch_id: str | None = None) -> T:
        def attempt() -> T:
            with self._errors(what, batch_id):
                return fn()

        return self.retry(attempt)

    def close(self) -> None:
        """Its connections released (the run has ended)."""
        shut(self.sdk)

    def check_models(self, models: Iterable[str]) -> None:
        """Each model exists for this key before anything is paid; a 404 for the list
        of models too means the base URL is not Gemini's."""
        quick = types.HttpOptions(timeout=int(retry.PREFLIGHT_TIMEOUT * 1000))

        preflight = functools.partial(
            self.retry.preflight,
            url=self.service.base_url,
            where=self.context.base_url_variable,
            errors=self._errors,
        )

        for model in dict.fromkeys(models):
            try:
                look_up = functools.partial(
                    self.sdk.models.get,
                    model=model,
                    config=types.GetModelConfig(http_options=quick),
                )
                preflight(f"look up model {model!r}", look_up)
            except ApiNotFoundError:
                try:
                    listing = functools.partial(
                        self.sdk.models.list, config=types.ListModelsConfig(http_options=quick)
                    )
                    preflight("list models", functools.partial(_first, listing))
                except ApiNotFoundError:
                    raise ConfigError(
                        f"{self.service.base_url} is not the Gemini API's base URL: it answers"
                        f" 404 to the list of models too; check {self.where}"
                    ) from None
                raise ConfigError(
                    f"model {model!r} is not available at {self.service.base_url} (HTTP 404);"
                    " check its name"
                ) from None
            except Unreachable as exc:  # before a run: a wrong URL, said at once
                raise ApiError(str(exc)) from None

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """On flex, each request one generateContent call at the batch price (a deadline's
        fallback; a running job reports no progress to judge a --tail-flex tail by)."""
        return flex_calls(self.sdk, model) if kind == "flex" else None

    def upload(self, path: Path, tag: Tag) -> str:
        config = types.UploadFileConfig(display_name=path.name, mime_type="jsonl")
        made = self._call(
            f"upload {path.name}", lambda: self.sdk.files.upload(file=path, config=config)
        )
        return str(made.name)

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        if input_ref is None:
            raise InvariantError("a Gemini batch job needs its uploaded file")
        config = types.CreateBatchJobConfig(display_name=display_name(tag))
        with self._errors(f"create batch job for {input_ref}"):  # once: never retried blind
            job = self.sdk.batches.create(model=tag.model, src=input_ref, config=config)
        return view(job)

    def _jobs(self) -> Iterator[types.BatchJob]:
        """Every job the key can see, a page at a time (newest first at Google)."""
        pager = self._call(
            "list batch jobs",
            lambda: self.sdk.batches.list(config=types.ListBatchJobsConfig(page_size=100)),
        )
        while True:
            yield from pager.page
            if not pager.config.get("page_token"):
                return
            self._call("list batch jobs", pager.next_page)

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """The job whose display name names this run and submission. The run's jobs seen
        so far are kept: each look walks back only to the previous one's start."""
        marked = self._marked.index(tag.run_id, since, self.clock.time(), self._walk_run)
        job = marked.get(tag.sub)
        return [view(job)] if job is not None and job.name not in known else []

    def _walk_run(self, run_id: str, since: float) -> dict[str, types.BatchJob]:
        head = f"batchbench-{run_id}-"
        out: dict[str, types.BatchJob] = {}
        for job in self._jobs():
            created = _time(job)
            if created is not None and created < since:
                break  # newest first: the rest are older still
            name = job.display_name or ""
            if name.startswith(head):
                out.setdefault(name.removeprefix(head), job)
        return out

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        return walk_list(self._jobs(), batch_ids, lambda j: str(j.name), view)

    def retrieve(self, batch_id: str) -> BatchView:
        job = self._call(
            f"get batch job {batch_id}", lambda: self.sdk.batches.get(name=batch_id), batch_id
        )
        return view(job)

    def cancel(self, batch_id: str) -> BatchView | None:
        """None when the job had already ended (:func:`.base.cancel_unless_ended`)."""

        def cancel() -> BatchView:
            self._call(
                f"cancel batch job {batch_id}",
                lambda: self.sdk.batches.cancel(name=batch_id),
                batch_id,
            )
            return self.retrieve(batch_id)

        return cancel_unless_ended(cancel, functools.partial(self.retrieve, batch_id))

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        """The responses file's bytes verbatim to ``dest`` (:func:`.downloads.verbatim`)."""

        def attempt() -> int:
            with self._errors(f"download {ref}", batch_id):
                return verbatim(
                    dest, lambda sink: self.sdk.files.download(file=ref, destination=sink)
                )

        return self.retry(attempt)

    def delete(self, refs: Sequence[str]) -> None:
        for ref in refs:
            with contextlib.suppress(ApiNotFoundError):
                self._call(f"delete {ref}", functools.partial(self.sdk.files.delete, name=ref))


def _first(listing: Callable[[], Any]) -> Any:
    """The first item of a pager (enough to know the list is there)."""
    return next(iter(listing()), None)
