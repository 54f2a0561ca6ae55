"""The journal's typed events: every change of a run's state, one JSON object a line.

Every change of state is an event appended to the run's journal (intent before
a billable call, outcome after it); :func:`batchbench.state.fold` replays them.
Nothing else holds state, so ``status``, ``report.json`` and the engine always
agree, and a crash loses at most the last, torn line (its action is repeated,
and every action is safe to repeat). Events are msgspec structs tagged by
``ev``, readable with ``jq``; fields added since 0.1 have defaults, so every
older journal still reads.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .kinds import Ending, OutcomeKind, Phase, ProviderName, Stage
from .providers.base import BatchView
from .providers.ids import openai_id


class Event(msgspec.Struct, tag_field="ev", kw_only=True):
    t: float = 0.0  # when it was recorded (seconds since the epoch)


class Line(msgspec.Struct, array_like=True, omit_defaults=True):
    """One request of a submission: which case, which attempt, whether it sent
    temperature, and its request id (journals before 0.2 recorded none: theirs were
    OpenAI's, derived again by :meth:`id`)."""

    case_id: str
    attempt: int
    sent_temperature: bool
    custom_id: str | None = None
    effort_none: bool = False  # it sent reasoning_effort "none" (a refusal falls back)

    def id(self, stage: Stage) -> str:
        return self.custom_id or openai_id(stage, self.case_id, self.attempt)


class Plan(Event, tag="plan", omit_defaults=True):
    """A request file was written: the submission's lines, before any upload."""

    sub: str
    stage: Stage
    seq: int
    path: str
    lines: list[Line]
    tokens: int = 0  # estimated prompt tokens, for the enqueued-token budget
    judge_pass: int = 1  # judges: which of the --judge-passes (1 is the one the rows keep)
    job: dict[str, Any] | None = None  # the batch's own parameters (Fireworks' inference ones)


class UploadStarted(Event, tag="upload_started"):
    sub: str


class Uploaded(Event, tag="uploaded"):
    sub: str
    file_id: str


class CreateStarted(Event, tag="create_started"):
    """About to create the batch: after a crash, look for it before creating again."""

    sub: str
    file_id: str | None = None  # the uploaded input (none when requests travel inline)


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
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    counts: dict[str, int] = {}
    phase: Phase | None = None
    ending: Ending | None = None
    files: list[str] | None = None

    @classmethod
    def of(cls, sub: str, v: BatchView) -> BatchSeen:
        return cls(
            sub=sub,
            batch_id=v.id,
            status=v.status,
            errors=list(v.errors) if v.errors is not None else None,
            counts={"total": v.total, "completed": v.completed, "failed": v.failed}
            | ({"processing": v.processing} if v.processing is not None else {}),
            phase=v.phase,
            ending=v.ending,
            files=list(v.files),
        )

    def view(self) -> BatchView:
        if self.phase is not None:
            phase, ending, files = self.phase, self.ending, tuple(self.files or ())
        else:  # written by 0.1: an OpenAI batch
            ending = _OPENAI_ENDINGS.get(self.status)
            phase = (
                "ended"
                if ending
                else "pending"
                if self.status == "validating"
                else "cancelling"
                if self.status == "cancelling"
                else "running"
            )
            found = (self.output_file_id, self.error_file_id)
            files = tuple(f for f in found if f) if ending else ()
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
            errors=tuple(self.errors) if self.errors is not None else None,
        )


_OPENAI_ENDINGS: dict[str, Ending] = {
    "completed": "completed",
    "failed": "failed",
    "expired": "expired",
    "cancelled": "cancelled",
}


class Downloaded(Event, tag="downloaded"):
    sub: str
    file_id: str


class CaseOutcome(msgspec.Struct, array_like=True):
    """What one request came to: kind (ok, transient, no_temperature, invalid, failed)."""

    kind: OutcomeKind
    detail: str | None
    source: str | None  # raw file id holding the successful line
    custom_id: str


class Collected(Event, tag="collected"):
    """A submission's result files were turned into outcomes (and rows written)."""

    sub: str
    outcomes: dict[str, CaseOutcome]  # by case id
    usage: dict[str, int] = {}
    anomalies: list[str] = []
    free_retry: bool = False  # not the requests' fault: their retries are not used up
    cap: int | None = None  # send this stage again in files of at most this many lines
    hold_until: float | None = None  # and not before this time


class RemoteDeleted(Event, tag="remote_deleted"):
    sub: str
    file_ids: list[str]


class Disowned(Event, tag="disowned"):
    """A batch adopted after a lost create turned out not to be this submission's
    (its results name other requests): the submission is looked for again, then
    created."""

    sub: str
    batch_id: str


class Stalled(Event, tag="stalled"):
    """The batch was not started ``seconds`` after it was created: it was told to
    stop, and its requests are sent again (once)."""

    sub: str
    batch_id: str
    seconds: float


class ServiceSet(Event, tag="service"):
    """Where a stage's batches live from now on (a run made before 0.2 recorded
    none in its config; ``run --move-service`` points a run at another base URL)."""

    stage: Stage
    provider: ProviderName
    base_url: str


class CancelRequested(Event, tag="cancel_requested"):
    pass


class Resumed(Event, tag="resumed"):
    pass


class Redo(Event, tag="redo"):
    """A new invocation redoes the cases whose last row is an error, as the reference does."""

    cases: list[str]


AnyEvent = (
    Plan
    | UploadStarted
    | Uploaded
    | CreateStarted
    | Created
    | BatchSeen
    | Downloaded
    | Collected
    | RemoteDeleted
    | Disowned
    | Stalled
    | ServiceSet
    | CancelRequested
    | Resumed
    | Redo
)
ENCODER = msgspec.json.Encoder()
DECODER = msgspec.json.Decoder(AnyEvent)
