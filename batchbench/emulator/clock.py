"""The emulated services' clock: real time by default, or a fake one that tests move.

Every batch's progress is a function of the clock (a line runs ``latency``
seconds into its batch, a window ends after ``completion_window``), read when a
call arrives. With :class:`FakeClock`, time moves only when someone sleeps on
it: a client under test that shares the clock makes a 24-hour expiry, a job
stuck for 12 hours or an hour of polling happen in milliseconds, and always in
the order the client's own calls give.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    """What reads and waits on time: seconds since the epoch."""

    def time(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def jitter(self) -> float:
        """A number in [0, 1) to spread a wait by: random in real life, seeded when fake."""
        ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def jitter(self) -> float:
        return random.random()


class FakeClock:
    """Time that moves only by :meth:`sleep` or :meth:`advance`, never by itself.

    Share one with the code under test (batchbench takes a clock too): each of
    its waits moves this time forward at once, and the emulator's batches are
    where that time puts them.
    """

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self.slept = 0.0  # how much time the sleepers skipped, in all
        self._due: list[tuple[float, Callable[[], None]]] = []
        self._random = random.Random(0)  # the waits' jitter: the same every run

    def time(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))

    def jitter(self) -> float:
        with self._lock:
            return self._random.random()

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds
            self.slept += seconds
        self._run_due()

    def set(self, when: float) -> None:
        """Jump to a moment (never backwards)."""
        with self._lock:
            self._now = max(self._now, when)
        self._run_due()

    def call_at(self, when: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` as soon as the clock reaches ``when`` (in the thread that moves it):
        what happens "an hour later" happens exactly then, never by racing real time."""
        with self._lock:
            self._due.append((when, fn))
        self._run_due()

    def _run_due(self) -> None:
        with self._lock:
            due = [d for d in self._due if d[0] <= self._now]
            self._due = [d for d in self._due if d[0] > self._now]
        for _, fn in sorted(due, key=lambda d: d[0]):
            fn()
