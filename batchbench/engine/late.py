"""Batches that are late, and what the run does about them: one that never started is
sent again (``--resubmit-after``), one whose last few lines linger finishes them on the
flex tier (``--tail-flex``). Each rule is written here once; ``run --help`` quotes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..providers.base import BatchView
from .state import RunState
from .submission import Submission

# The flex tail's rule: a batch running longer than --tail-flex seconds whose unfinished
# lines are at most this share of it (at least one, at most TAIL_MOST) is cut short.
TAIL_SHARE = 0.05
TAIL_MOST = 500
TAIL_RULE = f"at most {TAIL_SHARE:.0%} of its lines (and no more than {TAIL_MOST}) still unfinished"


def small_tail(view: BatchView) -> int:
    """How many of a running batch's lines are unfinished, when few enough for the flex
    tail (0 otherwise, or when the service says nothing of its progress)."""
    if view.phase != "running" or view.total <= 0 or view.awaiting:
        return 0
    remaining = view.total - view.done
    most = min(TAIL_MOST, max(1, math.floor(view.total * TAIL_SHARE)))
    return remaining if 0 < remaining <= most else 0


def tail_due(
    state: RunState, now: float, after: float, flexible: Callable[[Submission], bool]
) -> tuple[Submission, int] | None:
    """A batch of a service with a flex tier that has run ``after`` seconds with a small
    tail (:func:`small_tail`) left, and how many lines: once per batch, never a flex one."""
    if state.cancelled:
        return None
    for sub in state.in_flight():
        if sub.view is None or sub.tailed or sub.flex or not flexible(sub):
            continue
        if now - (sub.create_started or sub.planned_at) < after:
            continue
        remaining = small_tail(sub.view)
        if remaining:
            return sub, remaining
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
