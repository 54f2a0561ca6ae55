"""Krippendorff's α, Gwet's AC1 and HealthBench's balanced F1 (#40), against independent
implementations: the ``krippendorff`` package, and the definitions written out plainly
in ``support/agreement.py``; then through ``calibrate``."""

from __future__ import annotations

import random

import pytest
from support import agreement

from batchbench.scores import stats

krippendorff = pytest.importorskip("krippendorff")


def _tables(seed: int) -> list[list[list[int | None]]]:
    """Raters × items tables of 0/1 with gaps: some near-unanimous (AC1's case), some
    noisy, each with items rated by one, two and three raters."""
    rng = random.Random(seed)
    out = []
    for _ in range(40):
        raters, items = rng.randint(2, 4), rng.randint(5, 40)
        met = rng.choice([0.5, 0.8, 0.97])
        truth = [rng.random() < met for _ in range(items)]
        table = []
        for _ in range(raters):
            row: list[int | None] = []
            for t in truth:
                if rng.random() < 0.2:
                    row.append(None)
                else:
                    row.append(int(t if rng.random() < 0.85 else not t))
            table.append(row)
        out.append(table)
    return out


def _units(table: list[list[int | None]]) -> list[list[bool]]:
    return [[bool(v) for v in item if v is not None] for item in zip(*table)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_krippendorff_alpha_is_the_krippendorff_packages(seed):
    checked = 0
    for table in _tables(seed):
        mine = stats.krippendorff_alpha(_units(table))
        data = [[float("nan") if v is None else v for v in row] for row in table]
        units = _units(table)
        pairable = [u for u in units if len(u) > 1]
        if not pairable or len({v for u in pairable for v in u}) < 2:
            assert mine is None
            continue
        theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
        assert mine == pytest.approx(theirs, abs=1e-12), table
        checked += 1
    assert checked > 20


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gwet_ac1_is_the_definitions(seed):
    for table in _tables(seed):
        mine = stats.gwet_ac1(_units(table))
        if mine is None:
            assert not [u for u in _units(table) if len(u) > 1]
            continue
        assert mine == pytest.approx(agreement.gwet_ac1(table), abs=1e-12), table


def test_ac1_stays_high_where_kappa_collapses():
    """Almost every item met, raters nearly always agreeing: κ falls apart (the chance
    agreement is near 1), AC1 does not — the reason the issue asks for it."""
    units = [[True, True]] * 97 + [[True, False]] * 3
    assert stats.fleiss_kappa(units) < 0.05
    assert stats.gwet_ac1(units) > 0.95


def test_balanced_f1_is_the_definition():
    rng = random.Random(4)
    for _ in range(200):
        n = rng.randint(1, 30)
        truth = [int(rng.random() < 0.7) for _ in range(n)]
        said = [t if rng.random() < 0.8 else 1 - t for t in truth]
        pairs = [(bool(s), bool(t)) for s, t in zip(said, truth)]
        both_classes = len(set(truth) | set(said)) == 2
        if both_classes:
            assert stats.balanced_f1(pairs) == pytest.approx(agreement.balanced_f1(said, truth))
    assert stats.balanced_f1([]) is None
