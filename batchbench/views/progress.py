"""Progress while runs advance: on stderr, from the journal and the batches' own counts.

On a terminal, ``rich`` keeps one live line per run (its name, answers and
judges done/failed/total, the time so far and an ETA), redrawn in place and
finished cleanly before the results are printed; lines the run says meanwhile
(warnings, NEW/RESUMING) scroll above it. In a log (cron) a heartbeat line per
run comes when something changed, at most every few minutes, with an ETA taken
from how fast the batches in flight have been getting through their lines.
"""

from __future__ import annotations

import shutil
import sys
from typing import TYPE_CHECKING, TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from ..clock import SYSTEM, Clock
from ..engine.state import RunState
from ..formats import duration
from ..kinds import STAGES

if TYPE_CHECKING:
    from ..engine.pipeline import Pipeline

WIDTH = 100
HEARTBEAT = 60.0  # seconds between lines in a log (when something changed)
SETTLED = 0.1  # a batch's pace tells its end once this share of its lines is done


def eta(state: RunState, now: float) -> float | None:
    """Seconds until the slowest batch in flight is through its lines, at its pace so far
    (None while one is being cancelled: the service ends a cancel when it will)."""
    if any(s.view is not None and s.view.phase == "cancelling" for s in state.in_flight()):
        return None
    waits = []
    for sub in state.in_flight():
        if sub.view is None:
            continue
        total, done = sub.view.total, sub.view.done
        since = now - (sub.create_started or sub.planned_at)
        if not total or since <= 0 or done >= total:
            continue
        if done < max(1, SETTLED * total):
            return None  # a pace from its first few lines (queue time in it) says nothing
        waits.append((total - done) * since / done)
    return max(waits) if waits else None


def progress_line(state: RunState, now: float, done: bool = False, width: int = WIDTH) -> str:
    """``answers 120/250 (+30/40 running) · judges 80/250 · 3 failed · 5m12s · ETA 4m10s``
    (a finished run's time is from its start to its last collection, not to now), in
    ``width`` columns: the running details go first, the ETA stays."""
    full = _line(state, now, done, details=True)
    if len(full) <= width:
        return full
    short = _line(state, now, done, details=False)
    if len(short) <= width:
        return short
    head, eta_part = (short.rsplit(" · ETA ", 1) + [""])[:2]
    tail = f" · ETA {eta_part}" if eta_part else ""
    room = max(1, width - len(tail) - 1)
    return (head[:room] + "…" + tail)[:width] if len(head) > room else head + tail


def _line(state: RunState, now: float, done: bool, details: bool) -> str:
    parts = []
    for stage in STAGES:
        progress = state.progress(stage)
        views = [s.view for s in state.in_flight() if s.stage == stage and s.view is not None]
        cancelling = sum(1 for v in views if v.phase == "cancelling")
        views = [v for v in views if v.phase != "cancelling"]
        running = [v for v in views if v.processing is None]
        lines = sum(v.done for v in running)
        size = sum(v.total for v in running)
        extra = f" (+{lines}/{size} running)" if size and details else ""
        # A service that reports only what is not yet done (Anthropic, until the end).
        processing = sum(v.processing or 0 for v in views if v.processing is not None)
        extra += f" ({processing} processing)" if processing and details else ""
        extra += f" ({cancelling} cancelling)" if cancelling and details else ""
        parts.append(f"{stage} {progress.done}/{progress.total}{extra}")
    failed = sum(1 for c in state.cases.values() if c.final == "error")
    if failed:
        parts.append(f"{failed} failed")
    end = state.ended if done and state.ended is not None else now
    parts.append(duration(end - state.started) if state.started else "0s")
    left = eta(state, now)
    if left is not None:
        parts.append(f"ETA {duration(left)}")
    return " · ".join(parts)


class Progress:
    """Shows :func:`progress_line` per run as they advance (called after every step).

    Use it as a context manager, so a terminal's live lines are finished (left
    showing the final state) before anything else is printed.
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        clock: Clock = SYSTEM,
        tty: bool | None = None,
        runs: int = 1,
    ) -> None:
        self.stream = stream or sys.stderr
        self.clock = clock
        self.tty = self.stream.isatty() if tty is None else tty
        self.lines: dict[str, str] = {}  # run → its line now
        self.said: dict[str, tuple[str, float]] = {}  # run → (what changed, when) in a log
        self._live: Live | None = None
        self._drawn = float("-inf")
        self.runs = runs  # how many runs advance together (a log names each when several)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Leave the final state on screen and stop redrawing."""
        if self._live is not None:
            self._live.update(self._render(), refresh=True)
            self._live.stop()
            self._live = None

    def __call__(self, pipeline: Pipeline) -> None:
        now = self.clock.time()
        name = pipeline.config.name
        # A terminal's line fits its width beside the names; a log's is whole.
        names = max(len(n) for n in [*self.lines, name]) + 2
        width = shutil.get_terminal_size((WIDTH, 24)).columns - names if self.tty else 10**4
        line = progress_line(pipeline.state, now, pipeline.done(), max(20, width))
        self.lines[name] = line
        if self.tty:
            self._draw(now, pipeline.done())
        else:
            self._heartbeat(name, line, now, pipeline.done())

    def warn(self, text: str) -> None:
        """A warning, on its own line: above the live lines on a terminal (never glued
        onto them), as is in a log."""
        if self._live is not None:
            self._live.console.print(Text(text))
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def _render(self) -> Text:
        width = max(len(n) for n in self.lines)
        return Text("\n".join(f"{n:<{width}}  {line}" for n, line in self.lines.items()))

    def _draw(self, now: float, done: bool) -> None:
        if self._live is None:
            console = Console(file=self.stream, force_terminal=True, soft_wrap=True)
            self._live = Live(console=console, auto_refresh=False, transient=False)
            self._live.start()
        if done or now - self._drawn >= 0.25:
            self._live.update(self._render(), refresh=True)
            self._drawn = now

    def _heartbeat(self, name: str, line: str, now: float, done: bool) -> None:
        body = line.split(" · ETA")[0].rsplit(" · ", 1)[0]  # what changed, not the clock
        last, at = self.said.get(name, ("", float("-inf")))
        if body != last and (now - at >= HEARTBEAT or done):
            prefix = f"{name}: " if max(len(self.lines), self.runs) > 1 else ""
            self.stream.write(f"{prefix}{line}\n")
            self.stream.flush()
            self.said[name] = (body, now)
