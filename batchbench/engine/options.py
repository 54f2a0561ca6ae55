"""A run's options as the user gave them, and each option's own rule.

Every check here runs before anything is read, written or called, so bad input
never leaves a half-made run behind.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..clock import SYSTEM, Clock
from ..errors import ConfigError, InvariantError
from ..kinds import ProviderName
from ..providers import PROVIDERS, check_base_url, wire
from .runconfig import check_name
from .settings import Settings
from .spend import Scope


@dataclass(frozen=True)
class Cases:
    """Which cases: the dataset, and --smoke, --limit, --benchmark (the run's
    ``selection`` in run.json, with the dataset beside it)."""

    dataset: Path
    smoke: bool = False
    limit: int | None = None
    benchmarks: tuple[str, ...] = ()
    dataset_format: str | None = None  # --dataset-format; None: what the dataset is


@dataclass(frozen=True)
class Services:
    """Where the stages' batches live: OpenAI's --base-url (judges, OpenAI answer models),
    services and keys given in code (the demo), account settings given as options in
    front of the environment's (--s3-uri, --gcs-uri…), and --move-service."""

    base_url: str | None = None
    base_urls: Mapping[ProviderName, str] | None = None
    credentials: Mapping[ProviderName, str] | None = None
    account_settings: Mapping[str, str] | None = None
    move: bool = False  # resume against a base URL other than the run's


@dataclass(frozen=True)
class Budget:
    """What a run may cost: the price table, the cap, the answers' assumed length."""

    pricing: Path | None = None
    max_cost: float | None = None
    assumed_answer_tokens: int = 800
    max_spend: float | None = None  # a hard cap on what is billed (:mod:`.spend`)
    max_spend_over: Scope = "run"  # the runs it holds together: one, the group, the folder


@dataclass
class RunOptions:
    """A run's options as the user gave them, grouped as run.json and the journal hold
    them: the models, which cases, where the services are, the budget, and the pacing
    (:class:`.pipeline.Settings`)."""

    answer_model: str
    judge_model: str
    cases: Cases
    run: str | None = None
    jobs_dir: Path = Path("jobs")
    reasoning_effort: str | None = None
    judge_passes: int = 1  # judge requests per answer (judge noise); the rows keep the first
    services: Services = field(default_factory=Services)
    budget: Budget = field(default_factory=Budget)
    settings: Settings = field(default_factory=Settings)
    no_wait: bool = False
    # Redo the cases whose call's outcome was unknown (they may have been billed already).
    resend_unknown: bool = False
    # Settle the batches whose results the service owes: keep what arrived, send the rest.
    settle_owed: bool = False
    # Take a cancelled run up again (else it stays cancelled, whatever command runs it).
    resume_cancelled: bool = False
    answers_from: str | None = None  # a judge panel's other judge: the first's run (#50)
    answers_given: bool = False  # --physician-completions: the dataset's ideal completions
    analysis_plan: dict[str, str] | None = None  # --plan: the sealed plan's hash and text
    clock: Clock = SYSTEM  # what the run reads and waits on (tests: the emulator's fake one)

    def check(self) -> RunOptions:
        """Every option's own rule, before anything is read, written or called."""
        _check_options(self)
        return self


@dataclass(frozen=True)
class GroupOptions:
    """What the runs of one command share: one price table, one cost cap over them all,
    one set of keys, one loop (its clock, poll interval and outage bound), one wait."""

    pricing: Path | None
    max_cost: float | None
    credentials: Mapping[ProviderName, str] | None
    no_wait: bool
    poll_interval: float
    outage_seconds: float
    clock: Clock

    @classmethod
    def of(cls, group: list[RunOptions]) -> GroupOptions:
        """The shared options of a group, which its runs must agree on (the CLI makes
        them from one set of flags)."""
        each = {
            cls(
                o.budget.pricing,
                o.budget.max_cost,
                None if o.services.credentials is None else _Frozen(o.services.credentials),
                o.no_wait,
                o.settings.poll_interval,
                o.settings.outage_seconds,
                o.clock,
            )
            for o in group
        }
        if len(each) != 1:
            raise InvariantError("the runs of one command were given different shared options")
        return each.pop()


class _Frozen(dict[ProviderName, str]):
    """Keys given in code, hashable so that a group's shared options compare."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))


# A few passes measure a judge's noise; more only multiply the judges' bill (and a dry
# run's requests held in memory).
MAX_JUDGE_PASSES = 20
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def _number(option: str, value: float | None, *, low: float, strict: bool = False) -> None:
    """A finite number at or above ``low`` (above it when ``strict``); NaN and inf refused."""
    if value is None:
        return
    if not math.isfinite(value):
        raise ConfigError(f"{option} must be a finite number, got {value}")
    if value < low or (strict and value == low):
        bound = f"greater than {low:g}" if strict else f"at least {low:g}"
        raise ConfigError(f"{option} must be {bound}, got {value}")


def check_model_name(flag: str, model: str) -> None:
    """A model flag that names a model: not empty, not a routing prefix alone."""
    if not model.strip() or model.endswith("/"):  # `azure/` made a run folder `azure`
        raise ConfigError(
            f"{flag} {model!r} names no model"
            + (f" after {model!r} (e.g. {model}MODEL)" if model.strip() else "")
        )


def _check_options(o: RunOptions) -> None:
    s = o.settings
    for flag, model in (("--answer-model", o.answer_model), ("--judge-model", o.judge_model)):
        check_model_name(flag, model)
    _number("--poll-interval", s.poll_interval, low=0, strict=True)
    _number("--token-limit-wait", s.hold_seconds, low=0)
    _number("--resubmit-after", s.resubmit_after, low=0, strict=True)
    _number("--tail-flex", s.tail_flex, low=0, strict=True)
    _number("--create-wait", s.create_wait, low=0)
    _number("--max-cost", o.budget.max_cost, low=0)
    _number("--max-spend", o.budget.max_spend, low=0)
    _number("--max-attempts", s.max_attempts, low=1)
    _number("--max-retries", s.max_retries, low=1)
    _number("--max-enqueued-tokens", s.max_enqueued_tokens, low=1)
    _number("--assumed-answer-tokens", o.budget.assumed_answer_tokens, low=1)
    _number("--judge-passes", o.judge_passes, low=1)
    if o.judge_passes > MAX_JUDGE_PASSES:  # each pass pays a judge request per answer
        raise ConfigError(
            f"--judge-passes must be at most {MAX_JUDGE_PASSES}, got {o.judge_passes}"
            " (each pass is a paid judge request per answer)"
        )
    if s.max_requests_per_batch < 1:
        raise ConfigError("--max-requests-per-batch must be at least 1")
    if o.reasoning_effort is not None and o.reasoning_effort not in REASONING_EFFORTS:
        highest = ", ".join(f"{wire(p.name).effort('max')} for {p.label}" for p in PROVIDERS)
        raise ConfigError(
            f"--reasoning-effort {o.reasoning_effort!r} is not one of"
            f" {', '.join(REASONING_EFFORTS)} (max is each service's highest: {highest})"
        )
    if o.run is not None:
        check_name(o.run)
    if o.services.base_url is not None:
        check_base_url(o.services.base_url)
