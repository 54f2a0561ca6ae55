"""Requests sent one call at a time — a batch's tail on the flex tier, Bedrock's
on-demand remainder — with every call in the run's journal.

A call is journaled before it is sent (:class:`.events.CallSent`) and its answer
after (:class:`.events.CallAnswered`), keyed by its request id: the run's journal is
the record every copy of the folder reads, whatever submission number a copy gave
the request. Before a call, the journals of every other folder holding the same run
(a clone, a restored backup, the original beside it) are looked at too, as the
service is looked at before a batch is created: what one folder bought, another
adopts, and a call whose outcome is unknown anywhere is never sent again blind.
Such a request ends its case in an error row of its own (:func:`unknown_detail`);
a plain rerun leaves it, ``run --resend-unknown`` sends it again.

A call refused for want of capacity (flex's 429) ran nothing: it is journaled as
such (a crash in the wait that follows leaves a refused call, known, not an unknown
one), said, and tried again after a wait, up to :data:`BUSY_TRIES` times
(:data:`BUSY_BOUND` seconds of waiting); then the submission's requests not yet
answered go back to the batch path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import _failpoints
from .._io import atomic_write_bytes
from ..clock import Clock
from ..errors import BatchbenchError, InvariantError
from ..providers.base import BatchView, Wire
from ..providers.one_by_one import Answered, CallKind, Calls, OutcomeUnknown, batch_id
from .events import CallAnswered, CallSent, CallsStopped, Event, Tailed
from .rundir import Run, list_runs
from .state import RunState
from .submission import Submission

BUSY_TRIES = 6  # tries of a call refused for want of capacity
BUSY_WAIT = 2.0  # seconds before the first try again (doubling)
BUSY_BOUND = sum(BUSY_WAIT * 2**k for k in range(BUSY_TRIES - 1))  # 62 s of waiting
LABELS: dict[CallKind, str] = {"flex": "flex", "ondemand": "on-demand"}


def call_kind(sub: Submission, wire: Wire) -> CallKind | None:
    """How a submission's requests go when not as a batch: on flex (a tail), or on demand
    (too few for the service's smallest batch: the user allowed it), else None."""
    if sub.flex:
        return "flex"
    if sub.listed or len(sub.lines) < wire.limits.min_lines:  # the user allowed it
        return "ondemand"
    return None


def unknown_detail(kind: CallKind, rid: str) -> str:
    """The error row of a request whose call's outcome is unknown."""
    return (
        f"OutcomeUnknown: the {LABELS[kind]} call for request {rid} was sent, but its answer"
        " never came back (the process stopped, or the reply was lost): it may have run"
        " and been billed, so it is not sent again; `run --resend-unknown` sends it again"
    )


def _legacy_unknown(line: dict[str, Any]) -> bool:
    """0.3 wrote a call of unknown outcome as a line with status 499."""
    status = (line.get("response") or {}).get("status_code")
    code = (line.get("error") or {}).get("errorCode")
    return 499 in (status, code)


@dataclass
class Elsewhere:
    """What the other folders holding this run said: calls sent and answered, and the
    batches they cut short (batch id → the event: its remaining lines, where they go)."""

    open: dict[str, str] = field(default_factory=dict)  # request id → the folder
    done: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    tailed: dict[str, Tailed] = field(default_factory=dict)


def elsewhere(run: Run, run_id: str) -> Elsewhere:
    """The other folders of the jobs folder whose run.json holds this run's token, read as
    they are (the run's token lock keeps them still); a folder that does not read is
    skipped."""
    found = Elsewhere()
    for other in list_runs(run.root.parent):
        if other.root == run.root:
            continue
        try:
            if other.load_config().run_id != run_id:
                continue
            events = other.events()
        except BatchbenchError:
            continue
        where = str(other.root)
        for event in events:
            if isinstance(event, CallSent):
                found.open[event.rid] = where
            elif isinstance(event, CallAnswered):
                found.open.pop(event.rid, None)
                if event.reply is not None:
                    found.done[event.rid] = (event.reply, where)
            elif isinstance(event, Tailed):
                found.tailed[event.batch_id] = event
    return found


class CallRunner:
    """Sends a submission's requests one call at a time, journaling each."""

    def __init__(
        self,
        run: Run,
        run_id: str,
        record: Callable[[Event], None],
        state: Callable[[], RunState],
        clock: Clock,
        warn: Callable[[str], None],
    ) -> None:
        self.run = run
        self.run_id = run_id
        self.record = record
        self.state = state
        self.clock = clock
        self.warn = warn
        self._elsewhere: Elsewhere | None = None

    @property
    def others(self) -> Elsewhere:
        """The other folders of the run, read once: the token lock keeps them still."""
        if self._elsewhere is None:
            self._elsewhere = elsewhere(self.run, self.run_id)
        return self._elsewhere

    def adopt_tails(self) -> None:
        """A batch of this run another folder cut short (a flex tail, a deadline's fallback)
        is cut short here too, so its rest goes out as the same calls (found there, not
        bought again)."""
        tailed = self.others.tailed
        if not tailed:
            return
        for sub in list(self.state().subs.values()):
            if sub.batch_id in tailed and not sub.tailed:
                cut = tailed[sub.batch_id]
                self.record(
                    Tailed(
                        sub=sub.id,
                        batch_id=sub.batch_id,
                        remaining=cut.remaining,
                        listed=cut.listed,
                    )
                )

    def run_calls(self, sub: Submission, calls: Calls) -> BatchView:
        """Every request of ``sub`` not yet answered, one call each; the submission's batch
        (ended) once each is answered, refused for good, or of unknown outcome."""
        lines = self.run.request_path(sub.path).read_bytes().splitlines()
        requests = [json.loads(line) for line in lines if line.strip()]
        self._adopt(sub, [calls.key(r) for r in requests])
        for request in requests:
            rid = calls.key(request)
            st = self.state()
            if rid in st.calls_open:  # sent, never answered: never sent again blind
                self.warn(f"warning: {unknown_detail(calls.kind, rid)}")
                continue
            if rid in st.calls_done:
                continue
            if not self._send(sub, calls, rid, request):
                break
        st = self.state()
        ok = sum(1 for r in requests if calls.ok(st.calls_done.get(calls.key(r), {})))
        made = batch_id(calls.kind, self.run_id, sub.id)
        return BatchView(
            id=made,
            status=calls.status,
            phase="ended",
            ending="completed",
            total=len(requests),
            completed=ok,
            failed=len(requests) - ok,
            files=(made,),
            created_at=self.clock.time(),
        )

    def _adopt(self, sub: Submission, rids: Sequence[str]) -> None:
        """What another folder of the run, or an older batchbench's files beside the
        request file, knows of these calls, journaled here before anything is sent. A
        call open here (a copy taken while the original waited for its answer) takes the
        answer another folder journaled since: it is not lost, nor sent again."""
        legacy_open, legacy_done = self._legacy(sub)
        st = self.state()
        for rid in rids:
            if rid in st.calls_done:
                continue
            if rid in self.others.done:  # answered there, even one left open here
                reply, where = self.others.done[rid]
                self.record(CallAnswered(sub=sub.id, rid=rid, reply=reply, adopted_from=where))
            elif rid in st.calls_open:
                continue
            elif rid in legacy_done:
                self.record(CallAnswered(sub=sub.id, rid=rid, reply=legacy_done[rid]))
            elif rid in self.others.open:
                self.record(CallSent(sub=sub.id, rid=rid, adopted_from=self.others.open[rid]))
            elif rid in legacy_open:
                self.record(CallSent(sub=sub.id, rid=rid))

    def _legacy(self, sub: Submission) -> tuple[set[str], dict[str, dict[str, Any]]]:
        """Calls an older batchbench noted in files beside the request file (0.3:
        ``<file>.<kind>.sent`` before each call, ``<file>.<kind>.out`` after)."""
        sent: set[str] = set()
        done: dict[str, dict[str, Any]] = {}
        for kind in LABELS:
            base = self.run.request_path(sub.path)
            notes, out = (
                base.with_name(f"{base.name}.{kind}.sent"),
                base.with_name(f"{base.name}.{kind}.out"),
            )
            if notes.exists():
                sent |= {x.decode() for x in notes.read_bytes().splitlines() if x.strip()}
            if out.exists():
                for raw in out.read_bytes().splitlines():
                    try:
                        line = json.loads(raw)
                    except ValueError:
                        continue  # torn by a crash: its call's note says it was sent
                    rid = line.get("custom_id", line.get("recordId"))
                    if isinstance(rid, str) and not _legacy_unknown(line):
                        done[rid] = line
        return sent - set(done), done

    def _send(self, sub: Submission, calls: Calls, rid: str, request: dict[str, Any]) -> bool:
        """One request's call, tried again while the service has no capacity; False when
        it never had: the submission's rest goes back to the batch path."""
        wait = BUSY_WAIT
        for attempt in range(1, BUSY_TRIES + 1):
            self.record(CallSent(sub=sub.id, rid=rid))
            try:
                answer = calls.send(request)
            except OutcomeUnknown as lost:
                self.warn(f"warning: {unknown_detail(calls.kind, rid)} ({lost})")
                return True
            if isinstance(answer, Answered):
                self.record(CallAnswered(sub=sub.id, rid=rid, reply=answer.line))
                return True
            self.record(CallAnswered(sub=sub.id, rid=rid))  # refused: nothing ran
            if attempt == BUSY_TRIES:
                detail = (
                    f"{calls.label} did not take request {rid} in {BUSY_TRIES} tries over"
                    f" {BUSY_BOUND:g}s ({answer.why}): {sub.id}'s requests not yet answered go"
                    " back to the batch path"
                )
                self.record(CallsStopped(sub=sub.id, detail=detail))
                self.warn(f"warning: {detail}")
                return False
            self.warn(
                f"warning: {calls.label} did not take request {rid} ({answer.why}): nothing"
                f" ran; trying again in {wait:g}s, {attempt} of {BUSY_TRIES}"
            )
            _failpoints.hit("busy_wait")  # crash tests: refused, waiting to try again
            self.clock.sleep(wait)
            wait *= 2
        raise InvariantError("unreachable: the last try returns")

    def write(self, sub: Submission, ids: Sequence[str], dest: Any) -> int:
        """The submission's output file, from the journaled answers (in request order;
        a request refused for good or of unknown outcome has no line)."""
        done = self.state().calls_done
        data = "".join(json.dumps(done[rid]) + "\n" for rid in ids if rid in done).encode()
        atomic_write_bytes(dest, data)
        return len(data)
