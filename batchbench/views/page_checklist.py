"""A filled checklist (:mod:`.checklists`) as the report shows it and as a reviewer
attaches it: an HTML section of the page, and Markdown and CSV beside it (CSV columns
``item``, ``status``, ``where``, ``text``)."""

from __future__ import annotations

import csv
import html
import io
from collections import Counter

from .checklists import Checklist

CSV_COLUMNS = ("item", "status", "where", "text")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _tally(rows: list[dict[str, str]]) -> str:
    counts = Counter(r["status"] for r in rows)
    return ", ".join(
        f"{counts[s]} {s}" for s in ("answered", "not applicable", "not reported") if counts[s]
    )


def checklist_html(checklist: Checklist, rows: list[dict[str, str]]) -> str:
    body = "".join(
        f"<tr class='{_e(r['status'].replace(' ', '-'))}'><td>{_e(r['item'])}</td>"
        f"<td>{_e(r['topic'])}</td><td>{_e(r['status'])}</td>"
        + (
            f"<td><a href='{_e(r['where'])}'>{_e(r['where'])}</a></td>"
            if r["where"]
            else "<td></td>"
        )
        + f"<td>{_e(r['text'])}</td></tr>"
        for r in rows
    )
    return (
        f"<section id='checklist-{_e(checklist.name)}'><h2>Checklist: {_e(checklist.title)}</h2>"
        f"<p>{_e(checklist.source)}. {len(rows)} items: {_e(_tally(rows))}.</p>"
        "<div class='scroll'><table><tr><th>item</th><th>topic</th><th>status</th>"
        f"<th>where</th><th>text</th></tr>{body}</table></div></section>"
    )


def checklist_markdown(checklist: Checklist, rows: list[dict[str, str]], page: str) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        f"# {checklist.title}",
        "",
        f"{checklist.source}. {len(rows)} items: {_tally(rows)}. Sections are of {page}.",
        "",
        "| item | topic | status | where | text |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {cell(r['item'])} | {cell(r['topic'])} | {r['status']} | {cell(r['where'])} |"
        f" {cell(r['text'])} |"
        for r in rows
    ]
    return "\n".join(lines) + "\n"


def checklist_csv(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
