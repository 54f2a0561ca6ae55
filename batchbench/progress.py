"""Progress while a run advances: on stderr, from the journal and the batches' own counts.

On a terminal one line is rewritten in place; in a log (cron) a heartbeat line
comes when something changed, at most every few minutes, with an ETA taken
from how fast the batches in flight have been getting through their lines.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from .kinds import STAGES
from .state import RunState

if TYPE_CHECKING:
    from .pipeline import Pipeline

WIDTH = 100
HEARTBEAT = 180.0  # seconds between lines in a log


def _duration(seconds: float) -> str:
    seconds = int(max(0, seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def eta(state: RunState, now: float) -> float | None:
    """Seconds until the slowest batch in flight is through its lines, at its pace so far."""
    waits = []
    for sub in state.in_flight():
        if sub.view is None:
            continue
        total, done = sub.view.total, sub.view.completed + sub.view.failed
        since = now - (sub.create_started or sub.planned_at)
        if total and done and since > 0:
            waits.append((total - done) * since / done)
    return max(waits) if waits else None


def progress_line(state: RunState, now: float) -> str:
    """``answers 120/250 (+30/40 running) · judges 80/250 · 3 failed · 5m12s · ETA 4m10s``."""
    parts = []
    for stage in STAGES:
        progress = state.progress(stage)
        running = [s.view for s in state.in_flight() if s.stage == stage and s.view is not None]
        lines = sum(v.completed + v.failed for v in running)
        size = sum(v.total for v in running)
        extra = f" (+{lines}/{size} running)" if size else ""
        parts.append(f"{stage} {progress.done}/{progress.total}{extra}")
    failed = sum(1 for c in state.cases.values() if c.final == "error")
    if failed:
        parts.append(f"{failed} failed")
    parts.append(_duration(now - state.started) if state.started else "0s")
    left = eta(state, now)
    if left is not None:
        parts.append(f"ETA {_duration(left)}")
    return " · ".join(parts)[:WIDTH]


class Progress:
    """Shows :func:`progress_line` as the run advances (called after every step)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.time,
        tty: bool | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.clock = clock
        self.tty = self.stream.isatty() if tty is None else tty
        self.last = ""
        self.last_at = float("-inf")

    def __call__(self, pipeline: Pipeline) -> None:
        now = self.clock()
        line = progress_line(pipeline.state, now)
        body = line.split(" · ETA")[0].rsplit(" · ", 1)[0]  # what changed, not the clock
        done = pipeline.done()
        if self.tty:
            if body != self.last and (now - self.last_at >= 1.0 or done):
                self.stream.write("\r" + line.ljust(WIDTH)[:WIDTH] + ("\n" if done else ""))
                self.stream.flush()
                self.last, self.last_at = body, now
        elif (body != self.last and now - self.last_at >= HEARTBEAT) or (
            done and body != self.last
        ):
            self.stream.write(line + "\n")
            self.stream.flush()
            self.last, self.last_at = body, now
