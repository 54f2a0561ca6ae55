"""Where a model offered by several services answers, when the user allows it (``run
--place-among``): Claude on Anthropic, Bedrock or Vertex AI; gpt-oss on Groq, Together,
Fireworks or Bedrock.

At the run's start each candidate is looked at as its answers would go: its batch's
chance of ending by the deadline with its judges' time still kept back (the jobs
folder's own turnaround forecast, :mod:`.engine.turnaround`, the rule the deadline
itself keeps), and its price (the dry run's estimate at that venue's batch price).
The cheapest with at least the deadline's target chance is chosen, else the likeliest.
The choice is the run's answer model, kept in its ``run.json``: a later invocation of
the same command (a cron tick) finds it there and never places again — a run's
answers are never split between services, nor moved once bought.

batchbench cannot tell that two names are one model: the user names them, and the run
records the one its answers came from (its rows, provenance and summary say so).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import providers
from .engine.deadline import TARGET, fallback_seconds
from .engine.options import check_model_name
from .engine.runconfig import default_name
from .engine.rundir import Run
from .engine.turnaround import Forecast, hour_band
from .errors import ConfigError
from .formats import usd as dollars
from .launch import RunOptions, dry_run


@dataclass(frozen=True)
class Seen:
    """One candidate, looked at for this run's answers."""

    model: str
    service: str
    chance: float  # that its answers batch ends by the deadline, judges' time kept back
    usd: float | None  # the answers at its batch price (None: no price for it)
    basis: str  # what the chance rests on

    def text(self) -> str:
        price = "no price" if self.usd is None else dollars(self.usd)
        return f"{self.model} ({self.service}): {self.chance:.0%}, {price} [{self.basis}]"


def choose(seen: Sequence[Seen]) -> Seen:
    """The cheapest of those with at least :data:`TARGET` chance (a price known before an
    unknown one; the first named wins a tie); when none has it, the likeliest (then the
    cheapest)."""
    sure = [s for s in seen if s.chance >= TARGET]
    if sure:
        return min(sure, key=lambda s: math.inf if s.usd is None else s.usd)
    return max(seen, key=lambda s: (s.chance, -(math.inf if s.usd is None else s.usd)))


def look(options: RunOptions, model: str, forecast: Forecast, now: float) -> Seen:
    """A candidate's chance and price for this run's answers: its dry run's answers (a
    batch of as many requests as its files hold at most) and the judge requests each
    answer brings, whose time is kept back from the deadline."""
    deadline = options.settings.deadline or now
    planned = dry_run(dataclasses.replace(options, answer_model=model))["stages"]
    answers, judges = planned["answers"], planned["judges"]
    lines = math.ceil(answers["requests"] / max(answers["files"], 1))
    each = judges["requests"] / max(answers["requests"], 1)
    left = deadline - now - fallback_seconds(math.ceil(lines * each))
    service, asked = providers.route(model), providers.resolve(model)
    like = (lines, hour_band(now))
    chance = forecast.chance(service, asked, 0.0, left, *like)
    basis = forecast.basis(service, asked, *like)
    return Seen(model, service, chance, answers["batch_usd"], basis)


def placed(
    options: RunOptions,
    models: Sequence[str],
    among: Sequence[str],
    smoke: bool,
    say: Callable[[str], None],
) -> tuple[str, str]:
    """The model the run's answers go to and the run's name (the first model's, or the
    one given, wherever its answers go): the one its run.json holds when the run exists,
    else the one :func:`choose` picks."""
    if options.settings.deadline is None:
        raise ConfigError("--place-among goes with --deadline (the time a place must meet)")
    if len(models) > 1:
        raise ConfigError("--place-among goes with one --answer-model (the one it places)")
    first = options.answer_model
    candidates = list(dict.fromkeys([first, *among]))
    for model in candidates:
        check_model_name("--place-among", model)
    name = options.run or default_name(first, smoke)
    run = Run(options.jobs_dir / name)
    if run.exists():
        held = run.load_config().answer_model
        if held not in candidates:
            raise ConfigError(
                f"run {name!r} holds the answers of {held!r}, none of {', '.join(candidates)}:"
                " name it among them, or give another --run name"
            )
        return held, name
    now = options.clock.time()
    forecast = Forecast.of_folder(options.jobs_dir)
    seen = [look(options, model, forecast, now) for model in candidates]
    chosen = choose(seen)
    said = "; ".join(s.text() for s in seen)
    rule = (
        f"the cheapest with a {TARGET:.0%} chance"
        if chosen.chance >= TARGET
        else (f"none has a {TARGET:.0%} chance: the likeliest")
    )
    say(f"placed: {name!r} answers on {chosen.model} ({rule} of ending by the deadline): {said}")
    return chosen.model, name
