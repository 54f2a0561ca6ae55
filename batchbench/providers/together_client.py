"""Together AI's Batch API through the together SDK (Stainless-made: its exceptions are
openai's family, :mod:`.stainless` maps them).

A request file is uploaded (``purpose="batch-api"``: the SDK asks for an upload URL,
puts the bytes there, then has the file processed) under a name that carries the run's
mark — ``batchbench-<run id>-<submission>.jsonl`` — because a Together batch keeps no
metadata: a batch is the run's when its input file's name says so, and a create whose
outcome was lost is found again by listing the batches and the files' names. Jobs say
``VALIDATING``, ``IN_PROGRESS``, then how they ended, and a progress percentage rather
than line counts.
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any

from ..errors import ApiError, InvariantError
from ..kinds import Ending, Phase
from .base import (
    LANDS_WITHIN,
    BatchError,
    BatchView,
    Marks,
    Tag,
    timestamp,
    walk_list,
)
from .client_base import StainlessBatches, phase_of, sdk_calls, stainless_sdk
from .closing import shut
from .one_by_one import CallKind, Calls
from .openai_flex import chat_calls
from .openai_wire import ENDPOINT
from .prefixes import TOGETHER as PREFIX

ENDINGS: dict[str, Ending] = {
    "COMPLETED": "completed",
    "FAILED": "failed",
    "EXPIRED": "expired",
    "CANCELLED": "cancelled",
}
PHASES: dict[str, Phase] = {"VALIDATING": "pending", "IN_PROGRESS": "running"}


def marked_name(tag: Tag) -> str:
    """The uploaded file's name: the run's mark and the submission (its only tag)."""
    return f"batchbench-{tag.run_id}-{tag.sub}.jsonl"


def view(job: dict[str, Any]) -> BatchView:
    """A Together batch job, normalised."""
    status, phase, ending = phase_of(job, ENDINGS, PHASES)
    files = (job.get("output_file_id"), job.get("error_file_id"))
    error = job.get("error")
    return BatchView(
        id=str(job["id"]),
        status=f"{status} ({float(job.get('progress') or 0):.0f}%)"
        if phase == "running"
        else status,
        phase=phase,
        ending=ending,
        files=tuple(f for f in files if f) if ending is not None else (),
        errors=(BatchError(None, str(error)),) if error and ending == "failed" else None,
        created_at=timestamp(job.get("created_at"), f"batch {job.get('id')}"),
    )


class TogetherClient(StainlessBatches):
    marks: Marks = "tag"  # the input file's name
    lands_within: float = LANDS_WITHIN  # a create of unknown outcome may land this late

    def connect(self, api_key: str) -> None:
        import together

        self.sdk = stainless_sdk(together, together.Together, self.service, api_key)
        self._call = sdk_calls(self, together, api_key)

    def close(self) -> None:
        """Its connections released (the run has ended)."""
        shut(self.sdk)

    def check_models(self, models: Iterable[str]) -> None:
        self._call.check_models(
            models,
            self.sdk.models.retrieve_supported,
            self.sdk.models.list_supported,
            self.context.where,
            lambda model: model.removeprefix(PREFIX),
        )

    def calls(self, kind: CallKind, model: str) -> Calls | None:
        """On demand, each request one chat completion at the list price (a deadline's
        fallback, with --allow-list-price); Together has no flex tier."""
        import together

        return chat_calls(self.sdk, "ondemand", together) if kind == "ondemand" else None

    def upload(self, path: Path, tag: Tag) -> str | None:
        """The file, under its marked name (a link to it: the SDK names an upload by its
        path)."""
        with tempfile.TemporaryDirectory(prefix="batchbench-upload-") as folder:
            named = Path(folder) / marked_name(tag)
            os.symlink(path.resolve(), named)
            send = functools.partial(self.sdk.files.upload, named, purpose="batch-api", check=False)
            return str(self._call(f"upload {path.name}", send).id)

    def create(self, tag: Tag, input_ref: str | None, path: Path) -> BatchView:
        if input_ref is None:
            raise InvariantError("a Together batch needs its uploaded file")
        with self._call.errors(f"create batch for {input_ref}"):  # once: never retried blind
            made = self.sdk.batches.create(
                endpoint=ENDPOINT, input_file_id=input_ref, completion_window="24h"
            )
            job = self._call.reply(made).job
            if job is None:
                raise ApiError(f"create batch for {input_ref}: the reply holds no job")
            return view(job.model_dump(warnings=False))

    def _jobs(self) -> list[dict[str, Any]]:
        listed = self._call("list batches", self.sdk.batches.list)
        jobs = [j.model_dump(warnings=False) for j in listed]
        return sorted(jobs, key=lambda j: -(timestamp(j.get("created_at"), "a batch") or 0))

    def find(self, tag: Tag, since: float, known: Collection[str]) -> list[BatchView]:
        """The batch whose input file carries this submission's marked name."""
        names = {f.id: f.filename for f in self._call("list files", self.sdk.files.list).data}
        wanted = marked_name(tag)
        for job in self._jobs():
            if names.get(str(job.get("input_file_id"))) == wanted and job["id"] not in known:
                return [view(job)]
        return []

    def poll(self, batch_ids: Collection[str], since: float) -> dict[str, BatchView]:
        listed = self._jobs() if batch_ids else []
        return walk_list(listed, batch_ids, lambda j: str(j["id"]), view)

    def view(self, batch: dict[str, Any]) -> BatchView:
        return view(batch)
