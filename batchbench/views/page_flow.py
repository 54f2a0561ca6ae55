"""The report's flow of cases (:mod:`..scores.flow`), one diagram a run as CONSORT and
STARD draw it: the steps down the middle, who left at each step and why to the right.
Inline SVG, no script: it prints, and reads on a phone."""

from __future__ import annotations

import html
from typing import Any

BOX_W, BOX_H, GAP, SIDE_X, SIDE_W = 220, 34, 26, 260, 300


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def flow_svg(steps: list[dict[str, Any]]) -> str:
    """One run's diagram."""
    out: list[str] = []
    y = 4
    for i, step in enumerate(steps):
        out.append(
            f"<rect x='4' y='{y}' width='{BOX_W}' height='{BOX_H}' rx='4' class='fbox'/>"
            f"<text x='{4 + BOX_W / 2}' y='{y + 21}' text-anchor='middle'>"
            f"{step['cases']:,} {_e(step['step'])}</text>"
        )
        left = step["excluded"]
        if left:
            lines = [f"− {n:,} {why}" for why, n in left.items()]
            height = 10 + 16 * len(lines)
            top = y + BOX_H + GAP / 2 - height / 2
            out.append(
                f"<line x1='{4 + BOX_W / 2}' y1='{y + BOX_H + GAP / 2}' x2='{SIDE_X}'"
                f" y2='{y + BOX_H + GAP / 2}' class='fline'/>"
                f"<rect x='{SIDE_X}' y='{top}' width='{SIDE_W}' height='{height}' rx='4'"
                " class='fside'/>"
                + "".join(
                    f"<text x='{SIDE_X + 8}' y='{top + 19 + 16 * k}'>{_e(line)}</text>"
                    for k, line in enumerate(lines)
                )
            )
        if i < len(steps) - 1:
            out.append(
                f"<line x1='{4 + BOX_W / 2}' y1='{y + BOX_H}' x2='{4 + BOX_W / 2}'"
                f" y2='{y + BOX_H + GAP}' class='fline' marker-end='url(#arrow)'/>"
            )
        y += BOX_H + GAP
    height = y - GAP + 8
    marker = (
        "<defs><marker id='arrow' markerWidth='8' markerHeight='8' refX='4' refY='4'"
        " orient='auto'><path d='M0,0 L8,4 L0,8 z'/></marker></defs>"
    )
    return (
        f"<svg viewBox='0 0 {SIDE_X + SIDE_W + 8} {height}' role='img' class='flow'"
        f" font-size='13'>{marker}{''.join(out)}</svg>"
    )


def flow_section(flows: dict[str, list[dict[str, Any]]]) -> str:
    """Every run's diagram, under one heading."""
    style = (
        "<style>.flow{max-width:100%;height:auto}.fbox{fill:#f4f6fa;stroke:#333}"
        ".fside{fill:#fff8f0;stroke:#b60}.fline{stroke:#333}</style>"
    )
    parts = "".join(
        f"<figure><figcaption>{_e(name)}</figcaption>{flow_svg(steps)}</figure>"
        for name, steps in flows.items()
    )
    return (
        f"<h2 id='flow'>Flow of cases</h2>{style}<p>Each run's cases from the dataset to"
        " the scored ones, and at each step how many left and why (as CONSORT and STARD"
        f" draw it).</p>{parts}"
    )
