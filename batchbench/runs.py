"""Run state: the journal's typed events, and their fold into what the run has reached.

Every change of state is an event appended to the run's journal (intent before
a billable call, outcome after it); :func:`fold` replays them. Nothing else
holds state, so ``status``, ``report.json`` and the engine always agree, and a
crash loses at most the last, torn line (its action is repeated, and every
action is safe to repeat). Events are msgspec structs tagged by ``ev``: one
JSON object a line, readable with ``jq``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

Stage = Literal["answers", "judges"]
STAGES: tuple[Stage, ...] = ("answers", "judges")
TERMINAL = ("completed", "failed", "expired", "cancelled")
BATCH_STATUSES = ("validating", "in_progress", "finalizing", "cancelling", *TERMINAL)


class Event(msgspec.Struct, tag_field="ev", kw_only=True):
    t: float = 0.0  # when it was recorded (seconds since the epoch)


class Line(msgspec.Struct, array_like=True):
    """One request of a submission: which case, which attempt, whether it sent temperature."""

    case_id: str
    attempt: int
    sent_temperature: bool


class Plan(Event, tag="plan"):
    """A request file was written: the submission's lines, before any upload."""

    sub: str
    stage: Stage
    seq: int
    path: str
    lines: list[Line]
    tokens: int = 0  # estimated prompt tokens, for the enqueued-token budget


class UploadStarted(Event, tag="upload_started"):
    sub: str


class Uploaded(Event, tag="uploaded"):
    sub: str
    file_id: str


class CreateStarted(Event, tag="create_started"):
    """About to create the batch: after a crash, look for it before creating again."""

    sub: str
    file_id: str


class Created(Event, tag="created"):
    sub: str
    batch_id: str
    adopted: bool = False  # found on the server after an interrupted create


class BatchSeen(Event, tag="batch"):
    """What the API said of the batch, journaled whenever it changes."""

    sub: str
    batch_id: str
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    counts: dict[str, int] = {}

    @classmethod
    def from_api(cls, sub: str, batch: dict[str, Any]) -> BatchSeen:
        """The fields batchbench keeps from a Batch API batch object."""
        counts = batch.get("request_counts") or {}
        errors = batch.get("errors") or {}
        return cls(
            sub=sub,
            batch_id=batch["id"],
            status=batch["status"],
            output_file_id=batch.get("output_file_id"),
            error_file_id=batch.get("error_file_id"),
            errors=errors.get("data") if errors else None,
            counts={k: int(v) for k, v in counts.items() if v is not None},
        )


class Downloaded(Event, tag="downloaded"):
    sub: str
    file_id: str


class CaseOutcome(msgspec.Struct, array_like=True):
    """What one request came to: kind (ok, transient, no_temperature, invalid, failed)."""

    kind: str
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
    | CancelRequested
    | Resumed
    | Redo
)
ENCODER = msgspec.json.Encoder()
DECODER = msgspec.json.Decoder(AnyEvent)


# ---------------------------------------------------------------------------
# The fold: journal events → the run's current state.


@dataclass
class StageState:
    """One case in one stage. ``status``: pending, inflight, ok, failed."""

    status: str = "pending"
    attempt: int = 0
    temperature: bool = True  # False once the model rejected it: send none from then on
    transients: int = 0  # attempts used up by retried replies
    invalid: int = 0  # invalid judge replies so far
    sub: str | None = None
    source: str | None = None  # raw file id holding the successful line
    custom_id: str | None = None  # the successful line's custom id
    used_temperature: bool | None = None  # whether the successful request carried temperature


@dataclass
class CaseState:
    case_id: str
    answers: StageState = field(default_factory=StageState)
    judges: StageState = field(default_factory=StageState)
    started: float | None = None
    final: str | None = None  # "scored" or "error" once its row is written
    error: str | None = None
    rows: int = 0  # result rows written for it so far (one per final outcome)

    def stage(self, name: str) -> StageState:
        return self.answers if name == "answers" else self.judges

    def reopen(self) -> None:
        """A case whose last row is an error is not done: a new invocation redoes it.

        It restarts from the stage that failed (a failed judge judges the kept
        answer again) with a fresh retry budget, as a new invocation of the
        reference would; attempt numbers go on, so every ``custom_id`` stays new.
        """
        if self.final != "error":
            return
        self.final, self.error, self.started = None, None, None
        for st in (self.answers, self.judges):
            if st.status == "failed":
                st.status = "pending"
            st.transients = st.invalid = 0
            st.temperature = True


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
    upload_started: bool = False
    file_id: str | None = None
    create_started: float | None = None
    batch_id: str | None = None
    adopted: bool = False
    status: str | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[dict[str, Any]] | None = None
    counts: dict[str, int] = field(default_factory=dict)
    downloaded: set[str] = field(default_factory=set)
    collected: bool = False
    remote_deleted: bool = False

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def in_flight(self) -> bool:
        return self.batch_id is not None and not self.terminal

    def result_files(self) -> list[str]:
        return [f for f in (self.output_file_id, self.error_file_id) if f]


