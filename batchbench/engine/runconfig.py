"""A run's configuration (``run.json``): what it measures and where its batches live.

Written once when the run is made and never changed; resuming with settings that
define another run is refused (:func:`config_conflicts`).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from ..bench.grading import Grading, grading_of
from ..errors import ConfigError, RunStateError
from ..kinds import STAGES, ProviderName, Stage
from ..providers import legacy, resolve
from ..providers.base import Account
from ..providers.registry import BY_NAME
from .state import RunState

NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")

# Settings that define what a run measures: resuming with other values is refused.
IDENTITY_KEYS = (
    "answer_model",
    "judge_model",
    "reasoning_effort",
    "protocol_version",
    "dataset_sha256",
    "selection",
    "case_ids",
    "providers",
    "judge_passes",
    "answers_from",
    "answers_given",
)


class Selection(TypedDict):
    """Which cases of the dataset a run grades, as the options said."""

    smoke: bool
    limit: int | None
    benchmarks: list[str]


class ServiceRecord(TypedDict, total=False):
    """Where a stage's batches live, as ``run.json`` keeps it (never a key)."""

    provider: str
    base_url: str
    account: dict[str, str]  # the account variables set (absent before 0.3)


@dataclass
class RunConfig:
    name: str
    answer_model: str
    judge_model: str
    reasoning_effort: str | None
    protocol_version: str
    dataset: str
    dataset_sha256: str
    selection: Selection
    case_ids: list[str]
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: float = field(default_factory=time.time)
    # None before 0.2: both stages OpenAI's, the journal records the base URL on resume.
    services: dict[str, ServiceRecord] | None = None
    judge_passes: int = 1  # judge requests per answer; the rows keep the first
    # A judge panel's other judges (#50): the run whose answers this one judges (none of
    # its own are bought), in the same jobs folder.
    answers_from: str | None = None
    # The answers the dataset gives (HealthBench's ideal completions, #65): none bought.
    answers_given: str | None = None
    # The sealed analysis plan the run was started under (#66.7): its SHA-256 and text.
    analysis_plan: dict[str, str] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @property
    def providers(self) -> dict[Stage, ProviderName]:
        """Which provider serves each stage (what the run measures, so part of its identity)."""
        if not self.services:
            return {"answers": legacy.PROVIDER_OF_0_1, "judges": legacy.PROVIDER_OF_0_1}
        found: dict[Stage, ProviderName] = {}
        for stage in STAGES:
            name = self.services.get(stage, {}).get("provider", "")
            if name not in BY_NAME:
                raise RunStateError(f"run {self.name!r}: unknown {stage} provider {name!r}")
            found[stage] = name
        return found

    @property
    def grading(self) -> Grading:
        """The benchmark the run grades, and how (by its protocol version)."""
        return grading_of(self.protocol_version)

    @property
    def models(self) -> dict[Stage, str]:
        """Each stage's model as the user named it (what prices and rows go by)."""
        return {"answers": self.answer_model, "judges": self.judge_model}

    def model(self, stage: Stage) -> str:
        """The model id the stage's service is asked for (an alias resolved, as the
        reference resolves an answer model's: a judge's too, none of OpenAI's has one;
        the rows keep the name as given)."""
        return resolve(self.answer_model if stage == "answers" else self.judge_model)

    def base_url(self, state: RunState, stage: Stage) -> str | None:
        """Where the stage's batches live: the journal's latest word, else the config's."""
        if stage in state.services:
            return state.services[stage][1]
        return self.services[stage]["base_url"] if self.services else None

    def account(self, state: RunState, stage: Stage) -> Account | None:
        """The account the stage's batches live in: the journal's latest word, else the
        config's; None when never recorded (runs before 0.3)."""
        if stage in state.services:
            return state.services[stage][2]
        record = (self.services or {}).get(stage)
        found = None if record is None else record.get("account")
        return None if found is None else tuple(found.items())


MAX_NAME = 128


def check_name(name: str) -> str:
    if not NAME_RE.match(name) or name in (".", ".."):
        raise ConfigError(f"run name {name!r} must match [A-Za-z0-9._-]+ (and not be . or ..)")
    if len(name) > MAX_NAME:
        raise ConfigError(f"run name is {len(name)} characters long; at most {MAX_NAME}")
    return name


def panel_name(primary: str, judge_model: str) -> str:
    """The run of a judge panel's other judge: the first judge's run, and the judge."""
    return f"{primary}--{default_name(judge_model)}"


def default_name(answer_model: str, smoke: bool = False) -> str:
    """The model's name made safe; a smoke run's gets ``-smoke``, so it never holds the
    name of the full run."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", answer_model).strip("-.") or "run"
    return f"{name}-smoke" if smoke else name


def config_conflicts(old: RunConfig, new: RunConfig) -> list[str]:
    """The settings that define a run and differ, as ``field: old → new``."""
    diffs = []
    if new.analysis_plan is not None and new.analysis_plan != old.analysis_plan:
        had = (old.analysis_plan or {}).get("sha256", "none")
        diffs.append(f"analysis plan: {had} → {new.analysis_plan['sha256']} (sealed before a run")
        diffs[-1] += " starts: a run keeps the plan it started under)"
    for key in IDENTITY_KEYS:
        a, b = getattr(old, key), getattr(new, key)
        if a == b:
            continue
        if key == "providers":
            diffs += [f"{s} provider: {a[s]} → {b[s]}" for s in STAGES if a[s] != b[s]]
        elif key == "case_ids":
            diffs.append(f"selected cases: {len(a)} → {len(b)}")
        elif key == "selection":
            diffs.append(f"selection: {describe_selection(a)} → {describe_selection(b)}")
        else:
            diffs.append(f"{key}: {a} → {b}")
    return diffs


def describe_selection(selection: dict[str, Any]) -> str:
    """``{"smoke": True, "limit": 3, ...}`` → ``smoke, first 3``."""
    parts = []
    if selection.get("benchmarks"):
        parts.append("benchmarks " + ", ".join(selection["benchmarks"]))
    if selection.get("smoke"):
        parts.append("smoke")
    if selection.get("limit") is not None:
        parts.append(f"first {selection['limit']}")
    return ", ".join(parts) or "every case"
