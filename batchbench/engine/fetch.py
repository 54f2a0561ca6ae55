"""A batch's result file, fetched into the run folder: downloaded to a staging name,
checked, and only then kept (verbatim: the raw file is the source of truth) and
journaled.

A truncated transfer is fetched again; a named file that is not there yet is owed
(:mod:`.owed`); a file naming requests the submission never sent (or one twice), or
replies filed under other requests' ids, stops the stage through the one stop path,
journaled, the run's state otherwise as it was.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._io import durable_replace
from ..errors import ApiError, ApiNotFoundError, BatchFileError, TruncatedFileError
from .calls import call_kind
from .collection import check_download
from .events import Disowned, Downloaded
from .owed import stop_stage
from .submission import Submission

if TYPE_CHECKING:
    from ..providers.base import Provider
    from .calls import CallRunner
    from .events import Event
    from .owed import OwedResults
    from .rundir import Run

TRIES = 3  # a transfer cut short is fetched again this many times in all


def download(
    sub: Submission,
    file_id: str,
    *,
    run: Run,
    provider: Provider,
    record: Callable[[Event], None],
    owed: OwedResults,
    calls: CallRunner,
) -> None:
    final = run.raw_path(file_id)
    staging = final.with_name(f".{final.name}.check")
    where = f"{file_id} (batch {sub.batch_id})"
    batch_id = sub.batch_id or ""
    answered_by_calls = call_kind(sub, provider.wire) is not None
    try:
        for attempt in range(1, TRIES + 1):
            try:
                if answered_by_calls:  # the answers the journal holds
                    calls.write(sub, list(sub.ids()), staging)
                else:
                    provider.client.download(batch_id, file_id, staging)
            except ApiNotFoundError:  # named by the batch, not there (yet)
                detail = f"batch {batch_id} ({sub.id}) names result file {file_id}"
                owed.owe(sub, batch_id, f"{detail}, which answers 404")
                return
            try:
                frame = provider.wire.read_results([staging])
                break
            except TruncatedFileError:
                if attempt == TRIES:
                    raise BatchFileError(
                        f"{where}: downloaded three times, each cut off before its end"
                        " (its last line unfinished): the service, or something between"
                        " it and you, ends the file early; nothing was kept — run again"
                        " later"
                    ) from None
            except BatchFileError as exc:  # named by the service's file, not ours
                raise type(exc)(str(exc).replace(str(staging), where)) from None
        ids = set(frame["custom_id"].to_list())
        if sub.adopted and ids and not ids & set(sub.ids()):
            record(Disowned(sub=sub.id, batch_id=batch_id))
            return
        earlier: set[str] = set()
        for other in sub.downloaded:
            earlier.update(provider.wire.read_results([run.raw_path(other)])["custom_id"])
        try:
            check_download(frame, sub, earlier, where)
        except BatchFileError as exc:
            stop_stage(record, sub, batch_id, "ids", str(exc), BatchFileError)
        sent = run.request_path(sub.path).read_bytes().splitlines()
        try:
            provider.wire.check_replies(frame, sent, where)
        except ApiError as exc:
            stop_stage(record, sub, batch_id, "replies", str(exc))
        durable_replace(staging, final)
    finally:
        if staging.exists():
            os.unlink(staging)
    record(Downloaded(sub=sub.id, file_id=file_id))
