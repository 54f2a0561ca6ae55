"""Batches that are late, and what the run does about them: one that never started is
sent again (``--resubmit-after``), one whose last few lines linger finishes them on the
flex tier (``--tail-flex``). Each rule is written here once; ``run --help`` quotes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import _failpoints
from ..providers.base import BatchView
from ..providers.registry import BY_NAME
from . import deadline
from .events import Stalled, Tailed
from .runconfig import RunConfig
from .state import RunState
from .submission import Submission
from .turnaround import Forecast

if TYPE_CHECKING:
    from .submit import Submitter

# The flex tail's rule: a batch running longer than --tail-flex seconds whose unfinished
# lines are at most this share of it, or one line, whichever is more (and at most
# TAIL_MOST), is cut short. The one line is said wherever the share is: a batch of fewer
# than 20 lines has a tail of one.
TAIL_SHARE = 0.05
TAIL_MOST = 500
TAIL_RULE = (
    f"at most {TAIL_SHARE:.0%} of its lines or one line, whichever is more (no more than"
    f" {TAIL_MOST}), still unfinished"
)


def tail_allowed(total: int) -> int:
    """The most unfinished lines of a batch of ``total`` the flex tail takes."""
    return min(TAIL_MOST, max(1, math.floor(total * TAIL_SHARE + 1e-9)))


def small_tail(view: BatchView) -> int:
    """How many of a running batch's lines are unfinished, when few enough for the flex
    tail (0 otherwise, or when the service says nothing of its progress)."""
    if view.phase != "running" or view.total <= 0 or view.awaiting:
        return 0
    remaining = view.total - view.done
    return remaining if 0 < remaining <= tail_allowed(view.total) else 0


def tail_due(
    state: RunState,
    now: float,
    after: float,
    flexible: Callable[[Submission], bool],
    said: set[str],
    warn: Callable[[str], None],
) -> tuple[Submission, int, float] | None:
    """A batch of a service with a flex tier that has run ``after`` seconds with a small
    tail (:func:`small_tail`) left, how many lines and how long it has run: once per
    batch, never a flex one. A batch past ``after`` whose tail is not small is said once
    (an invocation), with why: the rule is never silent about a batch it leaves."""
    if state.cancelled:
        return None
    for sub in state.in_flight():
        if sub.view is None or sub.tailed or sub.flex or not flexible(sub):
            continue
        ran = now - (sub.create_started or sub.planned_at)
        if ran < after:
            continue
        remaining = small_tail(sub.view)
        if remaining:
            return sub, remaining, ran
        view = sub.view
        left = view.total - view.done
        if view.phase != "running" or view.awaiting or left <= 0 or sub.id in said:
            continue
        said.add(sub.id)
        most = tail_allowed(view.total)
        why = (
            f"more than the {most} the rule takes ({TAIL_SHARE:.0%} of its lines or one,"
            " whichever is more): it runs on until its tail is that small"
        )
        warn(
            f"note: batch {sub.batch_id} ({sub.id}) has run {ran:.0f}s (--tail-flex"
            f" {after:g}s) with {left} of its {view.total} lines unfinished; {why}"
        )
    return None


def stuck(
    state: RunState,
    now: float,
    resubmit_after: float,
    said_waiting: set[str],
    warn: Callable[[str], None],
) -> Submission | None:
    """A batch the service has not started ``resubmit_after`` seconds after it was
    created (Gemini's jobs can stay PENDING for days): it is cancelled and its requests
    are sent again — once: cases already sent again for this wait on."""
    if state.cancelled:
        return None
    for sub in state.in_flight():
        if sub.view is None or sub.view.phase != "pending" or sub.stalled:
            continue
        if now - (sub.create_started or sub.planned_at) < resubmit_after:
            continue
        if all(line.case_id in state.stalled_cases for line in sub.lines):
            if sub.id not in said_waiting:  # once an invocation, not in silence
                said_waiting.add(sub.id)
                waited = (now - (sub.create_started or sub.planned_at)) / 3600
                warn(
                    f"warning: batch {sub.batch_id} ({sub.id}) has not started {waited:.1f} h"
                    " after it was created; its requests were already sent again once"
                    " (--resubmit-after), so it is waited for"
                )
            continue
        return sub
    return None


def _cut_untold(sub: Submission) -> bool:
    """Cut short in the journal (a tail, a deadline's fallback) while the service still
    runs it: the process stopped between the journal and the cancel."""
    view = sub.view
    return bool(sub.tailed) and view is not None and view.phase in ("pending", "running")


class Late:
    """What a run does about its late batches, one step at a time: a batch never started
    is cancelled and sent again (``--resubmit-after``), a lingering tail is cut short and
    finished on flex (``--tail-flex``, when given). Each is journaled before the cancel
    that acts on it."""

    def __init__(
        self,
        submitter: Submitter,
        resubmit_after: float,
        tail_flex: float | None,
        warn: Callable[[str], None],
        config: RunConfig | None = None,
        forecast: Callable[[], Forecast] | None = None,
    ) -> None:
        self.submitter, self.warn = submitter, warn
        self.resubmit_after, self.tail_flex = resubmit_after, tail_flex
        self.config, self._forecast_of = config, forecast
        self._forecast: Forecast | None = None  # read once an invocation, when first asked
        self.said_waiting: set[str] = set()  # resubmitted batches said to be waited for
        self.said_tail: set[str] = set()  # batches past --tail-flex said to run on
        # Cut batches told to stop by this invocation: a service whose cancelling batch
        # reads as running until it ends (Together's IN_PROGRESS) is not asked again and
        # again in one invocation; the next asks once more (asking again is safe).
        self.told: set[str] = set()

    def flexible(self, sub: Submission) -> bool:
        """Whether the submission's service has a flex tail: a flex tier, and counts of a
        running batch's finished lines to see the tail by (the registry says)."""
        return BY_NAME[self.submitter.providers[sub.stage].wire.name].flex_tail

    def act(self, state: RunState, now: float) -> bool:
        """One late batch dealt with (True), or none is due."""
        waited = stuck(state, now, self.resubmit_after, self.said_waiting, self.warn)
        if waited is not None:
            self._stall(waited)
            return True
        untold = next(
            (s for s in state.in_flight() if _cut_untold(s) and s.id not in self.told), None
        )
        if untold is not None:  # journaled as cut short, its cancel lost to a crash
            self._tell_stop(untold)
            return True
        if state.deadline is not None and self.config is not None:
            late = deadline.due(state, self.config, state.deadline, now, self.forecast())
            if late is not None:
                self._cut_for(late)
                return True
        if self.tail_flex is None:
            return False
        due = tail_due(state, now, self.tail_flex, self.flexible, self.said_tail, self.warn)
        if due is None:
            return False
        self._cut(*due)
        return True

    def forecast(self) -> Forecast:
        """The folder's turnaround forecast (:mod:`.turnaround`), read once."""
        if self._forecast is None:
            self._forecast = self._forecast_of() if self._forecast_of else Forecast({})
        return self._forecast

    def _cut_for(self, late: deadline.Outlook) -> None:
        """A batch that may not end by the deadline, at its latest safe moment: journaled,
        then told to stop; what it returned is kept, the rest goes on flex."""
        sub = late.sub
        batch_id = sub.batch_id or ""
        listed = late.via == "list price"
        self.submitter.record(
            Tailed(sub=sub.id, batch_id=batch_id, remaining=late.unfinished, listed=listed)
        )
        _failpoints.hit("cut")  # crash tests: journaled, not yet told to stop
        self.told.add(sub.id)
        view = self.submitter.providers[sub.stage].client.cancel(batch_id)
        if view is not None:
            self.submitter.record_batch(sub, view)
        where = (
            "on demand, at the list price (--allow-list-price)"
            if listed
            else "on the flex tier, at the batch price"
        )
        self.warn(
            f"note: batch {batch_id} ({sub.id}) has a {late.chance:.0%} chance of ending by the"
            f" deadline ({late.basis}): cancelled at its latest safe moment; what it returned"
            f" is kept, and its {late.unfinished} unfinished lines go out {where}, once the"
            " service has ended it"
        )

    def _tell_stop(self, sub: Submission) -> None:
        """The cancel a cut batch never got: sent now (asking again is safe); one that has
        ended meanwhile is seen as it is (never asked again and again)."""
        client, batch_id = self.submitter.providers[sub.stage].client, sub.batch_id or ""
        self.told.add(sub.id)
        self.submitter.record_batch(sub, client.cancel(batch_id) or client.retrieve(batch_id))

    def _stall(self, sub: Submission) -> None:
        """Tell a batch that never started to stop; its requests go out again once it has
        ended (as the lines a cancel cuts short always do)."""
        batch_id = sub.batch_id or ""
        view = self.submitter.providers[sub.stage].client.cancel(batch_id)
        self.submitter.record(Stalled(sub=sub.id, batch_id=batch_id, seconds=self.resubmit_after))
        if view is not None:
            self.submitter.record_batch(sub, view)
        self.warn(
            f"warning: batch {batch_id} ({sub.id}) has not started {self.resubmit_after:g}s"
            f" after it was created: cancelled, and its {len(sub.lines)} requests will be"
            " sent again"
        )

    def _cut(self, sub: Submission, remaining: int, ran: float) -> None:
        """Cut a batch's lingering tail short: journaled first, then told to stop; what it
        returned is kept, the rest goes out on the flex tier once it ends (as the lines a
        cancel cuts short always do, in a flex submission)."""
        batch_id = sub.batch_id or ""
        self.submitter.record(Tailed(sub=sub.id, batch_id=batch_id, remaining=remaining))
        self.told.add(sub.id)
        view = self.submitter.providers[sub.stage].client.cancel(batch_id)
        if view is not None:
            self.submitter.record_batch(sub, view)
        total = sub.view.total if sub.view is not None else len(sub.lines)
        self.warn(
            f"note: batch {batch_id} ({sub.id}) has run {ran:.0f}s (--tail-flex"
            f" {self.tail_flex:g}s) with {remaining} of its {total} lines unfinished"
            f" ({remaining / total:.0%}; the rule: {TAIL_SHARE:.0%} of its lines or one,"
            " whichever is more): cancelled; what it returned is kept, and once the"
            " service has ended it the rest goes out one call at a time on the flex tier, at"
            " the batch price"
        )
