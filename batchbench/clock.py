"""The one clock the engine reads and waits on: real time unless one is given.

Every wait (between polls, before a retry, after a token-limit failure) and every
timestamp (the journal's, the rows', a status's age) goes through a :class:`Clock`
passed in, so a test can hand the engine and the emulator the same fake clock
(``batchbench.emulator.FakeClock``) and run a day of batch time in milliseconds.
"""

from __future__ import annotations

import random
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch."""
        ...

    def sleep(self, seconds: float) -> None: ...

    def jitter(self) -> float:
        """A number in [0, 1) to spread a wait by (retries' backoff): random in real life,
        seeded on a test's clock so that a run's waits are the same every time."""
        ...


class SystemClock:
    """Real time."""

    def time(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def jitter(self) -> float:
        return random.random()


SYSTEM: Clock = SystemClock()
