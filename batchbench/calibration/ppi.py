"""How right the judge is, and the score corrected by physicians' labels (PPI++).

Prediction-powered inference (Angelopoulos et al., 2023; PPI++, power-tuned) joins
a small labelled sample — the physicians' case scores ``Y`` on ``n`` cases, with the
judge's ``f`` on the same cases — to the judge's ``f`` on the ``N`` cases nobody
labelled. Per benchmark:

- ``λ = Cov_n(Y, f) / ((1 + n/N) · Var_n(f))``, clipped to [0, 1] (sample moments,
  ddof 1; 0 when ``f`` does not vary on the labelled cases or nothing is unlabelled);
- ``θ = λ · mean_N(f) + mean_n(Y − λ·f)``;
- ``var = λ² · Var_N(f) / N + Var_n(Y − λ·f) / n``, a normal 95 % interval;

the overall score is the mean over benchmarks, with variance ``Σ var_b / B²``. Under 20
labelled cases the normal interval undercovers: such an interval is flagged. ρ² (the
judge–physician correlation on the labelled cases, squared) and the effective labelled
sample size ``n / (1 − ρ²)`` say what the labels buy. The arithmetic is written once,
here, in plain numpy, in the order the formulas give.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal, TypedDict

import numpy as np

from ..scores.stats import SMALL_N, Z95

Values = Sequence[float] | np.ndarray


class Corrected(TypedDict):
    n: int  # labelled cases
    N: int  # unlabelled cases of the run
    judge_mean: float  # mean of f over all n + N cases
    physician_mean: float | None  # mean of Y over the labelled cases
    lam: float
    estimate: float
    se: float | None  # None: too few labelled cases to estimate it
    ci95: list[float] | None
    unlabelled_var: float  # var's first term, λ²·Var_N(f)/N: what no label narrows
    rho2: float | None
    effective_n: float | None
    small_n: bool


class Agreement(TypedDict):
    n: int  # (item, rater) pairs
    sensitivity: float | None  # the judge says met where a physician does
    specificity: float | None  # the judge says not met where a physician does
    kappa: float | None  # Cohen's, judge against physicians


def _var(x: np.ndarray) -> float:
    return float(np.var(x, ddof=1)) if x.size > 1 else math.nan


def corrected(y: Values, f_labelled: Values, f_unlabelled: Values) -> Corrected:
    """PPI++ for one benchmark (see the module's formulas)."""
    Y, f, fu = (np.asarray(v, dtype=float) for v in (y, f_labelled, f_unlabelled))
    n, N = Y.size, fu.size
    var_f = _var(f)
    lam = 0.0
    if n > 1 and N > 1 and var_f > 0:
        cov = float(np.cov(Y, f, ddof=1)[0, 1])
        lam = min(1.0, max(0.0, cov / ((1 + n / N) * var_f)))
    residual = Y - lam * f
    if n == 0:  # nothing labelled: no estimate (numpy's mean of nothing warns)
        estimate = math.nan
    elif N:
        estimate = lam * float(fu.mean()) + float(residual.mean())
    else:
        estimate = float(residual.mean())
    variance = math.nan
    if n > 1:
        variance = (lam**2 * _var(fu) / N if lam > 0 else 0.0) + _var(residual) / n
    se = math.sqrt(variance) if math.isfinite(variance) else None
    # Two points always correlate perfectly, and a correlation of 1 (to rounding) makes
    # n/(1−ρ²) no number: neither is a figure, and neither is given.
    rho2 = None
    if n > 2 and var_f > 0 and _var(Y) > 0:
        rho2 = min(1.0, float(np.corrcoef(Y, f)[0, 1]) ** 2)
    effective = None if rho2 is None or rho2 > 1 - 1e-9 else n / (1 - rho2)
    everything = np.concatenate([f, fu])
    return {
        "n": n,
        "N": N,
        "judge_mean": float(everything.mean()) if everything.size else math.nan,
        "physician_mean": float(Y.mean()) if n else None,
        "lam": lam,
        "estimate": estimate,
        "se": se,
        "ci95": None if se is None else [estimate - Z95 * se, estimate + Z95 * se],
        "unlabelled_var": lam**2 * _var(fu) / N if lam > 0 else 0.0,
        "rho2": rho2,
        "effective_n": effective,
        "small_n": n < SMALL_N,
    }


def overall(per_benchmark: Mapping[str, Corrected]) -> tuple[float, float | None]:
    """The mean of the benchmarks' estimates and its standard error (Σ var_b / B²)."""
    values = list(per_benchmark.values())
    estimate = sum(c["estimate"] for c in values) / len(values)
    errors = [c["se"] for c in values]
    if any(se is None for se in errors):
        return estimate, None
    variance = sum(se**2 for se in errors if se is not None) / len(values) ** 2
    return estimate, math.sqrt(variance)


def agreement(pairs: Sequence[tuple[bool, bool]]) -> Agreement:
    """``(judge, physician)`` verdict pairs → sensitivity, specificity and Cohen's κ, with
    the physicians as the truth."""
    tp = sum(1 for j, p in pairs if j and p)
    fn = sum(1 for j, p in pairs if not j and p)
    tn = sum(1 for j, p in pairs if not j and not p)
    fp = sum(1 for j, p in pairs if j and not p)
    n = len(pairs)
    return {
        "n": n,
        "sensitivity": tp / (tp + fn) if tp + fn else None,
        "specificity": tn / (tn + fp) if tn + fp else None,
        "kappa": _cohen(tp, fn, tn, fp),
    }


def _cohen(tp: int, fn: int, tn: int, fp: int) -> float | None:
    n = tp + fn + tn + fp
    if not n:
        return None
    observed = (tp + tn) / n
    expected = ((tp + fp) * (tp + fn) + (tn + fn) * (tn + fp)) / n**2
    return None if expected == 1 else (observed - expected) / (1 - expected)


def _plan_terms(y: Values, f_labelled: Values, f_all: Values) -> tuple[float, float] | None:
    """The pilot's two variance terms for a plan: ``Var(Y − λf)`` (divided by n) and the
    floor ``λ² Var(f)/N`` over the run's cases; None when the pilot has fewer than 2."""
    Y, f, fa = (np.asarray(v, dtype=float) for v in (y, f_labelled, f_all))
    if Y.size < 2:
        return None
    lam = corrected(Y, f, fa)["lam"]
    floor = lam**2 * _var(fa) / fa.size if lam > 0 else 0.0
    return _var(Y - lam * f), floor


def labels_needed(y: Values, f_labelled: Values, f_all: Values, width: float) -> int | None:
    """Labelled cases for a corrected interval of half-width ``width``, by the pilot's
    moments (its λ, Var(Y − λf), Var(f) over the run): the smallest n with
    ``Z95 · sqrt(λ² Var(f)/N + Var(Y − λf)/n) ≤ width``; None when no n reaches it (the
    unlabelled cases' own term is already wider) or the pilot cannot say (n < 2)."""
    terms = _plan_terms(y, f_labelled, f_all)
    if terms is None:
        return None
    spread, floor = terms
    room = (width / Z95) ** 2 - floor
    if room <= 0:
        return None
    return max(2, math.ceil(spread / room)) if spread > 0 else 2


def narrowest(y: Values, f_labelled: Values, f_all: Values) -> float | None:
    """The half-width the plan's formula gives with every one of the run's cases of this
    benchmark labelled (n = N): the narrowest these cases can reach."""
    terms = _plan_terms(y, f_labelled, f_all)
    if terms is None:
        return None
    spread, floor = terms
    return Z95 * math.sqrt(floor + spread / len(f_all))


class RoganGladen(TypedDict):
    """The share of rubric items met, corrected for the judge's sensitivity and
    specificity (Rogan and Gladen, 1978), with a delta-method interval."""

    items: int  # items the judge ruled on, over the benchmark's judged cases
    apparent: float  # the share the judge said met
    estimate: float | None  # corrected, clipped to [0, 1]; None: Se + Sp ≤ 1 or unknown
    cut: Literal["at 0", "at 1"] | None  # the formula fell outside [0, 1] and was clipped
    se: float | None
    ci95: list[float] | None


def rogan_gladen(met: int, items: int, pairs: Sequence[tuple[bool, bool]]) -> RoganGladen:
    """``met`` of ``items`` the judge said met; ``pairs``: ``(judge, physician)`` verdicts
    of the labelled items, which give the sensitivity and specificity. The estimate is
    (apparent + Sp − 1) / (Se + Sp − 1); its variance adds the apparent share's and each
    of Se's and Sp's binomial variance (weighted by π² and (1 − π)²), over (Se + Sp − 1)²."""
    apparent = met / items if items else float("nan")
    positives = [j for j, p in pairs if p]
    negatives = [j for j, p in pairs if not p]
    out: RoganGladen = {
        "items": items,
        "apparent": apparent,
        "estimate": None,
        "cut": None,
        "se": None,
        "ci95": None,
    }
    if not items or not positives or not negatives:
        return out
    se_ = sum(positives) / len(positives)
    sp = sum(1 for j in negatives if not j) / len(negatives)
    youden = se_ + sp - 1
    if youden <= 0:
        return out  # the judge tells met from not met no better than chance
    raw = (apparent + sp - 1) / youden
    pi = min(1.0, max(0.0, raw))
    out["cut"] = "at 0" if raw < 0 else "at 1" if raw > 1 else None
    variance = (
        apparent * (1 - apparent) / items
        + pi**2 * se_ * (1 - se_) / len(positives)
        + (1 - pi) ** 2 * sp * (1 - sp) / len(negatives)
    ) / youden**2
    se = math.sqrt(variance)
    out["estimate"], out["se"] = pi, se
    out["ci95"] = [max(0.0, pi - Z95 * se), min(1.0, pi + Z95 * se)]
    return out
