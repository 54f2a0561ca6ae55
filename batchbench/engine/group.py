"""Several runs in one command, advanced together in one loop (a single run is a group of one).

Each run keeps its own folder, journal, lock and rows (so each stays
byte-compatible with the reference), and its own :class:`Pipeline` decides its
next action. What they share is the loop: every tick each pipeline does what
needs no waiting, then one walk of each service's batch list (OpenAI's,
Anthropic's, ...: each listed once, for every run's batches there) refreshes
them all. A run that fails (its model unknown, a batch that vanished) is set
aside with its error; so is one whose service stays down past the outage
window. The others go on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from ..clock import SYSTEM, Clock
from ..errors import BatchbenchError, RunLockedError, TransientApiError
from ..providers.base import Client
from ..reporting import quiet
from .pipeline import Pipeline
from .submission import Submission, walk, watched


@dataclass
class Member:
    pipeline: Pipeline
    error: str | None = None  # why this run was set aside
    done: bool = False
    failing_since: float | None = None  # its service has failed since then, without a break
    said_at: float | None = None  # when that failing was last said (once a minute at most)
    # A --no-wait tick during which another machine took the run over (its lease, a line
    # of its journal): that tick's normal end, said in one line; nothing stale is written.
    superseded: str | None = None

    def answered(self) -> None:
        """Its service answered: a failing streak, if any, is over. When it was last said
        is kept: a fault between answers (a batch that vanished, asked for at each poll
        while the list walks answer) is said once a minute, not at every poll."""
        self.failing_since = None


KEEP = 120.0  # the longest sleep between two renewals of a run's claim (a bucket's lease)


@dataclass
class Group:
    members: list[Member]
    poll_interval: float
    warn: Callable[[str], None] = quiet  # faults and runs set aside (stderr in the CLI)
    clock: Clock = SYSTEM
    outage_seconds: float = 600.0
    list_walks: int = field(default=0)  # poll ticks, each one walk per service
    _faults: bool = field(default=False)
    _waiting: bool = field(default=True)

    def active(self) -> list[Member]:
        return [m for m in self.members if m.error is None and not m.done and not m.superseded]

    def _guard(self, member: Member, action: Callable[[], object]) -> object:
        """Do a run's action; its failure is that run's (:meth:`_fail`)."""
        try:
            result = action()
        except BatchbenchError as exc:
            self._fail(member, exc)
            return None
        if result:  # it did something: the service answered
            member.answered()
        return result

    def _fail(self, member: Member, exc: BatchbenchError) -> None:
        """A service that fails for a passing reason is tried again at the next tick,
        until it has failed for ``outage_seconds``; any other failure sets the run
        aside at once. A group of one lets the error through: it is the command's. The
        failing is said when it starts, then once a minute (a tick every few seconds
        for ten minutes said it a hundred times). On a --no-wait tick, another machine
        taking the run over is the tick's end, not a failure."""
        if isinstance(exc, RunLockedError) and not self._waiting:
            member.superseded = str(exc)
            return
        if isinstance(exc, TransientApiError):
            now = self.clock.time()
            if member.failing_since is None:  # (a clock may stand at 0: not `or`)
                member.failing_since = now
            since = member.failing_since
            if now - since < self.outage_seconds:
                self._faults = True
                if member.said_at is None:
                    self.warn(f"warning: {exc}; trying again at the next tick")
                    member.said_at = now
                elif now - member.said_at >= 60:
                    self.warn(
                        f"warning: {exc}; failing for {now - since:.0f} s, trying again"
                        f" at the next tick (for up to {self.outage_seconds:.0f} s)"
                    )
                    member.said_at = now
                return
        if len(self.members) == 1:
            raise exc
        member.error = str(exc)
        self.warn(f"error: run {member.pipeline.config.name!r} stopped: {exc}")

    def _step_all(self) -> bool:
        acted = False
        for member in self.active():
            p = member.pipeline
            p.catch_up()
            while self._guard(member, p.step):
                acted = True
            if member.error is None and p.done():
                member.done = True
        return acted

    def poll(self) -> None:
        """One walk of each service's batch list for every in-flight batch of every run."""
        by_service: dict[int, tuple[Client, dict[str, tuple[Member, Submission]]]] = {}
        for member in self.active():
            for sub in member.pipeline.in_flight():
                client = member.pipeline.providers[sub.stage].client
                for batch_id in watched(sub):
                    by_service.setdefault(id(client), (client, {}))[1][batch_id] = (member, sub)
        if not by_service:
            return
        self.list_walks += 1
        for client, owners in by_service.values():
            served = list({id(m): m for m, _ in owners.values()}.values())
            try:
                found, rest = walk(client, {b: sub for b, (_, sub) in owners.items()})
            except BatchbenchError as exc:
                for member in served:
                    self._fail(member, exc)
                continue
            for member in served:
                member.answered()
            for batch_id, view in found.items():
                member, sub = owners[batch_id]
                record = member.pipeline.submitter.record_batch
                self._guard(member, functools.partial(record, sub, view))
            for batch_id in rest:
                member, sub = owners[batch_id]
                refresh = member.pipeline.submitter.refresh
                self._guard(member, functools.partial(refresh, sub, batch_id))

    def advance(self, *, wait: bool, on_progress: Callable[[Pipeline], None] | None = None) -> None:
        """Until every run is done or set aside; without ``wait``, until only waiting is left."""
        last_poll = float("-inf")
        self._waiting = wait
        while self.active():
            self._faults = False
            acted = self._step_all()
            flying = any(m.pipeline.in_flight() for m in self.active())
            if flying and self.clock.time() - last_poll >= self.poll_interval:
                self.poll()
                last_poll = self.clock.time()
                acted = self._step_all() or acted
            self._report(on_progress)
            if self._faults:  # a service failed for a passing reason: try again soon
                self.clock.sleep(min(self.poll_interval, 5.0))
                continue
            if acted:
                continue
            cancelled = all(
                m.pipeline.state.cancelled and not m.pipeline.in_flight() for m in self.active()
            )
            if not wait or cancelled:
                break
            pause = last_poll + self.poll_interval - self.clock.time()
            owed = [m.pipeline.submitter.owed.until(m.pipeline.in_flight()) for m in self.active()]
            if owed and None not in owed:  # only results owed: asked for again in a while
                pause = max(pause, min(t for t in owed if t is not None) - self.clock.time())
            self._wait(max(0.01, pause))
        self._report(on_progress)  # the state each run ended this invocation in

    def _wait(self, seconds: float) -> None:
        """Sleep, keeping each run's claim on it alive meanwhile (a run in a bucket renews
        its lease at least every KEEP seconds, however long the wait)."""
        while seconds > 0:
            step = min(seconds, KEEP)
            self.clock.sleep(step)
            seconds -= step
            for member in self.active():
                self._guard(member, member.pipeline.run.keep)

    def _report(self, on_progress: Callable[[Pipeline], None] | None) -> None:
        for member in self.members:
            if on_progress is not None and member.error is None:
                on_progress(member.pipeline)
