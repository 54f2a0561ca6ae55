"""PPI++ as issue #34 writes it, in plain Python (``statistics``), sharing no code with
batchbench: the oracle the calibration tests compare against."""

from __future__ import annotations

import math
import statistics

Z = statistics.NormalDist().inv_cdf(0.975)


def corrected(y, f, fu):
    """θ, its standard error, λ and ρ² for one benchmark: y, f on the n labelled cases,
    fu (the judge) on the N unlabelled ones."""
    n, N = len(y), len(fu)
    lam = 0.0
    if n > 1 and N > 1 and statistics.variance(f) > 0:
        lam = statistics.covariance(y, f) / ((1 + n / N) * statistics.variance(f))
        lam = min(1.0, max(0.0, lam))
    residual = [a - lam * b for a, b in zip(y, f)]
    theta = lam * (sum(fu) / N if N else 0.0) + sum(residual) / n
    var = (lam**2 * statistics.variance(fu) / N if lam > 0 else 0.0) + statistics.variance(
        residual
    ) / n
    try:
        rho2 = statistics.correlation(y, f) ** 2
    except statistics.StatisticsError:  # a constant input: no correlation to speak of
        rho2 = None
    return theta, math.sqrt(var), lam, rho2


def needed(y, f, f_all, width):
    """The smallest n whose corrected half-width is at most ``width`` (the pilot's λ)."""
    unlabelled = len(f_all)  # the plan's N: the run's cases (its λ is the pilot's)
    lam = 0.0
    if len(y) > 1 and unlabelled > 1 and statistics.variance(f) > 0:
        lam = statistics.covariance(y, f) / ((1 + len(y) / unlabelled) * statistics.variance(f))
        lam = min(1.0, max(0.0, lam))
    spread = statistics.variance([a - lam * b for a, b in zip(y, f)])
    floor = lam**2 * statistics.variance(f_all) / unlabelled if lam > 0 else 0.0
    n = 2
    while Z * math.sqrt(floor + spread / n) > width:
        n += 1
        if n > 10**6:
            return None
    return n


def rogan_gladen(met, items, tp, fn, tn, fp):
    """Rogan & Gladen (1978), written plainly: the true share from the apparent one and
    the test's sensitivity and specificity, with the delta-method standard error
    (Greiner & Gardner's form): (estimate clipped to [0, 1], se) or (None, None)."""
    if not items or not (tp + fn) or not (tn + fp):
        return None, None
    p = met / items
    sens, spec = tp / (tp + fn), tn / (tn + fp)
    j = sens + spec - 1
    if j <= 0:
        return None, None
    pi = min(1.0, max(0.0, (p + spec - 1) / j))
    var = (
        p * (1 - p) / items
        + pi**2 * sens * (1 - sens) / (tp + fn)
        + (1 - pi) ** 2 * spec * (1 - spec) / (tn + fp)
    ) / j**2
    return pi, var**0.5


def half_width(y, f, f_all, n):
    """The plan's corrected half-width with ``n`` labelled cases (the pilot's moments)."""
    unlabelled = len(f_all)
    lam = 0.0
    if len(y) > 1 and unlabelled > 1 and statistics.variance(f) > 0:
        lam = statistics.covariance(y, f) / ((1 + len(y) / unlabelled) * statistics.variance(f))
        lam = min(1.0, max(0.0, lam))
    spread = statistics.variance([a - lam * b for a, b in zip(y, f)])
    floor = lam**2 * statistics.variance(f_all) / unlabelled if lam > 0 else 0.0
    return Z * math.sqrt(floor + spread / n)
