"""The fold: a run's journal events → what the run has reached.

:func:`fold` replays the journal (:mod:`batchbench.engine.events`); nothing else holds
state. Each case has a small state machine per stage (pending → inflight → ok
or failed), each submission (one request file) the batch it became and what
the service last said of it, as a :class:`BatchView`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import RunStateError
from ..kinds import ProviderName, Stage
from ..providers import legacy
from ..providers.base import Account
from .cases import CaseState
from .events import (
    Borrowed,
    CallAnswered,
    CallSent,
    CallsStopped,
    CancelRequested,
    Candidates,
    Collected,
    Created,
    CreateRefused,
    CreateStarted,
    DeadlineSet,
    Event,
    Plan,
    Redo,
    Resumed,
    ServiceSet,
    Stalled,
    Tailed,
)
from .submission import SUB_EVENTS, Submission


@dataclass(frozen=True)
class StageProgress:
    done: int
    failed: int
    total: int


@dataclass
class RunState:
    cases: dict[str, CaseState]
    subs: dict[str, Submission] = field(default_factory=dict)
    holds: dict[str, float] = field(default_factory=dict)  # stage → not before (time)
    caps: dict[str, int] = field(default_factory=dict)  # stage → shrunk shard size
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    losses: dict[str, int] = field(default_factory=dict)  # stage → requests the service lost
    stalled_cases: set[str] = field(default_factory=set)  # sent again once after a stall
    stalls: int = 0  # batches that never started in time
    flex_cases: set[tuple[str, str]] = field(default_factory=set)  # (stage, case) to flex
    flex_usage: dict[str, dict[str, int]] = field(default_factory=dict)  # of flex calls
    listed_cases: set[tuple[str, str]] = field(default_factory=set)  # (stage, case) on demand
    listed_usage: dict[str, dict[str, int]] = field(default_factory=dict)  # at list price
    # Requests sent one call at a time (:mod:`.calls`): sent, their answer not journaled
    # (unknown: never sent again blind), and answered (id → the output line).
    calls_open: set[str] = field(default_factory=set)
    calls_done: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Since when creates have been tried without one being made (or found): the outage
    # window of a create that keeps failing, across invocations (cron ticks included).
    create_failing_since: float | None = None
    # stage → provider, base URL, account (None: not recorded, before 0.3)
    services: dict[Stage, tuple[ProviderName, str, Account | None]] = field(default_factory=dict)
    cancelled: bool = False
    started: float | None = None
    ended: float | None = None  # when the last batch was collected (a finished run's end)
    last_event: float | None = None  # when the journal last changed
    # What the service says served each stage's good replies (#66.1): stage → model (or
    # fingerprint) → replies; and stage → [first query, last collection] times.
    served: dict[str, dict[str, int]] = field(default_factory=dict)
    fingerprints: dict[str, dict[str, int]] = field(default_factory=dict)
    tiers: dict[str, dict[str, int]] = field(default_factory=dict)  # stage → tier → replies
    queried: dict[str, list[float]] = field(default_factory=dict)
    deadline: float | None = None  # run --deadline: the run is to end by then
    allow_list_price: bool = False  # and may fall back on demand, at the list price
    deadline_given: str = ""  # the deadline as the user wrote it
    judge_requests: float = 1.0  # an answer's judge requests, one pass (DeadlineSet)

    def pending(self, stage: Stage, case_ids: Sequence[str], judge_pass: int = 1) -> list[str]:
        """Cases (in registry order) with a request of this stage (and judge pass) still
        to plan. A judge's extra passes go out once the answer is in, whatever pass 1
        came to."""
        out = []
        for case_id in case_ids:
            case = self.cases[case_id]
            if stage == "answers":
                wanted = not case.final and case.answers.status == "pending"
            elif judge_pass == 1:
                wanted = (
                    not case.final
                    and case.answers.status == "ok"
                    and case.judges.status == "pending"
                )
            else:
                wanted = (
                    case.answers.status == "ok"
                    and case.stage(stage, judge_pass).status == "pending"
                )
            if wanted:
                out.append(case_id)
        return out

    def finished(self, judge_passes: int) -> bool:
        """Every case has its final row, and every extra judge pass has ended."""
        return all(c.final for c in self.cases.values()) and self.passes_settled(judge_passes)

    def passes_settled(self, judge_passes: int) -> bool:
        """Every extra judge pass of every judged case has ended (ok or failed)."""
        cases = [c for c in self.cases.values() if c.answers.status == "ok"]
        extra = range(2, judge_passes + 1)
        return all(c.stage("judges", p).status in ("ok", "failed") for c in cases for p in extra)

    def judge_passes_collected(self, passes: int) -> int:
        """Judge replies collected valid, over every case and pass: the rows
        ``judge_passes.jsonl`` holds (at least)."""
        return sum(
            1
            for c in self.cases.values()
            for p in range(1, passes + 1)
            if c.stage("judges", p).status == "ok"
        )

    def in_flight(self) -> list[Submission]:
        return [s for s in self.subs.values() if s.in_flight]

    def progress(self, stage: Stage) -> StageProgress:
        """Done, failed and total cases of a stage, counted from collected results only
        (a batch still finalizing has collected nothing, so 100% means every result is in
        hand). A case whose answer failed for good is never judged."""
        total = len(self.cases)
        if stage == "judges":
            total -= sum(1 for c in self.cases.values() if c.answers.status == "failed")
        done = failed = 0
        for case in self.cases.values():
            st = case.stage(stage)
            if case.final == "scored" if stage == "judges" else st.status == "ok":
                done += 1
            elif st.status == "failed":
                failed += 1
        return StageProgress(done, failed, total)

    def next_seq(self, stage: Stage) -> int:
        return 1 + max((s.seq for s in self.subs.values() if s.stage == stage), default=0)

    def batch_ids(self) -> set[str]:
        """Every batch a submission of the run holds. (A batch one submission disowned may
        still be another's: after a lost memory every batch of a size is a candidate for
        each submission of that size, and each keeps its own disowned.)"""
        return {s.batch_id for s in self.subs.values() if s.batch_id is not None}

    def used_ids(self) -> dict[str, str]:
        """Every request id the run has planned so far, and its case."""
        return {cid: ln.case_id for sub in self.subs.values() for cid, ln in sub.ids().items()}

    def apply(self, event: Event) -> None:
        """Fold one journal event into the state (the only way state changes)."""
        self.last_event = event.t
        run_level = _RUN_EVENTS.get(type(event))
        if run_level is not None:
            run_level(self, event)
            return
        if isinstance(event, CreateStarted):
            self.create_failing_since = self.create_failing_since or event.t
        elif isinstance(event, (Created, Candidates, CreateRefused)):
            self.create_failing_since = None
        sub = self.subs.get(getattr(event, "sub", ""))
        if sub is None:
            return
        if isinstance(event, CreateRefused):  # no room: the stage waits for some
            self.holds[sub.stage] = max(self.holds.get(sub.stage, 0.0), event.hold_until)
        if isinstance(event, CreateStarted):
            self._queried(sub.stage, event.t)
        if isinstance(event, Collected):
            self._apply_collected(sub, event)
            return
        handler = SUB_EVENTS.get(type(event))
        if handler is not None:
            handler(sub, event)

    def _apply_plan(self, event: Plan) -> None:
        sub = Submission(
            event.sub,
            event.stage,
            event.seq,
            event.path,
            event.lines,
            event.t,
            event.tokens,
            event.judge_pass,
            event.shares(),
            flex=event.flex,
            listed=event.listed,
        )
        self.subs[sub.id] = sub
        self.started = self.started or event.t
        if sub.flex or sub.listed:  # its requests go out one call at a time, now
            self._queried(sub.stage, event.t)
        for line in sub.lines:
            case, judge_pass = self.cases[line.case_id], sub.pass_of(line)
            st = case.stage(sub.stage, judge_pass)
            st.status, st.attempt, st.sub = "inflight", line.attempt, sub.id
            if case.started is None and judge_pass == 1:
                case.started = event.t

    def via(self, stage: str, case_id: str) -> tuple[bool, bool]:
        """Whether a case's request goes on flex, or on demand at list price (a batch cut
        short for it: a tail, a deadline's fallback), rather than in a batch."""
        return (stage, case_id) in self.flex_cases, (stage, case_id) in self.listed_cases

    def _queried(self, stage: str, t: float) -> None:
        """A query went out (or its results came back) at ``t``: the stage's span grows."""
        span = self.queried.setdefault(stage, [t, t])
        span[0], span[1] = min(span[0], t), max(span[1], t)

    def _record_served(self, stage: str, event: Collected) -> None:
        for kept, counts in (
            (self.served, event.served),
            (self.fingerprints, event.fingerprints),
            (self.tiers, event.tiers),
        ):
            into = kept.setdefault(stage, {})
            for name, n in counts.items():
                into[name] = into.get(name, 0) + n
        if stage in self.queried:
            self._queried(stage, event.t)

    def _apply_collected(self, sub: Submission, event: Collected) -> None:
        sub.collected = True
        self.ended = event.t
        self._record_served(sub.stage, event)
        stage, keyed = sub.stage, sub.keyed()
        # An extra judge pass writes no row, ends no case; nor does a part of a case judged
        # part by part: its collection says which cases it ended (``graded``).
        rows = stage == "answers" or event.graded is None
        for key, outcome in event.outcomes.items():
            case_id, judge_pass, temperature = keyed.get(key) or (key, sub.judge_pass, True)
            case, main = self.cases[case_id], judge_pass == 1 and rows
            st = case.stage(stage, judge_pass)
            if st.sub != sub.id:
                continue  # superseded (cannot happen in order, but never regress)
            kind = outcome.kind
            if kind == "ok":
                st.status, st.source, st.custom_id = "ok", outcome.source, outcome.custom_id
                st.used_temperature = temperature
                if stage == "judges" and main:
                    case.final = "scored"
                    case.rows += 1
            elif kind in ("failed", "unknown"):
                st.status, st.error = "failed", outcome.detail
                if main:
                    case.final, case.error = "error", outcome.detail
                    case.unknown = kind == "unknown"
                    case.rows += 1
            else:
                st.status = "pending"
                adjust = outcome.adjust if kind == "retry" else legacy.adjusted(kind, st.adjust)
                if adjust is not None:  # sent again with its wire's fallback (0.2: two kinds)
                    st.adjust = dict(adjust)
                    st.transients += 1  # the reference's fallbacks use up an attempt
                elif kind == "invalid":
                    st.invalid += 1
                elif kind == "transient" and not event.free_retry:
                    st.transients += 1
                elif kind == "lost" and not sub.tailed:  # a tail cut short is sent on flex
                    st.losses += 1
                    self.losses[stage] = self.losses.get(stage, 0) + 1
        for case_id, error in (event.graded or {}).items():
            case = self.cases[case_id]
            case.final, case.error = ("error", error) if error is not None else ("scored", None)
            case.rows += 1
        if event.hold_until:
            self.holds[stage] = max(self.holds.get(stage, 0.0), event.hold_until)
        if event.cap:
            self.caps[stage] = event.cap
        for usage in (
            (self.usage.setdefault(stage, {}),)
            + ((self.flex_usage.setdefault(stage, {}),) if sub.flex else ())
            + ((self.listed_usage.setdefault(stage, {}),) if sub.listed else ())
        ):
            for key, value in event.usage.items():
                usage[key] = usage.get(key, 0) + int(value)
        self.anomalies.extend(event.anomalies)


