"""The report's figures, drawn with matplotlib as inline SVG (no files, no network).

Each figure is its own :class:`~matplotlib.figure.Figure` (no pyplot, no global
state) drawn under an ``rc_context``. Text stays text in the SVG
(``svg.fonttype = none``), so the page is small and searchable, and it stays
literal: a benchmark or run named ``$x^2$`` is not typeset as math, and one
starting with ``_`` still shows in the legend. The numbers drawn are the
summaries' and the comparison's own.
"""

from __future__ import annotations

import functools
import io
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from ..scores.compare import Pairwise, Stats
    from ..scores.summary import Summary

P = ParamSpec("P")


def _figure(rows: int) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(7.5, 0.42 * rows + 1.2))
    return fig, fig.add_subplot()


def _styled(draw: Callable[P, str]) -> Callable[P, str]:
    """Draw under the report's style: matplotlib reads it as texts are made and drawn."""

    @functools.wraps(draw)
    def styled(*args: P.args, **kwargs: P.kwargs) -> str:
        with rc_context({"svg.fonttype": "none", "font.size": 9, "text.parse_math": False}):
            return draw(*args, **kwargs)

    return styled


def _svg(fig: Figure) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight")
    text = out.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog: it sits inside HTML


def _legend(ax: Axes, **where: Any) -> None:
    """A legend when there is something to label (an all-failed run draws nothing)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**where)


def _label(name: str) -> str:
    """A legend label as given (matplotlib hides labels that start with ``_``)."""
    return "\u200b" + name if name.startswith("_") else name


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


@_styled
def forest(summaries: Sequence[tuple[str, Summary]]) -> str:
    """Per-benchmark means with 95% intervals, one marker per run, and the overall."""
    benchmarks = sorted({b for _, s in summaries for b in s["benchmarks"]})
    rows = [*benchmarks, "overall (macro)"]
    fig, ax = _figure(len(rows))
    k = len(summaries)
    for i, (name, s) in enumerate(summaries):
        offset = (i - (k - 1) / 2) * (0.7 / max(k, 1))
        for j, row in enumerate(rows):
            if row == "overall (macro)":
                mean, (lo, hi) = s["overall_macro_mean"], s["overall_ci95"]
            elif row in s["benchmarks"]:
                b = s["benchmarks"][row]
                mean, (lo, hi) = b["mean"], b["ci95"]
            else:
                continue
            if not all(map(_finite, (mean, lo, hi))):
                continue
            y = len(rows) - 1 - j + offset
            ax.errorbar(
                mean,
                y,
                xerr=[[mean - lo], [hi - mean]],
                fmt="o",
                ms=4,
                capsize=2,
                color=f"C{i % 10}",
                label=_label(name) if j == 0 else None,
            )
    ax.set_yticks(range(len(rows)), list(reversed(rows)))
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("mean case score, with its 95% bootstrap interval")
    ax.axhline(0.5, color="0.85", lw=0.8)
    ax.grid(axis="x", color="0.92")
    _legend(ax, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(rows)), ncol=min(k, 4))
    return _svg(fig)


@_styled
def differences(comparisons: list[Pairwise]) -> str:
    """Each run minus the baseline, per benchmark and overall, with 95% intervals."""
    benchmarks = sorted({b for c in comparisons for b in c["benchmarks"]})
    rows = [*benchmarks, "overall (macro)"]
    fig, ax = _figure(len(rows))
    k = len(comparisons)
    for i, c in enumerate(comparisons):
        offset = (i - (k - 1) / 2) * (0.7 / max(k, 1))
        for j, row in enumerate(rows):
            v: Stats | None = c["overall"] if row == "overall (macro)" else c["benchmarks"].get(row)
            if v is None:
                continue
            (lo, hi), diff = v["ci95"], v["diff"]
            y = len(rows) - 1 - j + offset
            ax.errorbar(
                diff,
                y,
                xerr=[[diff - lo], [hi - diff]],
                fmt="s",
                ms=4,
                capsize=2,
                color=f"C{(i + 1) % 10}",
                label=_label(f"{c['a']} − {c['b']}") if j == 0 else None,
            )
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(range(len(rows)), list(reversed(rows)))
    ax.set_xlabel("paired difference against the baseline, with its 95% bootstrap interval")
    ax.grid(axis="x", color="0.92")
    _legend(ax, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(rows)), ncol=min(k, 3))
    return _svg(fig)
