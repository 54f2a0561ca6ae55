"""The report's figures, drawn with matplotlib as inline SVG (no files, no network).

Text stays text in the SVG (``svg.fonttype = none``), so the page is small and
searchable; the numbers drawn are the summaries' and the comparison's own.
"""

from __future__ import annotations

import io
import math
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: figures are drawn to strings
import matplotlib.pyplot as plt  # noqa: E402

plt.rcParams["svg.fonttype"] = "none"
plt.rcParams["font.size"] = 9


def _svg(fig: Any) -> str:
    out = io.StringIO()
    fig.savefig(out, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog: it sits inside HTML


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def forest(summaries: list[tuple[str, dict[str, Any]]]) -> str:
    """Per-benchmark means with 95% intervals, one marker per run, and the overall."""
    benchmarks = sorted({b for _, s in summaries for b in s["benchmarks"]})
    rows = [*benchmarks, "overall (macro)"]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(rows) + 1.2))
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
                mean, y, xerr=[[mean - lo], [hi - mean]], fmt="o", ms=4, capsize=2,
                color=f"C{i % 10}", label=name if j == 0 else None,
            )  # fmt: skip
    ax.set_yticks(range(len(rows)), list(reversed(rows)))
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("mean case score, with its 95% bootstrap interval")
    ax.axhline(0.5, color="0.85", lw=0.8)
    ax.grid(axis="x", color="0.92")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(rows)), ncol=min(k, 4))
    return _svg(fig)


def differences(comparisons: list[dict[str, Any]]) -> str:
    """Each run minus the baseline, per benchmark and overall, with 95% intervals."""
    benchmarks = sorted({b for c in comparisons for b in c["benchmarks"]})
    rows = [*benchmarks, "overall (macro)"]
    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(rows) + 1.2))
    k = len(comparisons)
    for i, c in enumerate(comparisons):
        offset = (i - (k - 1) / 2) * (0.7 / max(k, 1))
        for j, row in enumerate(rows):
            v = c["overall"] if row == "overall (macro)" else c["benchmarks"].get(row)
            if v is None:
                continue
            (lo, hi), diff = v["ci95"], v["diff"]
            y = len(rows) - 1 - j + offset
            ax.errorbar(
                diff, y, xerr=[[diff - lo], [hi - diff]], fmt="s", ms=4, capsize=2,
                color=f"C{(i + 1) % 10}", label=f"{c['a']} − {c['b']}" if j == 0 else None,
            )  # fmt: skip
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_yticks(range(len(rows)), list(reversed(rows)))
    ax.set_xlabel("paired difference against the baseline, with its 95% bootstrap interval")
    ax.grid(axis="x", color="0.92")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.6 / len(rows)), ncol=min(k, 3))
    return _svg(fig)