def _cancel(state: RunState, _: CancelRequested) -> None:
    state.cancelled = True


def _resume(state: RunState, _: Resumed) -> None:
    state.cancelled = False


def _redo(state: RunState, event: Redo) -> None:
    for case_id in event.cases:
        state.cases[case_id].reopen()


def _service(state: RunState, event: ServiceSet) -> None:
    account = None if event.account is None else tuple(event.account.items())
    state.services[event.stage] = (event.provider, event.base_url, account)


def _borrowed(state: RunState, event: Borrowed) -> None:
    """Answers of another run taken as this run's (a judge panel's): as if collected."""
    for case_id, answer in event.answers.items():
        case = state.cases[case_id]
        st = case.answers
        if answer.source is not None:
            st.status, st.source, st.custom_id = "ok", answer.source, answer.custom_id
            st.used_temperature = answer.temperature
        else:
            st.status, case.final, case.error = "failed", "error", answer.error
            case.rows += 1
        case.started = case.started or event.t
    state.started = state.started or event.t


def _stalled(state: RunState, event: Stalled) -> None:
    sub = state.subs.get(event.sub)
    if sub is None:
        return
    sub.stalled = True
    state.stalls += 1
    state.stalled_cases.update(line.case_id for line in sub.lines)


def _tailed(state: RunState, event: Tailed) -> None:
    sub = state.subs.get(event.sub)
    if sub is None:
        return
    sub.tailed = max(1, event.remaining)
    cases = state.listed_cases if event.listed else state.flex_cases
    cases.update((sub.stage, line.case_id) for line in sub.lines)


