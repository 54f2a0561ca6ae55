"""A run finished by a time (``run --deadline``), as cheaply as possible.

Every batch waits as long as it safely can, because the batch is the cheapest way: each
tick, each batch in flight is asked of the forecast (:mod:`.turnaround`) what chance it
has of ending by the deadline. One whose chance is under :data:`TARGET` is cut short at
its *latest safe moment* — the deadline less the time its unfinished lines take on the
fallback (a cancel ending, then one flex call after another, with :data:`SAFETY`
to spare): journaled first, then cancelled; what it returned is kept (a cancelled
batch's results are used, never bought again), and the rest goes out on the service's
flex tier, at the batch price. A service with no flex tier has no fallback here: its
batches are shown with their chance, and the run says the deadline may be missed.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, TypedDict

from ..errors import ConfigError
from ..providers.registry import BY_NAME
from .runconfig import RunConfig
from .state import RunState
from .submission import Submission
from .turnaround import Forecast, hour_band

TARGET = 0.99  # the chance a batch must have of ending in time to be waited for
CANCEL_SECONDS = 600.0  # a cancel ends a batch within ten minutes (OpenAI's "cancelling")
CALL_SECONDS = 10.0  # one flex call, a prior ("slower response times" than standard)
SAFETY = 1.5  # the fallback's time, with half again to spare

_RELATIVE = re.compile(r"^\+(\d+(?:\.\d+)?)([mhd])$")


def parse_deadline(text: str, now: float) -> float:
    """``2026-12-08T09:00`` (local time unless it names its zone) or ``+14h``, ``+90m``,
    ``+2d`` from now → seconds since the epoch; one line when it is neither or past."""
    found = _RELATIVE.match(text.strip())
    if found:
        at = now + float(found.group(1)) * {"m": 60, "h": 3600, "d": 86400}[found.group(2)]
    else:
        try:
            at = datetime.fromisoformat(text.strip()).astimezone().timestamp()
        except ValueError:
            raise ConfigError(
                f"--deadline {text!r}: a time (2026-12-08T09:00) or a span from now (+14h)"
            ) from None
    if at <= now:
        raise ConfigError(f"--deadline {text!r} has passed")
    return at


def stamp(at: float) -> str:
    """A deadline as people read it: ``2026-12-08 09:00 UTC``."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def fallback_seconds(lines: int) -> float:
    """How long a batch's unfinished lines take on the fallback, with time to spare."""
    return SAFETY * (CANCEL_SECONDS + lines * CALL_SECONDS)


Via = Literal["flex", "list price"]


def fallback(service: str, allow_list_price: bool) -> Via | None:
    """Where a batch of the service cut short goes: its flex tier, at the batch price;
    else, where the user allows it and the service has them, calls at the list price."""
    spec = BY_NAME[service]
    if spec.flex:
        return "flex"
    return "list price" if allow_list_price and spec.on_demand else None


@dataclass(frozen=True)
class Outlook:
    """A batch in flight against the deadline."""

    sub: Submission
    service: str
    unfinished: int
    chance: float  # of ending by the deadline, waited for
    basis: str  # what the chance rests on
    fallback_at: float | None  # its latest safe moment (None: no fallback on its service)
    via: Via | None = None  # where its unfinished lines go then

    def text(self) -> str:
        sub = self.sub
        said = f"{sub.id} ({self.service}): {self.chance:.0%} chance of ending by the deadline"
        where = "on flex, at the batch price" if self.via == "flex" else "at the list price"
        if sub.tailed:
            return f"{sub.id} ({self.service}): cut short; its unfinished lines go {where}"
        if self.fallback_at is None:
            allow = BY_NAME[self.service].on_demand  # would it take calls at list price?
            hint = " (--allow-list-price: on demand, at the list price)" if allow else ""
            return f"{said}; no fallback: {self.service} has no flex tier{hint} [{self.basis}]"
        if self.chance >= TARGET:
            return f"{said}; waited for [{self.basis}]"
        return (
            f"{said}; its {self.unfinished} unfinished lines go {where},"
            f" at {stamp(self.fallback_at)} unless it ends first [{self.basis}]"
        )


def outlook(
    state: RunState, config: RunConfig, deadline: float, now: float, forecast: Forecast
) -> list[Outlook]:
    """Each batch still running (not itself on flex or on demand), its chance and its
    fallback."""
    found = []
    for sub in state.in_flight():
        view = sub.view
        if sub.flex or sub.listed or sub.batch_id is None or sub.terminal:
            continue
        if view is not None and (view.phase == "cancelling" or view.awaiting):
            continue  # told to stop already, or ended with its results on the way
        service, model = config.providers[sub.stage], config.model(sub.stage)
        unfinished = len(sub.lines) if view is None or not view.total else view.total - view.done
        begun = sub.create_started or sub.planned_at
        like = (len(sub.lines), hour_band(begun))  # its size and time of day
        chance = forecast.chance(service, model, now - begun, deadline - now, *like)
        via = fallback(service, state.allow_list_price)
        # an answer still has its judge requests to come (one a pass, or a HealthBench
        # rubric's items): their fallback is kept back too
        each = state.judge_requests * config.judge_passes
        later = math.ceil(len(sub.lines) * each) if sub.stage == "answers" else 0
        reserve = fallback_seconds(later) if later else 0.0
        at = deadline - fallback_seconds(unfinished) - reserve if via is not None else None
        basis = forecast.basis(service, model, *like)
        found.append(Outlook(sub, service, unfinished, chance, basis, at, via))
    return found


def due(
    state: RunState, config: RunConfig, deadline: float, now: float, forecast: Forecast
) -> Outlook | None:
    """A batch whose latest safe moment has come with too small a chance: to cut now."""
    if state.cancelled:
        return None
    for seen in outlook(state, config, deadline, now, forecast):
        if seen.sub.tailed or seen.fallback_at is None or seen.unfinished <= 0:
            continue
        if seen.chance < TARGET and now >= seen.fallback_at:
            return seen
    return None


class DeadlineRecord(TypedDict):
    """What ``status`` shows of a run with a deadline."""

    at: str  # ``2026-12-08 09:00 UTC``
    seconds_left: float
    chances: dict[str, float]  # submission → its chance of ending in time
    batches: list[str]  # each batch in flight, in words (:meth:`Outlook.text`)


def record(state: RunState, config: RunConfig, jobs_dir: Path, now: float) -> DeadlineRecord:
    """The deadline and each batch in flight against it, forecast from the folder."""
    at = state.deadline or now
    seen = outlook(state, config, at, now, Forecast.of_folder(jobs_dir))
    return DeadlineRecord(
        at=stamp(at),
        seconds_left=max(at - now, 0.0),
        chances={o.sub.id: round(o.chance, 4) for o in seen},
        batches=[o.text() for o in seen],
    )