@dataclass
class RunState:
    cases: dict[str, CaseState]
    subs: dict[str, Submission] = field(default_factory=dict)
    holds: dict[str, float] = field(default_factory=dict)  # stage → not before (time)
    caps: dict[str, int] = field(default_factory=dict)  # stage → shrunk shard size
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    cancelled: bool = False
    started: float | None = None
    last_event: float | None = None  # when the journal last changed

    def pending(self, stage: str, case_ids: list[str]) -> list[str]:
        """Cases (in registry order) with a request of this stage still to plan."""
        out = []
        for case_id in case_ids:
            case = self.cases[case_id]
            if case.final:
                continue
            if stage == "answers":
                wanted = case.answers.status == "pending"
            else:
                wanted = case.answers.status == "ok" and case.judges.status == "pending"
            if wanted:
                out.append(case_id)
        return out

    def in_flight(self) -> list[Submission]:
        return [s for s in self.subs.values() if s.in_flight]

    def next_seq(self, stage: str) -> int:
        return 1 + max((s.seq for s in self.subs.values() if s.stage == stage), default=0)

    def apply(self, event: Event) -> None:
        """Fold one journal event into the state (the only way state changes)."""
        self.last_event = event.t
        if isinstance(event, Plan):
            self._apply_plan(event)
            return
        if isinstance(event, CancelRequested):
            self.cancelled = True
        elif isinstance(event, Resumed):
            self.cancelled = False
        elif isinstance(event, Redo):
            for case_id in event.cases:
                self.cases[case_id].reopen()
        sub = self.subs.get(getattr(event, "sub", ""))
        if sub is None:
            return
        if isinstance(event, UploadStarted):
            sub.upload_started = True
        elif isinstance(event, Uploaded):
            sub.file_id = event.file_id
        elif isinstance(event, CreateStarted):
            sub.create_started = event.t
        elif isinstance(event, Created):
            sub.batch_id, sub.adopted = event.batch_id, event.adopted
            sub.status = sub.status or "validating"
        elif isinstance(event, BatchSeen):
            sub.status, sub.errors, sub.counts = event.status, event.errors, dict(event.counts)
            sub.output_file_id, sub.error_file_id = event.output_file_id, event.error_file_id
        elif isinstance(event, Downloaded):
            sub.downloaded.add(event.file_id)
        elif isinstance(event, Collected):
            self._apply_collected(sub, event)
        elif isinstance(event, RemoteDeleted):
            sub.remote_deleted = True

    def _apply_plan(self, event: Plan) -> None:
        sub = Submission(
            event.sub, event.stage, event.seq, event.path, event.lines, event.t, event.tokens
        )
        self.subs[sub.id] = sub
        self.started = self.started or event.t
        for line in sub.lines:
            case = self.cases[line.case_id]
            st = case.stage(sub.stage)
            st.status, st.attempt, st.sub = "inflight", line.attempt, sub.id
            if case.started is None:
                case.started = event.t

    def _apply_collected(self, sub: Submission, event: Collected) -> None:
        sub.collected = True
        stage = sub.stage
        sent = {line.case_id: line.sent_temperature for line in sub.lines}
        for case_id, outcome in event.outcomes.items():
            case = self.cases[case_id]
            st = case.stage(stage)
            if st.sub != sub.id:
                continue  # superseded (cannot happen in order, but never regress)
            kind = outcome.kind
            if kind == "ok":
                st.status, st.source, st.custom_id = "ok", outcome.source, outcome.custom_id
                st.used_temperature = sent.get(case_id, True)
                if stage == "judges":
                    case.final = "scored"
                    case.rows += 1
            elif kind == "failed":
                st.status = "failed"
                case.final, case.error = "error", outcome.detail
                case.rows += 1
            else:
                st.status = "pending"
                if kind == "no_temperature":
                    st.temperature = False
                    st.transients += 1  # the reference's drop uses up an attempt
                elif kind == "invalid":
                    st.invalid += 1
                elif kind == "transient" and not event.free_retry:
                    st.transients += 1
        if event.hold_until:
            self.holds[stage] = max(self.holds.get(stage, 0.0), event.hold_until)
        if event.cap:
            self.caps[stage] = event.cap
        usage = self.usage.setdefault(stage, {})
        for key, value in event.usage.items():
            usage[key] = usage.get(key, 0) + int(value)
        self.anomalies.extend(event.anomalies)


def fold(case_ids: list[str], events: list[Event]) -> RunState:
    state = RunState({cid: CaseState(cid) for cid in case_ids})
    for event in events:
        state.apply(event)
    return state
