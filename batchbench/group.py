"""Several answer models in one command: one run each, advanced together in one process.

Each run keeps its own folder, journal, lock and rows (so each stays
byte-compatible with the reference), and its own :class:`Pipeline` decides its
next action. What they share is the loop: every tick each pipeline does what
needs no waiting, then one walk of the batch list (100 batches a call) refreshes
the batches of all of them. A run that fails (its model unknown, a batch that
vanished) is set aside with its error; the others go on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .api import BatchApi
from .errors import BatchbenchError, TransientApiError
from .pipeline import Pipeline
from .runs import Submission


@dataclass
class Member:
    pipeline: Pipeline
    error: str | None = None  # why this run was set aside
    done: bool = False


@dataclass
class Group:
    members: list[Member]
    api: BatchApi
    poll_interval: float
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    outage_seconds: float = 600.0
    list_walks: int = field(default=0)  # poll ticks, each one walk of the batch list

    def active(self) -> list[Member]:
        return [m for m in self.members if m.error is None and not m.done]

    def _guard(self, member: Member, action: Callable[[], object]) -> object:
        """A run's own failure sets that run aside; the API being down is everyone's.
        (A group of one lets the error through: it is the command's error.)"""
        try:
            return action()
        except TransientApiError:
            raise
        except BatchbenchError as exc:
            if len(self.members) == 1:
                raise
            member.error = str(exc)
            self.say(f"error: run {member.pipeline.config.name!r} stopped: {exc}")
            return None

    def _step_all(self) -> bool:
        acted = False
        for member in self.active():
            p = member.pipeline
            p.catch_up()
            while self._guard(member, p.step) is not None:
                acted = True
            if member.error is None and p.done():
                member.done = True
        return acted

    def poll(self) -> None:
        """One walk of the batch list for every in-flight batch of every run."""
        waiting: dict[str, tuple[Member, Submission]] = {}
        for member in self.active():
            for sub in member.pipeline.in_flight():
                if sub.batch_id is not None:
                    waiting[sub.batch_id] = (member, sub)
        if not waiting:
            return
        self.list_walks += 1
        oldest = min(sub.planned_at for _, sub in waiting.values()) - 600
        for batch in self.api.batches_since(oldest):
            found = waiting.pop(batch["id"], None)
            if found is not None:
                member, sub = found
                record = member.pipeline.submitter.record_batch
                self._guard(member, functools.partial(record, sub, batch))
            if not waiting:
                break
        for member, sub in waiting.values():  # older than the walk reached
            self._guard(member, functools.partial(member.pipeline.submitter.refresh, sub))

    def advance(self, *, wait: bool, on_progress: Callable[[Pipeline], None] | None = None) -> None:
        """Until every run is done or set aside; without ``wait``, until only waiting is left."""
        last_poll = float("-inf")
        failing_since: float | None = None
        while self.active():
            try:
                acted = self._step_all()
                flying = any(m.pipeline.in_flight() for m in self.active())
                if flying and self.clock() - last_poll >= self.poll_interval:
                    self.poll()
                    last_poll = self.clock()
                    acted = self._step_all() or acted
                failing_since = None
            except TransientApiError as exc:
                failing_since = failing_since or self.clock()
                if self.clock() - failing_since >= self.outage_seconds:
                    raise
                self.say(f"warning: {exc}; trying again at the next tick")
                self.sleep(min(self.poll_interval, 5.0))
                continue
            if on_progress is not None:
                for member in self.active():
                    on_progress(member.pipeline)
            if acted:
                continue
            cancelled = all(
                m.pipeline.state.cancelled and not m.pipeline.in_flight() for m in self.active()
            )
            if not wait or cancelled:
                return
            self.sleep(max(0.01, last_poll + self.poll_interval - self.clock()))
