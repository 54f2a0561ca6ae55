"""A submission: one request file, the batch it became, and what the service said of it.

Its fields change only through the journal's events, each by the one handler of
:data:`SUB_EVENTS` (a table lookup: ``status`` and ``list`` fold every run's
journal on each call).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..kinds import Stage
from ..providers.base import CLOCK_SKEW, BatchView, Client
from .event_records import Line
from .events import (
    BatchSeen,
    Candidates,
    Contradicted,
    Created,
    CreateFailed,
    CreateRefused,
    CreateStarted,
    Disowned,
    Downloaded,
    Owed,
    RemoteDeleted,
    Settled,
    Stopped,
    StopReason,
    Uploaded,
)


@dataclass
class Submission:
    """One request file and the batch it became."""

    id: str
    stage: Stage
    seq: int
    path: str
    lines: list[Line]
    planned_at: float
    tokens: int = 0
    judge_pass: int = 1  # judges: which pass these requests are (packed: the first)
    shared: dict[str, Any] | None = None  # what its requests share (the wire's own)
    uploaded: bool = False  # its request file is where the service reads it from
    file_id: str | None = None  # the uploaded input, for services that take one
    create_started: float | None = None
    # A create of unknown outcome may still make its batch until then: nothing is
    # created again before (looked for at each tick instead).
    # machine → until when, on that machine's clock (:class:`.events.CreateFailed`)
    landing: dict[str, float] = field(default_factory=dict)
    # A create journaled with no outcome after it: a process stopped in the middle of the
    # call (or another machine is making it), so whether it made the batch is unknown.
    create_open: bool = False
    batch_id: str | None = None
    adopted: bool = False
    view: BatchView | None = None  # what the service last said of the batch
    disowned: set[str] = field(default_factory=set)  # batches adopted by mistake
    # After a lost create on a service that keeps no tag: batches that may be this one's,
    # with what the service last said of each, until their results tell.
    candidates: dict[str, BatchView | None] = field(default_factory=dict)
    contradiction: str | None = None  # the last thing the service contradicted itself on
    stopped: StopReason | None = None  # why the stage last stopped on it (journaled)
    # When it first did (its results owed since), and last did: a bounded wait from the
    # first (:data:`~.owed.RESULTS_WAIT`), the files asked for again after each.
    owed_since: float | None = None
    contradicted_at: float | None = None
    seen_at: float | None = None  # when the service last said something new of its batch
    ended_at: float | None = None  # when its batch was first seen ended (its turnaround's end)
    stalled: bool = False  # never started in time: told to stop, its requests sent again
    tailed: int = 0  # a small tail left late (its lines): told to stop, the rest on flex
    flex: bool = False  # its requests go one call at a time on the flex tier
    listed: bool = False  # ... or on demand, at the list price (a deadline's fallback)
    settled: bool = False  # its owed results settled by the user: what arrived is kept
    downloaded: set[str] = field(default_factory=set)
    # The most lines the service has said its batch ran: billed, whatever its counts say
    # later (OpenAI's reset a cancelled batch's completed to 0).
    ran: int = 0
    collected: bool = False
    remote_deleted: bool = False

    @property
    def status(self) -> str:
        """The service's own word for the batch, for people."""
        if self.view is not None:
            return self.view.status
        return "created" if self.batch_id else "not submitted"

    @property
    def word(self) -> str:
        """Its state in batchbench's one vocabulary (:attr:`BatchView.word`)."""
        if self.view is not None:
            return self.view.word
        if self.batch_id is None and (self.candidates or self.landing):
            return "unconfirmed"  # one of its candidates, or a create that may still land
        return "submitted" if self.batch_id else "not submitted"

    @property
    def terminal(self) -> bool:
        return self.view is not None and self.view.phase == "ended"

    @property
    def in_flight(self) -> bool:
        """Its batch runs, or owes its results (or one of its candidates may be it, and has
        not ended)."""
        if self.batch_id is None:
            running = any(v is None or v.phase != "ended" for v in self.candidates.values())
            running = running or bool(self.landing)  # its create may still land
            return running or (self.contradiction is not None and bool(self.candidates))
        return not self.terminal or (self.contradiction is not None and not self.collected)

    def result_files(self) -> list[str]:
        return list(self.view.files) if self.view is not None else []

    def ids(self) -> dict[str, Line]:
        """Each request's id → its line (the journaled mapping)."""
        return {line.id(self.stage): line for line in self.lines}

    @property
    def packed(self) -> bool:
        """Its lines are of several judge passes, each line naming its own (a case's K
        requests together: :mod:`.planning`)."""
        return any(line.judge_pass for line in self.lines)

    def pass_of(self, line: Line) -> int:
        return line.judge_pass or self.judge_pass

    def keyed(self) -> dict[str, tuple[str, int, bool]]:
        """How its collected outcomes are keyed → each one's case, judge pass and whether
        its request sent temperature: by case (one pass a submission) or, packed, by
        request id (a case is there once a pass)."""
        if self.packed:
            return {
                line.id(self.stage): (line.case_id, self.pass_of(line), line.sent_temperature)
                for line in self.lines
            }
        return {
            line.case_id: (line.case_id, self.judge_pass, line.sent_temperature)
            for line in self.lines
        }

    def of_pass(self, judge_pass: int) -> Submission:
        """The submission as if it held only this pass's lines (a packed one is collected
        a pass at a time, each as its own)."""
        lines = [line for line in self.lines if self.pass_of(line) == judge_pass]
        return dataclasses.replace(self, lines=lines, judge_pass=judge_pass)


