"""A judge panel's runs (#50): each model's answers judged by several judges, one run per
judge (:func:`..engine.runconfig.panel_name`). Here: the models ranked under each judge
the panels share, and whether the ranking changes with the judge — the question a team
asks before it trusts one judge's leaderboard.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

from ..engine.rundir import Run, list_runs
from ..formats import num
from .summary_file import read_summary


class JudgeRanking(TypedDict):
    judge: str
    ranking: list[tuple[str, float]]  # (answer model, overall mean), best first


def panel_of(run: Run) -> dict[str, Run]:
    """The run's panel by judge model: itself (the first judge) and the runs judging its
    answers; just itself for a run without a panel."""
    config = run.load_config()
    found = {config.judge_model: run}
    for other in list_runs(run.root.parent):
        theirs = other.load_config()
        if theirs.answers_from == run.name:
            found.setdefault(theirs.judge_model, other)
    return found


def rankings(runs: Sequence[Run]) -> list[JudgeRanking]:
    """The models ranked under each judge every run's panel has (finished runs only);
    empty unless there are two models and a second judge."""
    panels = [panel_of(r) for r in runs]
    judges = [j for j in panels[0] if all(j in p for p in panels[1:])] if panels else []
    if len(runs) < 2 or len(judges) < 2:
        return []
    out: list[JudgeRanking] = []
    for judge in judges:
        means = []
        for panel in panels:
            member = panel[judge]
            if not member.summary_path.is_file():
                return []  # a judge still at work: no ranking yet
            summary = read_summary(member.summary_path)
            mean = summary["overall_macro_mean"]
            means.append((str(summary["answer_model"]), mean if math.isfinite(mean) else -1.0))
        out.append(JudgeRanking(judge=judge, ranking=sorted(means, key=lambda m: -m[1])))
    return out


def rankings_text(found: Sequence[JudgeRanking]) -> list[str]:
    """Each judge's ranking, then whether the ranking changes with the judge."""
    if not found:
        return []
    width = max(len(r["judge"]) for r in found)
    lines = ["", "under each judge of the panel (the models' overall means, best first):"]
    for r in found:
        order = " > ".join(f"{model} {num(mean)}" for model, mean in r["ranking"])
        lines.append(f"  {r['judge'].ljust(width)}  {order}")
    first = [m for m, _ in found[0]["ranking"]]
    moved = [r["judge"] for r in found[1:] if [m for m, _ in r["ranking"]] != first]
    if moved:
        lines.append(
            f"  the ranking changes with the judge: {', '.join(moved)} order the models"
            f" otherwise than {found[0]['judge']}"
        )
    else:
        lines.append("  the same ranking under every judge")
    return lines


def panel_lines(run: Run) -> list[str]:
    """What ``status`` says of a run's judge panel: the other judges' scores of the same
    answers (or that they are still at work), or whose answers this run judges."""
    from ..formats import interval

    config = run.load_config()
    if config.answers_from is not None:
        return [f"  judges the answers of run {config.answers_from} (a judge panel)"]
    said = []
    for judge, member in panel_of(run).items():
        if member is run:
            continue
        if member.summary_path.is_file():
            summary = read_summary(member.summary_path)
            mean, ci = summary["overall_macro_mean"], summary["overall_ci95"]
            said.append(f"{judge} {num(mean)} {interval(ci)} ({member.name})")
        else:
            said.append(f"{judge} still judging ({member.name})")
    return [f"  judge panel, the same answers: {'; '.join(said)}"] if said else []
