"""Telling a run's in-flight batches to stop: by ``batchbench cancel``, or by the machine
advancing a run in a bucket when a cancel was asked of it there (``cancel.json``: the
lease's holder is the one writer of that run's journal)."""

from __future__ import annotations

from collections.abc import Callable

from ..errors import BatchbenchError
from ..providers import spec
from ..providers.base import Service
from .calls import call_kind
from .events import BatchSeen, CancelRequested
from .state import RunState
from .submission import Submission
from .submit import Submitter


def look_for_lost(submitter: Submitter, state: RunState) -> bool:
    """A create whose outcome was lost may have made a batch: looked for, so that it is
    cancelled too (True when any was looked for)."""
    providers = submitter.providers
    lost = [
        s
        for s in state.subs.values()
        if s.batch_id is None
        and s.create_started
        and call_kind(s, providers[s.stage].wire) is None  # calls: no batch to look for
    ]
    for sub in lost:
        if not sub.candidates:
            submitter.look(sub, state.batch_ids())
    return bool(lost)


def cancel_in_flight(
    submitter: Submitter, state: RunState, warn: Callable[[str], None]
) -> list[str]:
    """Every in-flight batch told to stop, what the service then says of each journaled;
    the ids of those it stopped. Batches that could not be cancelled: the first failure
    raised, told how many more there were and what to do."""
    cancelled: list[str] = []
    failures: list[BatchbenchError] = []
    for sub in state.in_flight():
        provider = submitter.providers[sub.stage]
        if sub.batch_id is None:
            if sub.candidates:
                warn(f"warning: {candidates_text(sub, provider.client.service)}")
            else:  # a create with no answer, waited for: it may still make its batch
                warn(
                    f"warning: {sub.id}: its create got no answer and may still make its batch"
                    f" on {provider.client.service}; none is known to cancel yet (`cancel`"
                    " again later, or cancel it yourself)"
                )
            continue
        try:
            note = drops_rows(submitter, sub)
            if note is not None:
                warn(note)
            view = provider.client.cancel(sub.batch_id)
        except BatchbenchError as exc:
            failures.append(exc)
            continue
        if view is not None:
            submitter.record(BatchSeen.of(sub.id, view))
            cancelled.append(sub.batch_id)
    if failures:
        # The first failure itself, its class and fields (HTTP status, batch id) kept,
        # told how many more there were and what to do.
        first = failures[0]
        first.args = (
            f"{len(failures)} batch(es) could not be cancelled, so they still run"
            f" ({first}); run `batchbench cancel {submitter.config.name}` again",
        )
        raise first
    return cancelled


def candidates_text(sub: Submission, service: Service) -> str:
    """Why a submission's batch cannot be cancelled (or shown) yet: which candidates a lost
    create left, and why the run's own is not told apart."""
    ids = ", ".join(sub.candidates)
    return (
        f"{sub.id}: its create's outcome was lost, and {len(sub.candidates)} batch(es) of its"
        f" size appeared since ({ids}) on {service}, which keeps no tag on a batch: only"
        " their results' ids tell the run's own from another's, so none is cancelled"
        " (cancel the right one yourself, or let them end)"
    )


def drops_rows(submitter: Submitter, sub: Submission) -> str | None:
    """Before cancelling a batch on a service that returns no rows for a cancelled batch
    yet bills what ran: how many of its requests have run (asked afresh, journaled), said."""
    provider = submitter.providers[sub.stage]
    found = spec(provider.client.service.provider)
    if not found.cancel_drops_rows or sub.batch_id is None:
        return None
    view = provider.client.retrieve(sub.batch_id)
    submitter.record(BatchSeen.of(sub.id, view))
    if not view.done:
        return None
    return (
        f"note: {found.label} returns no result rows for a cancelled batch and bills the"
        f" requests that ran ({found.cancel_drops_rows}): batch {sub.batch_id} ({sub.id})"
        f" has run {view.done} of its {view.total or len(sub.lines)} requests; cancelled, their"
        " results are lost, and `run … --resume-cancelled` buys them again"
    )


def take_asked_cancel(
    submitter: Submitter, warn: Callable[[str], None], stop_batches: bool = True
) -> bool:
    """On the machine advancing a run in a bucket: a cancel another machine asked for
    (``cancel.json``), journaled and acted on — the run submits nothing more, and its
    in-flight batches are told to stop — then the request cleared. True when there was
    one."""
    home = submitter.run.home
    if submitter.state().cancelled or not home.cancel_asked():
        return False
    submitter.record(CancelRequested())
    warn(f"note: run {submitter.config.name!r} was cancelled from another machine")
    if stop_batches:  # (not when the user takes the run up again at once)
        cancel_in_flight(submitter, submitter.state(), warn)
    home.clear_cancel()
    return True