def _created(sub: Submission, event: Created) -> None:
    sub.batch_id, sub.adopted = event.batch_id, event.adopted
    sub.candidates.clear()
    sub.landing, sub.create_open = {}, False


def _disowned(sub: Submission, event: Disowned) -> None:
    """Not this submission's batch: it is looked for again (``create_started`` kept, the
    disowned batch never taken again), then created if nothing is found."""
    sub.disowned.add(event.batch_id)
    if event.batch_id in sub.candidates:
        del sub.candidates[event.batch_id]
        return
    sub.batch_id, sub.adopted, sub.view, sub.ran = None, False, None, 0
    sub.downloaded.clear()


def _candidates(sub: Submission, event: Candidates) -> None:
    sub.candidates = {batch_id: None for batch_id in event.batch_ids}
    sub.landing, sub.create_open = {}, False  # what it may have made is found: results tell


def _owed(sub: Submission, event: Contradicted | Owed | Stopped) -> None:
    sub.contradiction = event.detail
    sub.owed_since = sub.owed_since if sub.owed_since is not None else event.t


def _stopped(sub: Submission, event: Stopped) -> None:
    _owed(sub, event)  # looked at again by the next run, nothing bought meanwhile
    sub.stopped = event.reason
    sub.contradicted_at = event.t
    sub.downloaded.clear()  # fetched afresh next time


def _settled(sub: Submission, _: Settled) -> None:
    sub.settled, sub.contradiction, sub.stopped = True, None, None


def _deleted(sub: Submission, _: RemoteDeleted) -> None:
    sub.remote_deleted = True


def _uploaded(sub: Submission, event: Uploaded) -> None:
    sub.uploaded, sub.file_id = True, event.file_id


def _create_started(sub: Submission, event: CreateStarted) -> None:
    sub.create_started = event.t
    sub.landing = {}  # made only once the last one can no longer land
    sub.create_open = True


def _create_failed(sub: Submission, event: CreateFailed) -> None:
    if event.land_by is None:  # answered: nothing waits for it
        sub.landing = {}
    else:
        sub.landing[event.machine] = event.land_by
    sub.create_open = False


def _create_refused(sub: Submission, event: CreateRefused) -> None:
    sub.create_started = None  # nothing was made: nothing to look for
    sub.create_open = False


def _seen(sub: Submission, event: BatchSeen) -> None:
    if event.batch_id in sub.candidates:
        sub.candidates[event.batch_id] = event.view()
    else:
        sub.view, sub.seen_at = event.view(), event.t
        sub.ran = max(sub.ran, sub.view.done)
        if sub.view.phase == "ended" and sub.ended_at is None:
            sub.ended_at = event.t


def _downloaded(sub: Submission, event: Downloaded) -> None:
    sub.downloaded.add(event.file_id)
    sub.stopped = None  # what stopped the stage came right


SUB_EVENTS: dict[type, Callable[[Submission, Any], None]] = {
    Uploaded: _uploaded,
    CreateStarted: _create_started,
    CreateRefused: _create_refused,
    CreateFailed: _create_failed,
    Created: _created,
    BatchSeen: _seen,
    Downloaded: _downloaded,
    RemoteDeleted: _deleted,
    Disowned: _disowned,
    Candidates: _candidates,
    Contradicted: _owed,
    Owed: _owed,
    Stopped: _stopped,
    Settled: _settled,
}


def watched(sub: Submission) -> list[str]:
    """The batches of a submission to ask the service about: its own while it runs (or
    owes its results), or its candidates that have not ended."""
    if sub.batch_id is not None:
        return [sub.batch_id] if sub.in_flight else []
    return [c for c, v in sub.candidates.items() if v is None or v.phase != "ended"]


def walk(
    client: Client, waiting: Mapping[str, Submission]
) -> tuple[dict[str, BatchView], list[str]]:
    """One walk of a service's batch list for these batches (batch id → its
    submission): what it said of each one it reached, and the ids it did not reach."""
    if not waiting:
        return {}, []
    since = min(s.planned_at for s in waiting.values()) - CLOCK_SKEW
    found = client.poll(list(waiting), since)
    return found, [batch_id for batch_id in waiting if batch_id not in found]
