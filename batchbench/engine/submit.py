"""Doing one service action for one submission, journaling intent before and outcome after.

The pipeline decides which action comes next; a :class:`Submitter` does it,
through the stage's provider. Each billable or state-changing call is preceded
by its intent in the journal and followed by its outcome, so a crash at any
point is resumed without a batch created twice: an interrupted create is first
looked for on the service (:meth:`Client.find`) and adopted when found, never
one this run or another run of the jobs folder holds. On a service whose
batches carry no metadata an adoption is confirmed by the ids in its results:
a batch whose results name none of the submission's requests is disowned and
the submission looked for again (then created, if nothing else is found).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence

from .. import _failpoints
from ..clock import SYSTEM, Clock
from ..errors import (
    ApiError,
    ApiNotFoundError,
    FileNotYetVisible,
    InvariantError,
    NoRoom,
    TransientApiError,
    may_land_later,
)
from ..kinds import Stage
from ..providers.base import BatchView, Provider, Tag
from ..providers.one_by_one import CallKind
from ..storage.lease import this_machine
from .calls import CallRunner, call_kind
from .events import (
    BatchSeen,
    Candidates,
    Created,
    CreateFailed,
    CreateRefused,
    CreateStarted,
    Disowned,
    Event,
    RemoteDeleted,
    Uploaded,
)
from .fetch import download
from .owed import OwedResults
from .runconfig import RunConfig
from .rundir import Run, batches_elsewhere
from .spend import SpendCap
from .state import RunState
from .submission import Submission, walk, watched


def _utc(t: float) -> str:
    return time.strftime("%H:%M:%S UTC", time.gmtime(t))


# How long after a batch's create or its last change a 404 for it is a passing fault.
NOT_FOUND_GRACE = 600.0
ROOM_WAIT = 60.0  # after a create refused for want of room, before the next try


class Submitter:
    def __init__(
        self,
        run: Run,
        config: RunConfig,
        providers: Mapping[Stage, Provider],
        record: Callable[[Event], None],
        state: Callable[[], RunState],
        *,
        clock: Clock = SYSTEM,
        max_ambiguous_creates: int = 8,
        warn: Callable[[str], None] | None = None,
        outage_seconds: float = 600.0,
        window_from: float | None = None,
        create_wait: float | None = None,
        look_every: float = 30.0,
        spend: SpendCap | None = None,
    ) -> None:
        self.run = run
        self.spend = spend  # --max-spend: held before every billable call
        self.create_wait = create_wait  # the user's bound on a create's landing, if given
        self.look_every = look_every  # while a create may still land: a look this often
        # Whose clock its waits are on: the clock's machine where it says (a test's, minutes
        # apart on one fake clock), else this host's.
        self.machine: str = getattr(clock, "machine", None) or this_machine()
        self.config = config
        self.providers = providers
        self.record = record
        self.clock = clock
        self.max_ambiguous_creates = max_ambiguous_creates
        self._ambiguous_creates = 0
        self._said_no_room: set[Stage] = set()
        self.outage_seconds = outage_seconds
        # A failing create's outage window runs from the first create of the journal's
        # that made nothing; a plain invocation (the user's own) starts a fresh one.
        self.window_from = window_from
        self.state = state
        self.warn = warn or (lambda _: None)
        self.owed = OwedResults(record, clock, self.warn)  # results the service says it has
        self.calls = CallRunner(run, config.run_id, record, state, clock, self.warn)
        self._looked: dict[str, float] = {}  # submission → when a landing was last looked for

    def tag(self, sub: Submission) -> Tag:
        return Tag(
            run=self.config.name,
            run_id=self.config.run_id,
            stage=sub.stage,
            sub=sub.id,
            seq=sub.seq,
            attempt=max(line.attempt for line in sub.lines),
            requests=len(sub.lines),
            model=self.config.model(sub.stage),
            shared=sub.shared,
        )

    def _checked(self, sub: Submission) -> None:
        """The service's file rules, checked on the file as it will be sent."""
        path = self.run.request_path(sub.path)
        lines = path.read_bytes().splitlines(keepends=True)
        self.providers[sub.stage].wire.check_file(lines, str(path))

    def upload(self, sub: Submission) -> None:
        """Put the request file where the service reads it from (an upload, or nothing for
        a service whose requests travel in the create call). An upload whose outcome a
        crash lost is merely orphaned: the file is sent again."""
        self._checked(sub)
        if call_kind(sub, self.providers[sub.stage].wire) is not None:
            self.record(Uploaded(sub=sub.id, file_id=None))  # each request is its own call
            return
        client = self.providers[sub.stage].client
        file_id = client.upload(self.run.request_path(sub.path), self.tag(sub))
        _failpoints.hit("uploaded")
        self.record(Uploaded(sub=sub.id, file_id=file_id))

    def create(self, sub: Submission, known: set[str]) -> bool:
        """Create once, and only after looking on the service: where batches keep the
        run's tag, for one carrying this submission's (a restored or copied run folder, a
        shortened journal: whatever the folder says, nothing is bought twice); where
        they keep none, after an ambiguous failure, for the candidates it may have made.
        Never a batch the run, or another run of the jobs folder, holds. Requests that go
        one call at a time are sent so (:mod:`.calls`), each looked for first. While a
        create of unknown outcome may still land, its batch is only looked for (False: a
        wait, nothing done)."""
        if sub.landing:  # a create of unknown outcome may still land: on this machine's clock
            mine = sub.landing.get(self.machine, sub.landing.get(""))
            if mine is None:  # made on another machine: a whole window from now, here
                self._unanswered(sub, "its create, sent from another machine", self.clock.time())
                return True
            if mine > self.clock.time():
                return self._look_for_landing(sub, known)
        kind = call_kind(sub, self.providers[sub.stage].wire)
        if kind is not None:
            self._send_calls(sub, kind)
            return True
        if self.look(sub, known):
            return True
        if sub.create_open and self._open_create(sub):
            return True
        self._check_window(sub, None)
        client = self.providers[sub.stage].client
        tag = self.tag(sub)
        self.run.home.check_home()  # not moved away meanwhile: every billable call asks
        self._within_cap(sub)
        self.record(CreateStarted(sub=sub.id, file_id=sub.file_id))
        _failpoints.hit("creating")  # the intent journaled, the call not yet made
        try:
            view = client.create(tag, sub.file_id, self.run.request_path(sub.path))
        except NoRoom as exc:  # definite, nothing made: wait for a job to end
            self._no_room(sub, exc)
            return True
        except (TransientApiError, FileNotYetVisible) as exc:
            _failpoints.hit("create_unanswered")  # sent, no answer, nothing journaled yet
            if may_land_later(exc) and self.lands_within(sub) > 0:
                self._unanswered(sub, str(exc), self.clock.time())
                return True
            self.record(CreateFailed(sub=sub.id, reason=str(exc)))
            self._ambiguous(sub, exc)
            return True
        except ApiError as exc:  # the service said no: nothing waits for it
            self.record(CreateFailed(sub=sub.id, reason=str(exc)))
            raise
        self._ambiguous_creates = 0
        _failpoints.hit("created")
        self.record(Created(sub=sub.id, batch_id=view.id))
        self.record_batch(sub, view)
        return True

    def _within_cap(self, sub: Submission) -> None:
        """Nothing bought past --max-spend (:mod:`.spend`): checked on the journal's sums."""
        if self.spend is not None:
            self.spend.before_buying(sub, self.state(), self.config)

    def lands_within(self, sub: Submission) -> float:
        """How long a create of this submission's with no answer may still make its batch:
        the user's ``--create-wait``, else its service's (:attr:`.Client.lands_within`)."""
        if self.create_wait is not None:
            return self.create_wait
        return self.providers[sub.stage].client.lands_within

    def _open_create(self, sub: Submission) -> bool:
        """A create journaled with no outcome and not found on the service: the process
        that sent it stopped mid-call (or another machine, held up, is sending it). It may
        still land for as long as a create with no answer may, counted from now: the
        journal's stamp is the writer's clock, which may be another machine's, minutes
        off. Waited for (True) when the service can make a second batch."""
        if self.lands_within(sub) <= 0:
            return False
        why = "journaled with no outcome: the process that sent it stopped before its answer"
        self._unanswered(sub, why, self.clock.time())
        return True

    def _unanswered(self, sub: Submission, why: str, sent: float) -> None:
        """A create that went out and got no definite answer may reach the service later
        (:func:`~batchbench.errors.may_land_later`): looked for at each tick until it can
        no longer land, never made again before — said once, with why."""
        land_by = sent + self.lands_within(sub)
        self.record(CreateFailed(sub=sub.id, reason=why, land_by=land_by, machine=self.machine))
        service = self.providers[sub.stage].client.service
        self.warn(
            f"note: the create of {sub.id} got no answer ({why}); it may still reach"
            f" {service.provider} and make the batch until {_utc(land_by)}: looking for"
            " it at each tick, and creating nothing again before"
        )

    def _look_for_landing(self, sub: Submission, known: set[str]) -> bool:
        """A look once a poll while a create may still land; True when one found a batch."""
        now = self.clock.time()
        if now - self._looked.get(sub.id, float("-inf")) < self.look_every:
            return False
        self._looked[sub.id] = now
        return self.look(sub, known)

    def _ambiguous(self, sub: Submission, exc: ApiError) -> None:
        """A create the service answered with a passing failure: it may have made the
        batch (looked for first), or the file is not visible yet right after its upload.
        Tried again a little later — for as long as a service may be down (the outage
        window), not longer."""
        self._ambiguous_creates += 1
        self._check_window(sub, exc)
        if self._ambiguous_creates >= self.max_ambiguous_creates:
            raise exc
        self.clock.sleep(min(0.1 * 2**self._ambiguous_creates, 10.0))

    def _no_room(self, sub: Submission, exc: NoRoom) -> None:
        until = self.clock.time() + (exc.retry_after or ROOM_WAIT)
        self.record(CreateRefused(sub=sub.id, reason=str(exc), hold_until=until))
        if sub.stage not in self._said_no_room:  # once a stage an invocation
            self._said_no_room.add(sub.stage)
            self.warn(
                f"note: {sub.id} waits for room: the service runs as many jobs at once as"
                f" it takes ({exc})"
            )

    def _check_window(self, sub: Submission, last: Exception | None) -> None:
        """Stop once creates have failed for the outage window: from the first create of
        the journal that made nothing (so cron ticks, each a new process, share one
        window), or from this invocation's start for a plain run. Nothing more is tried.
        A create that got no answer was waited for until it could no longer land: the
        window is that much longer then (the second such create is the last)."""
        since = self.state().create_failing_since
        if since is None:
            return
        if self.window_from is not None:
            since = max(since, self.window_from)
        now = self.clock.time()
        window = self.outage_seconds
        if sub.landing:
            window += self.lands_within(sub)
        if now - since < window:
            return
        said = f"; last: {last}" if last is not None else ""
        raise ApiError(
            f"creating the batch of {sub.id} has failed for {(now - since) / 60:.0f} minutes"
            f"{said}: stopped, nothing more bought; run the command again (without --no-wait)"
            " when the service is back — it is looked at before any new create"
        )

    def _send_calls(self, sub: Submission, kind: CallKind) -> None:
        calls = self.providers[sub.stage].client.calls(kind, self.config.model(sub.stage))
        if calls is None:
            raise InvariantError(f"{sub.id}: its service sends no {kind} calls")
        self.run.home.check_home()
        self._within_cap(sub)
        self.record(CreateStarted(sub=sub.id))
        view = self.calls.run_calls(sub, calls)
        self.record(Created(sub=sub.id, batch_id=view.id))
        self.record_batch(sub, view)

    def look(self, sub: Submission, known: set[str]) -> bool:
        """Look on the service for a batch this submission may already have; True when
        one was adopted (a tag says it is the run's) or candidates were found (no tag:
        their results will tell)."""
        client = self.providers[sub.stage].client
        # Even with no create in the journal: a journal deleted, cut or restored from a
        # backup forgot it, and only the service remembers (by its tag, or by its results).
        known = known | sub.disowned | batches_elsewhere(self.run, self.config.run_id)
        tag = self.tag(sub)
        if client.marks == "tag":
            found = client.find(tag, self.config.created_at, known)
            if found:
                self.record(Created(sub=sub.id, batch_id=found[0].id, adopted=True))
                self.record_batch(sub, found[0])
            return bool(found)
        candidates = client.find(tag, sub.create_started or self.config.created_at, known)
        if candidates:
            self.record(Candidates(sub=sub.id, batch_ids=[c.id for c in candidates]))
            for candidate in candidates:
                self.record(BatchSeen.of(sub.id, candidate))
        return bool(candidates)

    def record_batch(self, sub: Submission, view: BatchView) -> None:
        """Journal what the service says of a batch (or of a candidate) whenever it
        changes (counts included). One that says it ended without its results is owed
        them (:meth:`owe`)."""
        last = sub.candidates.get(view.id, sub.view)
        if dataclasses.replace(view, created_at=None) != last:
            self.record(BatchSeen.of(sub.id, view))
        if view.awaiting and view.id == sub.batch_id:
            self.owed.owe(sub, view.id, f"batch {view.id} ({sub.id}) says {view.status!r}")

    def poll(self, subs: Sequence[Submission]) -> None:
        """Refresh these batches: one walk of each service's list, then one by one."""
        for stage, provider in self.providers.items():
            waiting = {b: s for s in subs if s.stage == stage for b in watched(s)}
            found, rest = walk(provider.client, waiting)
            for batch_id, view in found.items():
                self.record_batch(waiting[batch_id], view)
            for batch_id in rest:
                self.refresh(waiting[batch_id], batch_id)

    def refresh(self, sub: Submission, batch_id: str) -> None:
        """Ask for one batch (or candidate) by id. A candidate that vanished was not the
        run's; the run's own batch that vanished (404) cannot be collected: stop."""
        try:
            self.record_batch(sub, self.providers[sub.stage].client.retrieve(batch_id))
        except ApiNotFoundError:
            if batch_id in sub.candidates:
                self.record(Disowned(sub=sub.id, batch_id=batch_id))
                return
            raise self._not_found(sub, batch_id) from None

    def _not_found(self, sub: Submission, batch_id: str) -> ApiError:
        """A 404 for the run's own batch: for a while after its create or its last change
        a service may answer so and find it again later (anthropic-sdk-python#1432), so it
        is a passing fault then (asked again, never created again); beyond that, the
        batch is gone and its requests cannot be collected."""
        since = max(sub.create_started or sub.planned_at, sub.seen_at or 0.0)
        if self.clock.time() - since < NOT_FOUND_GRACE:
            return TransientApiError(
                f"batch {batch_id} ({sub.id}) answered 404 shortly after its create or its"
                " last change (the service does so for a while): asking again",
                status=404,
                batch_id=batch_id,
            )
        return ApiError(
            f"batch {batch_id} ({sub.id}) vanished from the API (404) and stayed gone for"
            f" {NOT_FOUND_GRACE / 60:.0f} minutes; its requests cannot be collected",
            status=404,
            batch_id=batch_id,
        )

    def download(self, sub: Submission, file_id: str) -> None:
        """One result file, checked before it is kept (:func:`.fetch.download`)."""
        provider = self.providers[sub.stage]
        download(
            sub,
            file_id,
            run=self.run,
            provider=provider,
            record=self.record,
            owed=self.owed,
            calls=self.calls,
        )

    def delete_remote(self, sub: Submission) -> None:
        """Free the service's storage: the raw copies on disk are the source of truth."""
        files = [f for f in (sub.file_id, *sub.result_files()) if f]
        if call_kind(sub, self.providers[sub.stage].wire) is not None:
            files = []  # nothing of its is on the service
        self.providers[sub.stage].client.delete(files)
        self.record(RemoteDeleted(sub=sub.id, file_ids=files))
