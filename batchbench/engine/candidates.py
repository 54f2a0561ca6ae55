"""After a lost create on a service whose batches keep no tag: a candidate batch told to
be the submission's (adopted) or not (disowned) by the ids in its results."""

from __future__ import annotations

import os

from .._io import durable_replace
from .collection import check_download
from .events import BatchSeen, Created, Disowned, Downloaded
from .owed import stop_stage
from .submission import Submission
from .submit import Submitter


def check_candidate(submitter: Submitter, sub: Submission, batch_id: str) -> None:
    """An ended candidate's results, every file of them read: the submission's batch
    when every id in them is one of its requests (adopted; its files kept), not when
    none is (disowned). Results that read empty while its counts say lines ran are
    owed (:meth:`owe`), never taken for a stranger's. A mix is the service
    contradicting itself: journaled, it stops, nothing bought."""
    view = sub.candidates[batch_id]
    if view is None or not view.files:
        submitter.record(Disowned(sub=sub.id, batch_id=batch_id))  # nothing run, nothing to tell
        return
    provider = submitter.providers[sub.stage]
    staged = {
        ref: submitter.run.raw_path(ref).with_name(f".{submitter.run.raw_path(ref).name}.candidate")
        for ref in view.files
    }
    try:
        frames = {}
        for ref, staging in staged.items():
            provider.client.download(batch_id, ref, staging)
            frames[ref] = provider.wire.read_results([staging])
        ids = {i for frame in frames.values() for i in frame["custom_id"].to_list()}
        mine = set(sub.ids())
        if not ids and view.done > 0:
            submitter.owed.owe(
                sub,
                batch_id,
                f"candidate {batch_id} of {sub.id} ran {view.done} lines,"
                " but its results hold none",
            )
            return
        if not ids & mine:
            submitter.record(Disowned(sub=sub.id, batch_id=batch_id))
            return
        if not ids <= mine:
            detail = (
                f"batch {batch_id}'s results name {len(ids & mine)} of {sub.id}'s requests"
                f" and {len(ids - mine)} others: neither the run's nor another's; it is"
                " not adopted, and nothing is bought again"
            )
            stop_stage(submitter.record, sub, batch_id, "mixed", detail)
        submitter.record(Created(sub=sub.id, batch_id=batch_id, adopted=True))
        submitter.record(BatchSeen.of(sub.id, view))
        earlier: set[str] = set()
        for ref, staging in staged.items():  # read already: kept as they are
            final = submitter.run.raw_path(ref)
            check_download(frames[ref], sub, earlier, str(final))
            earlier.update(frames[ref]["custom_id"].to_list())
            durable_replace(staging, final)
            submitter.record(Downloaded(sub=sub.id, file_id=ref))
    finally:
        for staging in staged.values():
            if staging.exists():
                os.unlink(staging)
