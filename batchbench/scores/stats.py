"""How sure a comparison is, and what it would take: the definitions, one place each.

Everything here is defined exactly (the README's "Reading the statistics"), so
an independent re-implementation gets the same floats:

* paired differences ``score_a - score_b`` per case, in registry order; their
  sample standard deviation (n - 1) ``sd_diff`` and ``se_diff = sd_diff / sqrt(n)``;
  over K benchmarks, the macro difference's ``se = sqrt(sum se_b^2) / K``;
* ``mde80 = (z(0.975) + z(0.80)) * se``: the smallest true difference detected
  with 80 % power at a two-sided 5 % level;
* a bootstrap p-value, ``min(1, 2 * min(#(d <= 0), #(d >= 0)) / samples)``, and
  Holm's step-down adjustment over a family of p-values;
* the cases per benchmark a target difference needs, from a pilot's ``sd_b``;
* judge agreement over K passes: the share of items whose verdicts all agree,
  Fleiss' kappa, and a two-level bootstrap (cases, then one pass per case).
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np

from .summary import percentile

Z80 = 2.801585218112968  # z(0.975) + z(0.80), the 80 %-power, 5 %-level multiplier
# Fewer cases than this (paired, or labelled by physicians): a normal interval
# undercovers, and its figure is flagged, not shown as a finding. One rule for both.
SMALL_N = 20
Z95 = statistics.NormalDist().inv_cdf(0.975)  # the normal 97.5 % quantile


def sd(values: Sequence[float]) -> float | None:
    """The sample standard deviation (n - 1); None under two values."""
    return statistics.stdev(values) if len(values) >= 2 else None


def se_of(sd_diff: float | None, n: int) -> float | None:
    return None if sd_diff is None else sd_diff / math.sqrt(n)


def macro_se(ses: Sequence[float | None]) -> float | None:
    """The standard error of a macro mean of K benchmarks: ``sqrt(sum se_b^2) / K``, the
    squares summed left to right in benchmark-name order."""
    if not ses or any(s is None for s in ses):
        return None
    return math.sqrt(sum(s * s for s in ses if s is not None)) / len(ses)


def mde80(se: float | None) -> float | None:
    return None if se is None else Z80 * se


def p_value(diffs: np.ndarray) -> float:
    """Two-sided bootstrap p-value of a difference from its resampled differences."""
    below = int(np.count_nonzero(diffs <= 0))
    above = int(np.count_nonzero(diffs >= 0))
    return min(1.0, 2 * min(below, above) / diffs.size)


def holm(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the given order (monotone, capped at 1)."""
    m = len(ps)
    order = sorted(range(m), key=lambda i: ps[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adjusted[i] = running
    return adjusted


def cases_needed(sds: Sequence[float], mde: float, power: float, alpha: float) -> int:
    """Cases per benchmark so that the macro paired difference has an MDE of ``mde``:
    ``ceil(((z(1 - alpha/2) + z(power)) / mde)^2 * sum sd_b^2 / K^2)``, at least 2 (the
    fewest a spread needs); the squares summed left to right in benchmark-name order."""
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2) + statistics.NormalDist().inv_cdf(power)
    k = len(sds)
    spread = sum(s * s for s in sds)
    if spread == 0:  # identical differences: any target is met by the fewest cases
        return 2
    m = math.ceil((z / mde) ** 2 * spread / (k * k))
    return max(2, m)


def item_agreement(verdicts: Sequence[Sequence[bool]]) -> float | None:
    """The share of rubric items whose K verdicts all agree."""
    if not verdicts:
        return None
    return sum(1 for v in verdicts if len(set(v)) == 1) / len(verdicts)


def fleiss_kappa(verdicts: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa over items, each rated by two or more raters — a run's K judge
    passes, or the physicians who labelled it, whose number may differ from item to
    item: P_i = (Σ_j n_ij² − m_i) / (m_i (m_i − 1)), chance Σ_j p_j². Two categories
    (matched or not) or more (met, not met, unsure). Items rated once are left out.
    None when it is undefined (no item rated twice, or one category only). The one
    home of the rule, for noise and calibration."""
    rated = [v for v in verdicts if len(v) > 1]
    if not rated:
        return None
    per_item = []
    totals: Counter[Hashable] = Counter()
    for ratings in rated:
        m, counts = len(ratings), Counter(ratings)
        per_item.append((sum(n * n for n in counts.values()) - m) / (m * (m - 1)))
        totals.update(counts)
    votes = sum(totals.values())
    expected = math.fsum((n / votes) ** 2 for n in totals.values())
    if expected == 1:
        return None
    return (math.fsum(per_item) / len(per_item) - expected) / (1 - expected)


def krippendorff_alpha(units: Sequence[Sequence[bool]]) -> float | None:
    """Krippendorff's alpha, nominal, two values (met or not), missing ratings allowed:
    each unit (an item) counts with the raters who rated it; a unit rated once pairs
    nothing and is left out. ``α = 1 − (n − 1) · Σ_u m0·m1/(m_u − 1) / (n0 · n1)`` over
    the pairable values (Krippendorff 2011, the coincidence matrix of two values).
    None when undefined (no unit rated twice, or one value only)."""
    pairable = [u for u in units if len(u) > 1]
    n1 = sum(sum(u) for u in pairable)
    n0 = sum(len(u) for u in pairable) - n1
    if n0 == 0 or n1 == 0:
        return None
    disagree = math.fsum(sum(u) * (len(u) - sum(u)) / (len(u) - 1) for u in pairable)
    return 1 - (n0 + n1 - 1) * disagree / (n0 * n1)


def gwet_ac1(units: Sequence[Sequence[bool]]) -> float | None:
    """Gwet's AC1 for two categories, raters per item free to differ (Gwet 2008): the
    observed agreement over items rated twice or more, against chance agreement
    ``2π(1 − π)``, π the mean share of "met" per rated item. Stable where κ is not: when
    almost every item is met. None when undefined (no item rated twice)."""
    rated = [u for u in units if len(u) > 0]
    pairable = [u for u in rated if len(u) > 1]
    if not pairable:
        return None
    observed = math.fsum(
        (sum(u) * (sum(u) - 1) + (len(u) - sum(u)) * (len(u) - sum(u) - 1))
        / (len(u) * (len(u) - 1))
        for u in pairable
    ) / len(pairable)
    met = math.fsum(sum(u) / len(u) for u in rated) / len(rated)
    chance = 2 * met * (1 - met)
    return None if chance == 1 else (observed - chance) / (1 - chance)


def balanced_f1(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """``(rater, truth)`` verdict pairs → the mean of the F1 of "met" and the F1 of "not
    met" (HealthBench's meta-evaluation of graders). None without pairs; a class that
    neither side ever says scores 1 (nothing to get wrong)."""
    if not pairs:
        return None
    tp = sum(1 for r, t in pairs if r and t)
    tn = sum(1 for r, t in pairs if not r and not t)
    wrong = len(pairs) - tp - tn
    f1_met = 2 * tp / (2 * tp + wrong) if 2 * tp + wrong else 1.0
    f1_not = 2 * tn / (2 * tn + wrong) if 2 * tn + wrong else 1.0
    return (f1_met + f1_not) / 2


def two_level_interval(
    scores: dict[str, list[list[float]]], samples: int, seed: int
) -> list[float] | None:
    """The overall macro interval with the judge's noise in it.

    ``scores[benchmark][case]`` holds the case's K pass scores (cases in registry
    order). One ``random.Random(seed)``; for each resample, for each benchmark
    (names sorted), ``n`` times: a case ``randrange(n)``, then one of its passes
    ``randrange(K)``; the benchmark's mean is the picked scores summed left to right
    from 0, over n; the resample's value the ``statistics.fmean`` of the benchmark
    means. The interval is the summary's percentile rule (2.5 %, 97.5 %).
    """
    names = sorted(b for b, cases in scores.items() if cases)
    if not names or samples < 1:
        return None
    rng = random.Random(seed)
    draw = rng.randrange
    values = np.empty(samples, dtype=np.float64)
    for s in range(samples):
        means = []
        for b in names:
            cases = scores[b]
            n, k = len(cases), len(cases[0])
            total = 0.0
            for _ in range(n):
                case = cases[draw(n)]
                total += case[draw(k)]
            means.append(total / n)
        values[s] = statistics.fmean(means)
    return [percentile(values, 0.025), percentile(values, 0.975)]
