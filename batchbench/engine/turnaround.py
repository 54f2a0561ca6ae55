"""How long a service takes to end a batch: forecast from the jobs folder's own history.

Every journal line is time-stamped, so every batch a run of the folder created and saw
end is a measured turnaround: from its create call to the first poll that saw it ended,
with its service, model, size and the hour it was created. Those are the forecast: the
batches most like the one asked about (same service, model, size band and quarter of
the day; else fewer of those alike) once there are enough of them. Until a service has
:data:`MIN_HISTORY` of them, the forecast is a prior read from what the service says of
itself (:data:`PRIORS`) — said so wherever a chance is shown.

The one question asked of it: a batch that has run ``elapsed`` seconds — what is the
chance it ends within ``left`` more? (``P(T <= elapsed + left | T > elapsed)``.) A batch
already older than every one seen is asked of the prior's heavy tail instead: history
that has never seen so long a wait says nothing of it.
"""

from __future__ import annotations

import bisect
import contextlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import BatchbenchError
from .rundir import list_runs

MIN_HISTORY = 10  # ended batches before a service's own history is the forecast
HOUR = 3600.0


@dataclass(frozen=True)
class Prior:
    """A service's turnaround before there is history: p50, p90, p99 in seconds, and the
    statement it was read from. Between them the forecast is log-linear; past p99 the
    tail runs to 4x p99 (a batch may wait past its window, and be expired)."""

    p50: float
    p90: float
    p99: float
    source: str

    def cdf(self, seconds: float) -> float:
        points = [(self.p50 / 10, 0.0), (self.p50, 0.5), (self.p90, 0.9), (self.p99, 0.99)]
        points.append((4 * self.p99, 1.0))
        if seconds <= points[0][0]:
            return 0.0
        for (x0, u0), (x1, u1) in zip(points, points[1:]):
            if seconds <= x1:
                return u0 + (u1 - u0) * math.log(seconds / x0) / math.log(x1 / x0)
        return 1.0


PRIORS: dict[str, Prior] = {
    "openai": Prior(
        1 * HOUR,
        6 * HOUR,
        24 * HOUR,
        "OpenAI's Batch FAQ: a 24-hour window, batches 'often' done sooner",
    ),
    "anthropic": Prior(
        0.5 * HOUR,
        2 * HOUR,
        24 * HOUR,
        "Anthropic's batch guide: 'most batches completing within 1 hour', 24 h at most",
    ),
    "gemini": Prior(
        1 * HOUR,
        12 * HOUR,
        24 * HOUR,
        "Gemini's batch mode: a 24-hour target, 'in the majority of cases' much sooner",
    ),
}
DEFAULT_PRIOR = Prior(
    2 * HOUR, 12 * HOUR, 24 * HOUR, "no statement in our sources: a 24-hour window assumed"
)


@dataclass(frozen=True)
class Turnaround:
    """One batch the folder saw end: how long it took, and what it was."""

    service: str
    model: str
    lines: int
    hour: int  # UTC hour of its create call
    seconds: float


def history(jobs_dir: Path) -> list[Turnaround]:
    """Every ended batch of every run in the folder, as it ran: one cut short by the run
    (a tail sent on flex, a batch never started sent again) or cancelled is no
    turnaround. A run that does not read is passed over: it only adds history."""
    found: list[Turnaround] = []
    for run in list_runs(jobs_dir):
        with contextlib.suppress(BatchbenchError, OSError, ValueError):
            config = run.load_config()
            state = run.state(config.case_ids)
            for sub in state.subs.values():
                start, end = sub.create_started, sub.ended_at
                cut = sub.flex or sub.listed or sub.tailed or sub.stalled
                if start is None or end is None or cut:
                    continue
                if sub.view is None or sub.view.ending not in (None, "completed"):
                    continue
                hour = datetime.fromtimestamp(start, timezone.utc).hour  # 0..23
                service = config.providers[sub.stage]
                model = config.model(sub.stage)
                found.append(Turnaround(service, model, len(sub.lines), hour, end - start))
    return found


Key = tuple[str, str, int, int]  # service, model ("": any), size band, hour band (-1: any)


def size_band(lines: int) -> int:
    """Batches of like size: 1, 2–3, 4–7, 8–15 … lines (powers of two)."""
    return max(lines, 1).bit_length()


def hour_band(when: float) -> int:
    """The quarter of the UTC day a batch was created in (a service's load moves with it)."""
    return datetime.fromtimestamp(when, timezone.utc).hour // 6


def _keys(service: str, model: str, lines: int, hour: int) -> list[tuple[Key, str]]:
    """Most specific first, each with its words: a batch's own kind before the service's."""
    size = size_band(lines)
    return [
        ((service, model, size, hour), "its service, model, size and time of day"),
        ((service, model, size, -1), "its service, model and size"),
        ((service, model, 0, -1), "its service and model"),
        ((service, "", 0, -1), "its service"),
    ]


@dataclass(frozen=True)
class Forecast:
    """Turnarounds (sorted) by service, model, size and time of day, with the priors."""

    seen: dict[Key, list[float]]

    @classmethod
    def of(cls, turns: Iterable[Turnaround]) -> Forecast:
        seen: dict[Key, list[float]] = {}
        for t in turns:
            for key, _ in _keys(t.service, t.model, t.lines, t.hour // 6):
                seen.setdefault(key, []).append(t.seconds)
        return cls({k: sorted(v) for k, v in seen.items()})

    @classmethod
    def of_folder(cls, jobs_dir: Path) -> Forecast:
        return cls.of(history(jobs_dir))

    def _samples(
        self, service: str, model: str, lines: int, hour: int
    ) -> tuple[Sequence[float], str] | None:
        for key, said in _keys(service, model, lines, hour):
            samples = self.seen.get(key, [])
            if len(samples) >= MIN_HISTORY:
                return samples, said
        return None

    def basis(self, service: str, model: str, lines: int = 0, hour: int = -1) -> str:
        """What a chance for such a batch rests on, in words."""
        found = self._samples(service, model, lines, hour)
        if found is not None:
            return f"history: {len(found[0])} batches of this folder like it ({found[1]})"
        prior = PRIORS.get(service, DEFAULT_PRIOR)
        return f"prior ({prior.source}) until {MIN_HISTORY} batches have ended here"

    def chance(
        self, service: str, model: str, elapsed: float, left: float, lines: int = 0, hour: int = -1
    ) -> float:
        """The chance a batch (of ``lines``, created in ``hour`` band) that has run
        ``elapsed`` seconds ends within ``left`` more."""
        if left <= 0:
            return 0.0
        found = self._samples(service, model, lines, hour)
        if found is not None:
            samples, n = found[0], len(found[0])
            older = n - bisect.bisect_right(samples, elapsed)
            if older > 0:
                within = bisect.bisect_right(samples, elapsed + left) - (n - older)
                return within / older
        prior = PRIORS.get(service, DEFAULT_PRIOR)
        before = prior.cdf(elapsed)
        if before >= 1.0:
            return 0.0
        return (prior.cdf(elapsed + left) - before) / (1.0 - before)
