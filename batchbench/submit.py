"""Doing one server action for one submission, journaling intent before and outcome after.

The pipeline decides which action comes next; a :class:`Submitter` does it. Each
billable or state-changing call is preceded by its intent in the journal and
followed by its outcome, so a crash at any point is resumed without a batch
created twice: an interrupted create is first looked for on the server by the
submission's metadata, and adopted when found.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from . import _failpoints
from .api import BatchApi
from .collection import check_download
from .errors import (
    ApiError,
    ApiNotFoundError,
    BatchFileError,
    FileNotYetVisible,
    TransientApiError,
)
from .outputs import TruncatedFileError, read_outputs
from .requests import check_file
from .rundir import Run, RunConfig
from .runs import (
    BATCH_STATUSES,
    BatchSeen,
    Created,
    CreateStarted,
    Downloaded,
    Event,
    RemoteDeleted,
    Submission,
    Uploaded,
    UploadStarted,
)


class Submitter:
    def __init__(
        self,
        run: Run,
        config: RunConfig,
        api: BatchApi,
        record: Callable[[Event], None],
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        max_ambiguous_creates: int = 8,
    ) -> None:
        self.run = run
        self.config = config
        self.api = api
        self.record = record
        self.clock = clock
        self.sleep = sleep
        self.max_ambiguous_creates = max_ambiguous_creates
        self._ambiguous_creates = 0

    def metadata(self, sub: Submission) -> dict[str, str]:
        return {
            "batchbench_run": self.config.name[:512],
            "batchbench_run_id": self.config.run_id,
            "batchbench_stage": sub.stage,
            "batchbench_shard": str(sub.seq),
            "batchbench_attempt": str(max(line.attempt for line in sub.lines)),
            "batchbench_sub": sub.id,
        }

    def upload(self, sub: Submission) -> str:
        path = self.run.requests_dir / sub.path
        check_file(path.read_bytes().splitlines(keepends=True), str(path))
        self.record(UploadStarted(sub=sub.id))
        file_id = self.api.upload(path)
        _failpoints.hit("uploaded")
        self.record(Uploaded(sub=sub.id, file_id=file_id))
        return f"uploaded {sub.id} as {file_id}"

    def find_on_server(self, sub: Submission) -> dict[str, Any] | None:
        """The batch an earlier, interrupted create may have made for this submission."""
        for batch in self.api.batches_since((sub.create_started or self.clock()) - 600):
            meta = batch.get("metadata") or {}
            if (
                meta.get("batchbench_run_id") == self.config.run_id
                and meta.get("batchbench_sub") == sub.id
            ):
                return batch
        return None

    def create(self, sub: Submission) -> str:
        """Create once; after an ambiguous failure, look for the batch before creating again."""
        assert sub.file_id is not None
        if sub.create_started is not None:
            found = self.find_on_server(sub)
            if found is not None:
                self.record(Created(sub=sub.id, batch_id=found["id"], adopted=True))
                self.record_batch(sub, found)
                return f"adopted {found['id']} for {sub.id}"
        self.record(CreateStarted(sub=sub.id, file_id=sub.file_id))
        try:
            batch = self.api.create(sub.file_id, self.metadata(sub))
        except (TransientApiError, FileNotYetVisible):
            # Ambiguous (the batch may exist: look for it first), or the file not
            # yet visible right after its upload: create again, a little later.
            self._ambiguous_creates += 1
            if self._ambiguous_creates >= self.max_ambiguous_creates:
                raise
            self.sleep(min(0.1 * 2**self._ambiguous_creates, 10.0))
            return f"create of {sub.id} failed; will look for it, then create again"
        self._ambiguous_creates = 0
        _failpoints.hit("created")
        self.record(Created(sub=sub.id, batch_id=batch["id"]))
        self.record_batch(sub, batch)
        return f"created {batch['id']} for {sub.id}"

    def record_batch(self, sub: Submission, batch: dict[str, Any]) -> None:
        """Journal what the API says of a batch whenever it changes (counts included)."""
        status = batch.get("status")
        if status not in BATCH_STATUSES:
            raise ApiError(
                f"batch {batch.get('id')} has an unknown status {status!r}",
                batch_id=batch.get("id"),
            )
        seen = BatchSeen.from_api(sub.id, batch)
        now = (sub.status, sub.output_file_id, sub.error_file_id, sub.errors, sub.counts)
        if now != (status, seen.output_file_id, seen.error_file_id, seen.errors, seen.counts):
            self.record(seen)

    def poll(self, subs: list[Submission]) -> None:
        """Refresh these batches, one list call per 100 batches when possible."""
        waiting = {s.batch_id: s for s in subs if s.batch_id is not None}
        if not waiting:
            return
        for batch in self.api.batches_since(min(s.planned_at for s in waiting.values()) - 600):
            sub = waiting.pop(batch["id"], None)
            if sub is not None:
                self.record_batch(sub, batch)
            if not waiting:
                break
        for sub in waiting.values():  # older than the walk reached
            self.refresh(sub)

    def refresh(self, sub: Submission) -> None:
        """Ask for one batch by id; one that vanished (404) cannot be collected: stop."""
        assert sub.batch_id is not None
        try:
            self.record_batch(sub, self.api.retrieve(sub.batch_id))
        except ApiNotFoundError:
            raise ApiError(
                f"batch {sub.batch_id} ({sub.id}) vanished from the API (404);"
                " its requests cannot be collected",
                status=404,
                batch_id=sub.batch_id,
            ) from None

    def download(self, sub: Submission, file_id: str) -> str:
        """Download to a staging name, check it, and only then keep and journal it.

        A truncated transfer is fetched again; a file that breaks the format or
        names requests this submission never sent stops the run with the
        culprit named, leaving the run's state as it was.
        """
        final = self.run.raw_path(file_id)
        staging = final.with_name(f".{final.name}.check")
        where = f"{file_id} (batch {sub.batch_id})"
        try:
            for attempt in range(1, 4):
                size = self.api.download(file_id, staging)
                try:
                    earlier: set[str] = set()
                    for other in sub.downloaded:
                        earlier.update(read_outputs([self.run.raw_path(other)])["custom_id"])
                    check_download(read_outputs([staging]), sub, earlier, where)
                    break
                except TruncatedFileError:
                    if attempt == 3:
                        raise BatchFileError(
                            f"{where}: three downloads were all truncated"
                        ) from None
            os.replace(staging, final)
        finally:
            if staging.exists():
                staging.unlink()
        self.record(Downloaded(sub=sub.id, file_id=file_id))
        return f"downloaded {file_id} ({size} bytes) for {sub.id}"

    def delete_remote(self, sub: Submission) -> str:
        """Free the project's file storage: the raw copies on disk are the source of truth."""
        files = [f for f in (sub.file_id, *sub.result_files()) if f]
        for file_id in files:
            self.api.delete_file(file_id)
        self.record(RemoteDeleted(sub=sub.id, file_ids=files))
        return f"deleted {len(files)} file(s) of {sub.id} on the server"
