"""The runs one command makes: a run per answer model, and for each a judge panel's
other judges (the first judge's answers, judged again) — named as a group's members
are, so that a command given again finds the same runs (never a new, paid run beside
them). ``run`` and ``demo`` both line up their runs here."""

from __future__ import annotations

import dataclasses
import glob
from collections.abc import Sequence
from pathlib import Path

from .engine.runconfig import default_name, panel_name
from .errors import ConfigError
from .launch import RunOptions


def group_run_name(
    given: str | None, model: str, smoke: bool, models: list[str], jobs_dir: Path | None = None
) -> str | None:
    """One model: the name given; several: the name given as a prefix (or the default).
    One model under the name of a group run before (``--run day2`` then held
    ``day2-<model>`` for each): its member's name, or refused when the group has none
    for this model — never a new, paid run beside the group."""
    if len(models) > 1:
        return f"{given}-{default_name(model, smoke)}" if given else None
    if given is None or jobs_dir is None or (jobs_dir / given / "run.json").is_file():
        return given
    members = sorted(
        p.name for p in jobs_dir.glob(f"{glob.escape(given)}-*") if (p / "run.json").is_file()
    )
    if not members:
        return given
    mine = f"{given}-{default_name(model, smoke)}"
    if mine in members:
        return mine
    raise ConfigError(
        f"--run {given!r} names a group of runs ({', '.join(members)}), none of them"
        f" {model!r}'s: give the group's models, or another --run name for a new run"
    )


def lineup(
    options: RunOptions,
    models: Sequence[str],
    judges: Sequence[str],
    given: str | None,
    smoke: bool,
    jobs_dir: Path | None,
) -> list[RunOptions]:
    """Each answer model's run (``options`` with its model and name), then its panel's
    other judges' runs, each checked."""
    models, judges = list(dict.fromkeys(models)), list(dict.fromkeys(judges))
    group = []
    for model in models:
        name = group_run_name(given, model, smoke, models, jobs_dir) or default_name(model, smoke)
        group.append(dataclasses.replace(options, answer_model=model, run=name).check())
        group += [  # a judge panel's other judges: the first's answers, judged again
            dataclasses.replace(
                options,
                answer_model=model,
                judge_model=judge,
                run=panel_name(name, judge),
                answers_from=name,
            ).check()
            for judge in judges[1:]
        ]
    return group
