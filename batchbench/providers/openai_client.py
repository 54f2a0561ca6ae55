"""OpenAI's Batch API through the openai SDK: files, batches, models, and its exception map.

The SDK's own retries are off (:mod:`.retry` is the one policy); each attempt
is bounded in time (60 s, 5 s to connect). A batch is tagged with metadata
naming the run and submission, so one whose create outcome was lost is found
again by listing (:meth:`OpenAIClient.find`).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import openai

from ..errors import (
    ApiError,
    FileNotYetVisible,
    InvariantError,
)
from ..kinds import Ending, Phase
from .base import (
    LANDS_WITHIN,
    BatchError,
    BatchView,
    Marks,
    Service,
    Tag,
    timestamp,
    walk_list,
)
from .client_base import StainlessBatches, sdk_calls, stainless_sdk
from .closing import shut
from .http_errors import one_line
from .marked import Marked
from .one_by_one import CallKind, Calls
from .openai_flex import chat_calls
from .openai_wire import ENDPOINT

ENDINGS: dict[str, Ending] = {
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}
STATUSES = ("validating", "in_progress", "finalizing", "cancelling", *ENDINGS)


def view(batch: dict[str, Any]) -> BatchView:
    """An OpenAI batch object, normalised."""
    status = batch.get("status")
    if status not in STATUSES:
        raise ApiError(
            f"batch {batch.get('id')} has an unknown status {status!r}", batch_id=batch.get("id")
        )
    counts = batch.get("request_counts") or {}
    ending = ENDINGS.get(status)
    ended = ending is not None
    phase: Phase = (
        "ended"
        if ended
        else "pending"
        if status == "validating"
        else "cancelling"
        if status == "cancelling"
        else "running"
    )
    errors = (batch.get("errors") or {}).get("data")
    files = (batch.get("output_file_id"), batch.get("error_file_id"))
    # Completed with lines counted but no file named to hold them: not lost, still
    # being written (a transient the service shows for a while).
    ran = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
    awaiting = status == "completed" and ran > 0 and not any(files)
    if awaiting:
        phase, ending = "running", None
    return BatchView(
        id=batch["id"],
        status=f"{status} (its files not yet named)" if awaiting else status,
        phase=phase,
        ending=ending,
        awaiting=awaiting,
        total=int(counts.get("total") or 0),
        completed=int(counts.get("completed") or 0),
        failed=int(counts.get("failed") or 0),
        files=tuple(f for f in files if f) if ended else (),
        errors=tuple(BatchError.of(e) for e in errors if isinstance(e, dict)) if errors else None,
        created_at=timestamp(batch.get("created_at"), f"batch {batch['id']}"),
    )


def _file_not_visible(what: str, exc: Any) -> ApiError | None:
    """A 400 naming ``file_id`` right after an upload: the file is not visible yet."""
    param = getattr(exc, "param", None)
    if exc.status_code == 400 and param == "file_id":
        return FileNotYetVisible(f"{what}: {one_line(exc.message)}", status=400, param=param)
    return None


class OpenAIClient(StainlessBatches):
    """Batch API calls, SDK errors turned into batchbench's typed errors. The base of the
    OpenAI-shaped batch APIs (Azure, Groq, xAI): each names its SDK (:meth:`module`,
    :meth:`make_sdk`) and what differs."""

    marks: Marks = "tag"  # batch metadata names the run and submission
    lands_within: float = LANDS_WITHIN  # a create of unknown outcome may land this late

    def connect(self, api_key: str) -> None:
        self._marked: Marked[dict[str, Any]] = Marked()
        self.sdk = self.make_sdk(self.service, api_key)
        self._call = sdk_calls(self, self.module(), api_key, refine=self.refine)

    def refine(self, what: str, exc: Any) -> ApiError | None:
        """This service's own reading of a status error (before the common one), if any."""
        return _file_not_visible(what, exc)

    def close(self) -> None:
        shut(self.sdk)

    def module(self) -> ModuleType:
        """The SDK's module (its exceptions): openai's, or a Stainless SDK made like it."""
        return openai

    def make_sdk(self, service: Service, api_key: str) -> openai.OpenAI:
        made: openai.OpenAI = stainless_sdk(
            openai,
            openai.OpenAI,
            service,
            api_key,
            organization=service.setting("OPENAI_ORG_ID"),  # the run's, not today's
            project=service.setting("OPENAI_PROJECT_ID"),
        )
        return made

    # the service ---------------------------------------------------------------
    def check_models(self, models: Iterable[str]) -> None:
        self._call.check_models(
            models,
            self.sdk.models.retrieve,
            self.sdk.models.list,
            self.context.where,
            self.service_id,
        )

    def service_id(self, model: str) -> str:
        """The id the service knows a model by (the name as given, on OpenAI)."""
        return model

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """A batch's tail, or a deadline's fallback, on the flex tier (:mod:`.openai_flex`)."""
        return chat_calls(self.sdk) if kind == "flex" else None

    def upload(self, path: Path, tag: Tag) -> str | None:
        def send() -> Any:
            with open(path, "rb") as fh:
                return self.sdk.files.create(file=(path.name, fh), purpose="batch")

        return str(self._call(f"upload {path.name}", send).id)

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        if input_ref is None:
            raise InvariantError("an OpenAI batch needs its uploaded file")
        metadata = {
            "batchbench_run": tag.run[:512],
            "batchbench_run_id": tag.run_id,
            "batchbench_stage": tag.stage,
            "batchbench_shard": str(tag.seq),
            "batchbench_attempt": str(tag.attempt),
            "batchbench_sub": tag.sub,
        }
        with self._call.errors(f"create batch for {input_ref}"):  # once: never retried blind
            batch = self.sdk.batches.create(
                input_file_id=input_ref,
                endpoint=ENDPOINT,
                completion_window="24h",
                metadata=metadata,
            )
            return view(self._call.reply(batch).model_dump(warnings=False))

    def _batches_since(self, since: float) -> Iterator[dict[str, Any]]:
        """The project's batches, newest first, 100 a call, until the page that reaches
        back before ``since`` (a Unix time)."""
        after: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": 100, **({"after": after} if after else {})}
            page = self._call("list batches", functools.partial(self.sdk.batches.list, **kwargs))
            data = [self._call.reply(b).model_dump(warnings=False) for b in page.data]
            yield from data
            oldest = timestamp(data[-1].get("created_at"), f"batch {data[-1]['id']}") if data else 0
            if not page.has_more or not data or (oldest or 0) < since:
                return
            after = data[-1]["id"]

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """The batch whose metadata names this run and submission. The run's batches
        seen so far are kept: each look walks back only to the previous one's start."""
        marked = self._marked.index(tag.run_id, since, self.clock.time(), self._walk_run)
        found = marked.get(tag.sub)
        return [view(found)] if found is not None and found["id"] not in known else []

    def _walk_run(self, run_id: str, since: float) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for batch in self._batches_since(since):
            meta = batch.get("metadata") or {}
            if meta.get("batchbench_run_id") == run_id and meta.get("batchbench_sub"):
                out.setdefault(str(meta["batchbench_sub"]), batch)  # newest first
        return out

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        listed = self._batches_since(since) if batch_ids else iter(())
        return walk_list(listed, batch_ids, lambda b: str(b["id"]), view)

    def view(self, batch: dict[str, Any]) -> BatchView:
        return view(batch)
