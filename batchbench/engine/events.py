"""The journal's typed events: every change of a run's state, one JSON object a line.

Every change of state is an event appended to the run's journal (intent before
a billable call, outcome after it); :func:`batchbench.engine.state.fold` replays them.
Nothing else holds state, so ``status``, ``report.json`` and the engine always
agree, and a crash loses at most the last, torn line (its action is repeated,
and every action is safe to repeat). Events are msgspec structs tagged by
``ev``, readable with ``jq``; fields added since 0.1 have defaults, so every
older journal still reads.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..kinds import Ending, Phase, ProviderName, Stage
from ..providers import legacy
from ..providers.base import BatchError, BatchView
from .event_records import BorrowedAnswer, CaseOutcome, Line  # carried by the events


class Event(msgspec.Struct, tag_field="ev", kw_only=True):
    t: float = 0.0  # when it was recorded (seconds since the epoch)


class Plan(Event, tag="plan", omit_defaults=True):
    """A request file was written: the submission's lines, before any upload."""

    sub: str
    stage: Stage
    seq: int
    path: str
    lines: list[Line]
    tokens: int = 0  # estimated prompt tokens, for the enqueued-token budget
    judge_pass: int = 1  # judges: which of the --judge-passes (1 is the one the rows keep)
    shared: dict[str, Any] | None = None  # what its requests share (:attr:`Rendered.shared`)
    legacy_shared: dict[str, Any] | None = msgspec.field(
        default=None, name=legacy.PLAN_SHARED_KEY
    )  # 0.2's name for it
    flex: bool = False  # the tail of a cancelled batch, sent one call at a time on flex
    listed: bool = False  # ... or on demand at the list price (a deadline's fallback)

    def shares(self) -> dict[str, Any] | None:
        return self.shared if self.shared is not None else self.legacy_shared


class UploadStarted(Event, tag="upload_started"):
    """Journals before 0.3 noted an upload's intent (read, never written again)."""

    sub: str


class Uploaded(Event, tag="uploaded"):
    """The request file is where the service reads it from: ``file_id`` is its reference
    there, or None for a service whose requests travel in the create call."""

    sub: str
    file_id: str | None


class CreateStarted(Event, tag="create_started"):
    """About to create the batch: after a crash, look for it before creating again."""

    sub: str
    file_id: str | None = None  # the uploaded input (none when requests travel inline)


class CreateRefused(Event, tag="create_refused"):
    """The service refused the create, definitely, for want of room (its quota of jobs
    running at once is full): nothing was made, so nothing is looked for and no outage
    window is spent. It is tried again from ``hold_until``."""

    sub: str
    reason: str
    hold_until: float


class CreateFailed(Event, tag="create_failed"):
    """The create made no batch that is known. Answered by the service (a 4xx, a 429, a
    500): it is done with it, and a batch it made before failing is there already (looked
    for before the next create). Unanswered (a timeout, a dropped connection, a front
    door's 502 or 504), it may still reach the service and make the batch until
    ``land_by``: looked for at each tick meanwhile, and no other create is made."""

    sub: str
    reason: str
    land_by: float | None = None
    # The machine whose clock ``land_by`` is on: another machine (minutes off) counts
    # its own window from when it first finds the create waiting ("": this machine's).
    machine: str = ""


class Created(Event, tag="created"):
    sub: str
    batch_id: str
    adopted: bool = False  # found on the server after an interrupted create