def _call_sent(state: RunState, event: CallSent) -> None:
    state.calls_open.add(event.rid)


def _call_answered(state: RunState, event: CallAnswered) -> None:
    state.calls_open.discard(event.rid)
    if event.reply is not None:
        state.calls_done[event.rid] = event.reply


def _calls_stopped(state: RunState, event: CallsStopped) -> None:
    """The service had no capacity: what the submission did not get answered goes back
    to the batch path."""
    sub = state.subs.get(event.sub)
    if sub is not None:
        state.flex_cases.difference_update((sub.stage, line.case_id) for line in sub.lines)
        state.listed_cases.difference_update((sub.stage, line.case_id) for line in sub.lines)


def _deadline(state: RunState, event: DeadlineSet) -> None:
    state.deadline, state.allow_list_price = event.at, event.allow_list_price
    state.deadline_given, state.judge_requests = event.given, event.judge_requests


# One handler per event type: a table lookup, not a chain of isinstance tests
# (``status`` and ``list`` fold every run's journal on each call).
_RUN_EVENTS: dict[type, Callable[[RunState, Any], None]] = {
    Plan: RunState._apply_plan,
    CancelRequested: _cancel,
    Resumed: _resume,
    Redo: _redo,
    ServiceSet: _service,
    Stalled: _stalled,
    Tailed: _tailed,
    Borrowed: _borrowed,
    CallSent: _call_sent,
    CallAnswered: _call_answered,
    CallsStopped: _calls_stopped,
    DeadlineSet: _deadline,
}


def fold(case_ids: Sequence[str], events: Sequence[Event], where: str = "journal") -> RunState:
    """The run's state from its events; an event naming a case the run does not have
    is a one-line error naming the journal and the case."""
    state = RunState({cid: CaseState(cid) for cid in case_ids})
    for number, event in enumerate(events, 1):
        try:
            state.apply(event)
        except KeyError as exc:
            raise RunStateError(
                f"{where}: event {number} ({type(event).__name__}) names case {exc.args[0]!r},"
                f" which is not one of the run's {len(case_ids)} cases"
            ) from None
    return state
