"""``compare``'s text: the leaderboard, then each run against the baseline.

Columns fit their longest entry (a name is never cut), every row keeps its
alignment when a figure is missing, a run with failed cases says so beside its
mean, and a verdict that rests on too few cases says it has none.
"""

from __future__ import annotations

from ..formats import interval, num
from ..scores import stats
from ..scores.compare import Comparison, Leader, Pairwise, Stats
from ..scores.noise import noise_text

OVERALL = "overall (macro)"


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Rows of cells as aligned text: the columns in ``right`` right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            (c.rjust(w) if i in right else c.ljust(w)) for i, (c, w) in enumerate(zip(r, widths))
        ).rstrip()
        for r in rows
    ]


def _leaderboard(runs: list[Leader]) -> list[str]:
    ranked = sorted(runs, key=lambda r: -(r["overall_macro_mean"] or -1))
    judges = len({r.get("judge_model") for r in runs}) > 1  # a judge panel's runs
    rows = [["run", "answer model", *(["judge"] if judges else []), "cases", "failed", "mean"]]
    rows[0].append("95% CI")
    for r in ranked:
        rows.append(
            [
                r["name"],
                str(r["answer_model"] or "-"),
                *([str(r.get("judge_model") or "-")] if judges else []),
                str(r["completed_cases"]),
                f"{r['errors']} !" if r["errors"] else "0",
                num(r["overall_macro_mean"]),
                interval(r["overall_ci95"]),
            ]
        )
    lines = _table(rows, {3, 4, 5} if judges else {2, 3, 4})
    if judges:
        lines.append(
            "  the same answers judged by other judges: each difference below is where the"
            " judges disagree, not a better model"
        )
    failed = [r for r in ranked if r["errors"]]
    if failed:
        lines.append(
            "  ! failed cases: "
            + "; ".join(
                f"{r['name']}'s mean is over {r['completed_cases']} cases, {r['errors']} failed"
                for r in failed
            )
            + f". {'Its rank is' if len(failed) == 1 else 'Their ranks are'} not like for"
            " like: the paired differences below use only the cases both runs scored."
        )
    for r in ranked:
        noise = r.get("judge_noise")
        if noise:
            lines.append(f"  {r['name']}: {noise_text(noise)}")
    return lines


def _row(name: str, v: Stats) -> list[str]:
    p = v["p_holm"] if v["p_holm"] is not None else v["p_value"]
    share = v["share_a_better"]
    return [
        name,
        str(v["n"]),
        num(v["diff"], "+.3f"),
        interval(v["ci95"], "+.3f"),
        "all tie" if share is None else num(share, ".1%"),
        num(v["se_diff"], ".3f"),
        num(v["mde80"], ".3f"),
        num(p, ".4f"),
        "*" if v["small_n"] else "",
    ]


def _dropped(c: Pairwise) -> str:
    if not c["excluded_cases"]:
        return "no case dropped"
    parts = []
    if c["only_a"]:
        parts.append(f"{c['only_a']} scored by {c['a']} only")
    if c["only_b"]:
        parts.append(f"{c['only_b']} scored by {c['b']} only")
    return f"{c['excluded_cases']} dropped ({', '.join(parts)}: failed or missing in the other)"


def _pairwise(c: Pairwise, margin: float | None) -> list[str]:
    rows = [["benchmark", "n", "diff", "95% CI", "P(a better)", "se", "MDE80", "p", ""]]
    rows += [_row(name, v) for name, v in c["benchmarks"].items()]
    rows.append(_row(OVERALL, c["overall"]))
    lines = [
        "",
        f"{c['a']} - {c['b']}: {c['paired_cases']} paired cases; {_dropped(c)}",
        *("  " + line for line in _table(rows, {1, 2, 4, 5, 6, 7})),
        "  p: bootstrap, two-sided; overall: Holm-adjusted over the comparisons",
    ]
    small = [n for n, v in c["benchmarks"].items() if v["small_n"]]
    if c["overall"]["small_n"]:
        small.append(OVERALL)
    if small:
        lines.append(
            f"  * fewer than {stats.SMALL_N} paired cases (or no spread to measure): the"
            f" interval is not to be trusted ({', '.join(small)})"
        )
    if margin is not None:
        lines.append(_non_inferiority(c, margin))
    return lines


# A non-inferiority verdict in words (the text and the report say the same).
VERDICT = {True: "yes", False: "not demonstrated", None: "no verdict (small n)"}


def _non_inferiority(c: Pairwise, margin: float) -> str:
    overall = c["overall"]
    head = f"  non-inferiority at margin {margin:g}: "
    if overall["non_inferior"] is None:
        head += f"no verdict overall (small n: {overall['n']} paired cases)"
    else:
        verdict = "is" if overall["non_inferior"] else "is NOT demonstrated to be"
        head += (
            f"{c['a']} {verdict} within {margin:g} of {c['b']} overall"
            f" (95% CI low {overall['ci95'][0]:+.3f} vs {-margin:+g})"
        )
    benchmarks = c["benchmarks"].items()
    shown = [n for n, v in benchmarks if v["non_inferior"] is True]
    not_shown = [n for n, v in benchmarks if v["non_inferior"] is False]
    none = [n for n, v in benchmarks if v["non_inferior"] is None]
    parts = []
    if not_shown:
        parts.append(
            f"not demonstrated (interval reaches below -{margin:g}) for {', '.join(not_shown)}"
        )
    elif shown:
        parts.append("demonstrated for every benchmark with a verdict")
    if none:
        parts.append(f"no verdict (small n) for {', '.join(none)}")
    return head + "".join(f"; {part}" for part in parts)


def compare_text(result: Comparison) -> str:
    """The leaderboard, then each run against the baseline, per benchmark and overall:
    n beside every interval, the standard error, the MDE, the p-value (Holm's overall),
    and the non-inferiority verdicts when a margin was given."""
    lines = _leaderboard(result["runs"])
    for c in result["comparisons"]:
        lines += _pairwise(c, result["margin"])
    return "\n".join(lines)
