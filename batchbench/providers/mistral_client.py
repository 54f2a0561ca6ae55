"""Mistral's Batch API through the mistralai SDK (Speakeasy-made: its errors are
:class:`MistralError` with the status and body, its transport httpx's).

A request file is uploaded (``purpose="batch"``) and a job made of it with the model
and the run's mark as ``metadata``, which Mistral keeps: a create whose outcome was lost
is found by listing the jobs made since. Jobs say ``QUEUED``, ``RUNNING``,
``CANCELLATION_REQUESTED`` and how they ended, with line counts; results and errors are
files, downloaded verbatim.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ApiNotFoundError, ConfigError, InvariantError
from ..kinds import Ending, Phase
from . import retry, speakeasy, tls
from .base import (
    CLOCK_SKEW,
    LANDS_WITHIN,
    BatchError,
    BatchView,
    Marks,
    Service,
    Tag,
    cancel_unless_ended,
    walk_list,
)
from .client_base import phase_of
from .downloads import Sink, verbatim
from .one_by_one import CallKind, Calls
from .openai_wire import ENDPOINT
from .prefixes import MISTRAL as PREFIX

T = TypeVar("T")
TIMEOUT_MS = 60_000
ENDINGS: dict[str, Ending] = {
    "SUCCESS": "completed",
    "FAILED": "failed",
    "TIMEOUT_EXCEEDED": "expired",
    "CANCELLED": "cancelled",
}
PHASES: dict[str, Phase] = {
    "QUEUED": "pending",
    "RUNNING": "running",
    "CANCELLATION_REQUESTED": "cancelling",
}


def view(job: dict[str, Any]) -> BatchView:
    """A Mistral batch job, normalised."""
    status, phase, ending = phase_of(job, ENDINGS, PHASES)
    files = (job.get("output_file"), job.get("error_file"))
    errors = [BatchError(None, str(e.get("message"))) for e in job.get("errors") or []]
    return BatchView(
        id=str(job["id"]),
        status=status,
        phase=phase,
        ending=ending,
        total=int(job.get("total_requests") or 0),
        completed=int(job.get("succeeded_requests") or 0),
        failed=int(job.get("failed_requests") or 0),
        files=tuple(f for f in files if f) if ending is not None else (),
        errors=tuple(errors) if errors and ending == "failed" else None,
        created_at=float(job["created_at"]) if job.get("created_at") is not None else None,
    )


class MistralClient(speakeasy.SpeakeasyClient):
    marks: Marks = "tag"  # the job's metadata
    lands_within: float = LANDS_WITHIN  # a create of unknown outcome may land this late

    def make_sdk(self, service: Service, api_key: str) -> Any:
        import httpx2
        from mistralai.client import Mistral

        http = httpx2.Client(verify=tls.context(), follow_redirects=True)
        # given, or the SDK makes its own async client with a TLS context of its own (20 ms)
        unused = httpx2.AsyncClient(verify=tls.context())
        return Mistral(
            api_key=api_key,
            server_url=service.base_url,
            client=http,
            async_client=unused,
            timeout_ms=TIMEOUT_MS,
        )

    def error_class(self) -> type[Exception]:
        from mistralai.client.errors import MistralError

        return MistralError

    # the service ---------------------------------------------------------------
    def check_models(self, models: Iterable[str]) -> None:
        preflight = functools.partial(
            self.retry.preflight,
            url=self.service.base_url,
            where=self.context.where,
            errors=self._errors,
        )
        quick = int(retry.PREFLIGHT_TIMEOUT * 1000)
        for model in dict.fromkeys(models):
            found = model.removeprefix(PREFIX)
            look_up = functools.partial(self.sdk.models.retrieve, model_id=found, timeout_ms=quick)
            try:
                preflight(f"look up model {model!r}", look_up)
            except ApiNotFoundError:
                try:
                    preflight(
                        "list models", functools.partial(self.sdk.models.list, timeout_ms=quick)
                    )
                except ApiNotFoundError:
                    raise ConfigError(
                        f"{self.service.base_url} is not the Mistral API's base URL: it answers"
                        f" 404 to the list of models too; check {self.context.where}"
                    ) from None
                raise ConfigError(
                    f"model {model!r} is not available at {self.service.base_url} (HTTP 404);"
                    " check its name"
                ) from None

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """None: Mistral has no flex tier for a batch's tail."""
        return None

    def upload(self, path: Path, tag: Tag) -> str | None:
        def send() -> Any:
            content = path.read_bytes()
            return self.sdk.files.upload(
                file={"file_name": path.name, "content": content}, purpose="batch"
            )

        return str(self._call(f"upload {path.name}", send).id)

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        if input_ref is None:
            raise InvariantError("a Mistral job needs its uploaded file")
        metadata = {
            "batchbench_run": tag.run[:512],
            "batchbench_run_id": tag.run_id,
            "batchbench_stage": tag.stage,
            "batchbench_sub": tag.sub,
        }
        with self._errors(f"create batch job for {input_ref}"):  # once: never retried blind
            job = self.sdk.batch.jobs.create(
                endpoint=ENDPOINT,
                input_files=[input_ref],
                model=tag.model.removeprefix(PREFIX),
                metadata=metadata,
                timeout_hours=24,
            )
            return view(job.model_dump(by_alias=True))

    def _jobs_since(self, since: float) -> Iterator[dict[str, Any]]:
        """The jobs made since ``since``, newest first, a page at a time."""
        after = datetime.fromtimestamp(max(since - CLOCK_SKEW, 0), timezone.utc)
        page = 0
        while True:
            listed = self._call(
                "list batch jobs",
                functools.partial(
                    self.sdk.batch.jobs.list, page=page, page_size=100, created_after=after
                ),
            )
            data = [j.model_dump(by_alias=True) for j in listed.data or []]
            yield from data
            page += 1
            if not data or page * 100 >= listed.total:
                return

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        for job in self._jobs_since(since):
            meta = job.get("metadata") or {}
            mine = (
                meta.get("batchbench_run_id") == tag.run_id
                and meta.get("batchbench_sub") == tag.sub
            )
            if mine and job["id"] not in known:
                return [view(job)]
        return []

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        listed = self._jobs_since(since) if batch_ids else iter(())
        return walk_list(listed, batch_ids, lambda j: str(j["id"]), view)

    def retrieve(self, batch_id: str) -> BatchView:
        job = self._call(
            f"retrieve batch job {batch_id}",
            functools.partial(self.sdk.batch.jobs.get, job_id=batch_id),
            batch_id,
        )
        return view(job.model_dump(by_alias=True))

    def cancel(self, batch_id: str) -> BatchView | None:
        return cancel_unless_ended(
            lambda: view(
                self._call(
                    f"cancel batch job {batch_id}",
                    functools.partial(self.sdk.batch.jobs.cancel, job_id=batch_id),
                    batch_id,
                ).model_dump(by_alias=True)
            ),
            functools.partial(self.retrieve, batch_id),
        )

    def download(self, batch_id: str, ref: str, dest: Path) -> int:
        def fill(sink: Sink) -> None:
            reply = self.sdk.files.download(file_id=ref)
            for chunk in reply.iter_bytes():
                sink.write(chunk)

        def attempt() -> int:
            with self._errors(f"download {ref}", batch_id):
                return verbatim(dest, fill)

        return self.retry(attempt)

    def delete(self, refs: Sequence[str]) -> None:
        for ref in refs:
            with contextlib.suppress(ApiNotFoundError):
                self._call(f"delete {ref}", functools.partial(self.sdk.files.delete, file_id=ref))