class BatchSeen(Event, tag="batch"):
    """What the service said of the batch (normalised), journaled whenever it changes.

    ``counts`` are ``total``, ``completed`` and ``failed`` lines (and ``processing``,
    from a service that says only how many are not yet done). Journals before 0.2
    hold OpenAI's statuses and file ids and no ``phase``: :meth:`view` reads both.
    """

    sub: str
    batch_id: str
    status: str
    legacy_output: str | None = msgspec.field(default=None, name=legacy.OUTPUT_FILE_KEY)
    legacy_errors: str | None = msgspec.field(default=None, name=legacy.ERROR_FILE_KEY)
    errors: list[dict[str, Any]] | None = None
    counts: dict[str, int] = {}
    phase: Phase | None = None
    ending: Ending | None = None
    files: list[str] | None = None
    awaiting: bool = False  # said ended, its results not yet there (BatchView.awaiting)

    @classmethod
    def of(cls, sub: str, v: BatchView) -> BatchSeen:
        return cls(
            sub=sub,
            batch_id=v.id,
            status=v.status,
            errors=[e.record() for e in v.errors] if v.errors is not None else None,
            counts={"total": v.total, "completed": v.completed, "failed": v.failed}
            | ({"processing": v.processing} if v.processing is not None else {}),
            phase=v.phase,
            ending=v.ending,
            files=list(v.files),
            awaiting=v.awaiting,
        )

    def view(self) -> BatchView:
        if self.phase is not None:
            phase, ending, files = self.phase, self.ending, tuple(self.files or ())
        else:  # written by 0.1: an OpenAI batch
            found = legacy.openai_view(self.status, (self.legacy_output, self.legacy_errors))
            phase, ending, files = found  # type: ignore[assignment]
        return BatchView(
            id=self.batch_id,
            status=self.status,
            phase=phase,
            ending=ending,
            total=self.counts.get("total", 0),
            completed=self.counts.get("completed", 0),
            failed=self.counts.get("failed", 0),
            files=files,
            processing=self.counts.get("processing"),
            awaiting=self.awaiting,
            errors=tuple(BatchError.of(e) for e in self.errors)
            if self.errors is not None
            else None,
        )


class Downloaded(Event, tag="downloaded"):
    sub: str
    file_id: str


class Collected(Event, tag="collected"):
    """A submission's result files were turned into outcomes (and rows written)."""

    sub: str
    outcomes: dict[str, CaseOutcome]  # by case id
    usage: dict[str, int] = {}
    anomalies: list[str] = []
    free_retry: bool = False  # not the requests' fault: their retries are not used up
    cap: int | None = None  # send this stage again in files of at most this many lines
    hold_until: float | None = None  # and not before this time
    served: dict[str, int] = {}  # what served its good replies, as they say: model → replies
    fingerprints: dict[str, int] = {}  # and their system fingerprints (#66.1)
    tiers: dict[str, int] = {}  # and the service tiers they name (#67.2)
    # Graded per item: the cases whose last part this ended (None: scored; else why not)
    graded: dict[str, str | None] | None = None


class RemoteDeleted(Event, tag="remote_deleted"):
    sub: str
    file_ids: list[str]


class Disowned(Event, tag="disowned"):
    """A batch adopted after a lost create turned out not to be this submission's
    (its results name other requests): the submission is looked for again, then
    created."""

    sub: str
    batch_id: str


class Candidates(Event, tag="candidates"):
    """A create's outcome was lost on a service that keeps no tag on a batch: these
    batches of the submission's size appeared since. None is adopted (nor cancelled)
    until its results' ids say it is the run's; the others are disowned."""

    sub: str
    batch_ids: list[str]


class Contradicted(Event, tag="contradicted"):
    """Before 0.4, one event for owed results (:class:`Owed`) and for a stop
    (:class:`Stopped`): read as owed results, as it then was."""

    sub: str
    batch_id: str
    detail: str


class Owed(Event, tag="owed"):
    """The service says a batch has results it does not give (yet): ended with none
    named, a file empty or short of what ran, a named file answering 404. They are
    waited for, bounded; nothing is bought again (:mod:`.owed`)."""

    sub: str
    batch_id: str
    detail: str


# Why a stage stopped, nothing bought again: results owed past the wait; a candidate
# batch whose results mix the run's requests with others'; a result file naming
# requests the submission never sent (or one twice); replies filed under other
# requests' ids (a service known to misfile them).
StopReason = Literal["owed", "mixed", "ids", "replies"]


class Stopped(Event, tag="stopped"):
    """The stage stopped on this batch, for ``reason``, in ``detail``'s words; nothing
    was bought again. The next run looks again (the service may have mended it)."""

    sub: str
    batch_id: str
    reason: StopReason
    detail: str


