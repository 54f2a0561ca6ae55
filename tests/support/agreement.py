"""Agreement statistics written from their definitions, sharing no code with batchbench:
the oracles for ``scores.stats`` (Krippendorff's α is checked against the
``krippendorff`` package instead).

Ratings are a raters × items table whose cells are 1, 0 or None (not rated).
"""

from __future__ import annotations


def gwet_ac1(table: list[list[int | None]]) -> float:
    """Gwet (2008), "Computing inter-rater reliability and its variance in the presence
    of high agreement", eqs. for q categories with missing ratings: p_a over items with
    r_i >= 2 of sum_k r_ik (r_ik - 1) / (r_i (r_i - 1)); pi_k the mean over items with
    r_i >= 1 of r_ik / r_i; p_e = sum_k pi_k (1 - pi_k) / (q - 1)."""
    items = list(zip(*table))
    categories = (0, 1)
    counts = [{k: sum(1 for v in item if v == k) for k in categories} for item in items]
    rated = [c for c in counts if sum(c.values()) >= 1]
    pairable = [c for c in counts if sum(c.values()) >= 2]
    p_a = sum(
        sum(c[k] * (c[k] - 1) for k in categories) / (sum(c.values()) * (sum(c.values()) - 1))
        for c in pairable
    ) / len(pairable)
    pi = {k: sum(c[k] / sum(c.values()) for c in rated) / len(rated) for k in categories}
    p_e = sum(pi[k] * (1 - pi[k]) for k in categories) / (len(categories) - 1)
    return (p_a - p_e) / (1 - p_e)


def balanced_f1(predicted: list[int], truth: list[int]) -> float:
    """The macro average over the two classes of F1 = 2 P R / (P + R), each class's
    precision and recall counted directly (HealthBench's meta-evaluation metric)."""
    scores = []
    for cls in (1, 0):
        said = [t for p, t in zip(predicted, truth) if p == cls]
        real = [p for p, t in zip(predicted, truth) if t == cls]
        precision = sum(1 for t in said if t == cls) / len(said) if said else 0.0
        recall = sum(1 for p in real if p == cls) / len(real) if real else 0.0
        scores.append(2 * precision * recall / (precision + recall) if precision + recall else 0.0)
    return sum(scores) / 2