class Stalled(Event, tag="stalled"):
    """The batch was not started ``seconds`` after it was created: it was told to
    stop, and its requests are sent again (once)."""

    sub: str
    batch_id: str
    seconds: float


class Tailed(Event, tag="tailed"):
    """The batch ran longer than ``--tail-flex`` with only a small remainder of its lines
    unfinished (:func:`.late.small_tail`): it was told to stop, what it returned is
    kept, and the rest goes out one call at a time on the service's flex tier."""

    sub: str
    batch_id: str
    remaining: int
    listed: bool = False  # the rest goes on demand at the list price (a deadline's fallback)


class CallSent(Event, tag="call_sent", omit_defaults=True):
    """About to send one request as a call of its own (a flex tail, an on-demand
    remainder): until its answer is journaled, its outcome is unknown — it may have run
    and been billed — and it is never sent again blind. ``adopted_from`` names the folder
    of the same run that sent it (this one did not)."""

    sub: str
    rid: str
    adopted_from: str | None = None


class CallAnswered(Event, tag="call_answered", omit_defaults=True):
    """The service answered one call: ``reply`` is its output line as the service's batch
    output would hold it (it ran, or was refused with an answer), or None when it was
    refused for want of capacity — nothing ran, nothing billed, it may be sent again."""

    sub: str
    rid: str
    reply: dict[str, Any] | None = None
    adopted_from: str | None = None


class CallsStopped(Event, tag="calls_stopped"):
    """The service kept refusing the submission's calls for want of capacity: its
    requests not yet answered go back to the batch path."""

    sub: str
    detail: str


class Settled(Event, tag="settled", omit_defaults=True):
    """The user settled a batch's owed results (``run --settle-owed``): what arrived is
    kept, and the ``missing`` requests are sent again, once (``usd``: what that was
    said to cost, at the batch price; None: unpriced)."""

    sub: str
    batch_id: str
    kept: int
    missing: int
    usd: float | None = None


class ServiceSet(Event, tag="service"):
    """Where a stage's batches live from now on (a run made before 0.2 recorded
    none in its config; ``run --move-service`` points a run at another base URL)."""

    stage: Stage
    provider: ProviderName
    base_url: str
    account: dict[str, str] | None = None  # recorded since 0.3 (None: not yet recorded)


class CancelRequested(Event, tag="cancel_requested"):
    pass


class Resumed(Event, tag="resumed"):
    pass


class Redo(Event, tag="redo"):
    """A new invocation redoes the cases whose last row is an error, as the reference does."""

    cases: list[str]


class Borrowed(Event, tag="borrowed"):
    """A judge panel's other judge (#50) took answers the panel's first run collected, as
    its own: answered (the raw file holding the line copied into this run, verbatim) or
    failed (its error row). Nothing of them was bought here."""

    run: str  # the run they came from
    answers: dict[str, BorrowedAnswer]  # by case id


class DeadlineSet(Event, tag="deadline"):
    """``run --deadline``: the run is to end by ``at`` (seconds since the epoch); kept
    until another invocation names another (:mod:`.deadline`)."""

    at: float
    allow_list_price: bool = False  # where there is no flex tier, on demand at list price
    given: str = ""  # as the user wrote it: the same words again (+14h) keep ``at``
    # Judge requests an answer takes, one pass, over the run's cases on average (1, or a
    # HealthBench rubric's items): their fallback is kept back from an answer's time.
    judge_requests: float = 1.0


AnyEvent = (
    Plan
    | UploadStarted
    | Uploaded
    | CreateStarted
    | CreateRefused
    | CreateFailed
    | Created
    | BatchSeen
    | Downloaded
    | Collected
    | RemoteDeleted
    | Disowned
    | Candidates
    | Contradicted
    | Owed
    | Stopped
    | Stalled
    | Tailed
    | CallSent
    | CallAnswered
    | CallsStopped
    | Settled
    | ServiceSet
    | CancelRequested
    | Resumed
    | Redo
    | Borrowed
    | DeadlineSet
)
ENCODER = msgspec.json.Encoder()
DECODER = msgspec.json.Decoder(AnyEvent)
