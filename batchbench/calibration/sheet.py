"""A blind labelling sheet: cases drawn per benchmark, each answer with its rubric.

``N`` cases drawn at random with equal numbers per benchmark (the remainder, when
``N`` does not divide, to benchmarks drawn by the same seed), among the cases every
run given answered and had judged; numpy's generator seeded with ``seed``, so the
same runs and seed give the same sheet, and the sheet says how it was drawn. Each
answer's every rubric item is a row with an empty ``rater`` and ``verdict``; the
judge's verdicts are never in it. The same rows as a self-contained HTML form, which
saves the filled-in CSV.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from .._io import atomic_write_text
from ..bench.dataset import Case
from ..errors import InputError

COLUMNS = (
    "run",
    "case_id",
    "benchmark",
    "item_id",
    "points",
    "item",
    "prompt",
    "answer",
    "rater",
    "verdict",
)


def draw(
    answered: Mapping[str, Case], per_run: Sequence[set[str]], total: int, seed: int
) -> list[Case]:
    """``total`` cases, as equal a number per benchmark as divides, among those every run
    answered; refused when a benchmark has too few."""
    common = set.intersection(*per_run) if per_run else set()
    by_benchmark: dict[str, list[str]] = {}
    for case_id, case in answered.items():
        if case_id in common:
            by_benchmark.setdefault(case["benchmark"], []).append(case_id)
    names = sorted(by_benchmark)
    if not names:
        raise InputError("no case was answered and judged in every run given")
    if total < len(names):
        raise InputError(f"--cases {total}: at least one case per benchmark is {len(names)} cases")
    rng = np.random.default_rng(seed)
    base, extra = divmod(total, len(names))
    more = set(rng.choice(len(names), size=extra, replace=False).tolist()) if extra else set()
    picked: list[Case] = []
    for i, name in enumerate(names):
        want = base + (1 if i in more else 0)
        pool = sorted(by_benchmark[name])
        if len(pool) < want:
            raise InputError(
                f"--cases {total}: benchmark {name} has {len(pool)} cases answered in every"
                f" run, {want} wanted"
            )
        chosen = rng.choice(len(pool), size=want, replace=False)
        picked += [answered[pool[j]] for j in sorted(chosen.tolist())]
    return picked


def sheet_rows(
    cases: Sequence[Case], answers: Mapping[str, Mapping[str, str]]
) -> list[dict[str, Any]]:
    """Every run's answer to every case, each rubric item a row (prompt and answer on the
    case's first row only, for a readable spreadsheet)."""
    rows = []
    for case in cases:
        for run, by_case in answers.items():
            for i, item in enumerate(case["rubric_items"]):
                rows.append(
                    {
                        "run": run,
                        "case_id": case["case_id"],
                        "benchmark": case["benchmark"],
                        "item_id": item["item_id"],
                        "points": item["points"],
                        "item": item["text"],
                        "prompt": case["prompt"] if i == 0 else "",
                        "answer": by_case[case["case_id"]] if i == 0 else "",
                        "rater": "",
                        "verdict": "",
                    }
                )
    return rows


# A cell a spreadsheet would run as a formula (OWASP's CSV injection): written behind a
# quote mark, read back without it. Cells already behind quote marks get one more, so
# every cell reads back as it was. The HTML form's script applies the same rule.
FORMULA = re.compile(r"^'*[=+\-@\t\r]")


def neutral(value: str) -> str:
    return "'" + value if FORMULA.match(value) else value


def restored(value: str) -> str:
    return value[1:] if value.startswith("'") and FORMULA.match(value) else value


def write_csv(path: Path, note: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """The header on the first row, as every spreadsheet and CSV reader expects; the
    note last, one quoted cell (its commas kept inside it), which the reader skips."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: neutral(str(v)) for k, v in row.items()} for row in rows)
    csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL).writerow([f"# {note}"])
    atomic_write_text(path, out.getvalue(), mode=0o644)


def write_html(path: Path, note: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """A form: a rater's name, met / not met for every item, a button that saves the CSV
    (the same columns, verdicts filled in). No network, no judge verdicts."""
    blocks = []
    current = None
    for n, row in enumerate(rows):
        key = (row["run"], row["case_id"])
        if key != current:
            if current is not None:
                blocks.append("</tbody></table></section>")
            current = key
            blocks.append(
                f"<section><h2>{escape(row['benchmark'])} · case {escape(row['case_id'])}"
                f" · {escape(row['run'])}</h2><h3>Prompt</h3><pre>{escape(row['prompt'])}</pre>"
                f"<h3>Answer</h3><pre>{escape(row['answer'])}</pre>"
                "<table><thead><tr><th>item</th><th>points</th><th>met</th><th>not met</th>"
                "</tr></thead><tbody>"
            )
        harm = _is_harm(row["points"])
        blocks.append(
            f"<tr{' class=harm' if harm else ''}><td>{escape(str(row['item']))}"
            + (f"<br><small>{HARM_HINT}</small>" if harm else "")
            + f"</td><td>{escape(str(row['points']))}</td>"
            f'<td><input type="radio" name="v{n}" value="1"></td>'
            f'<td><input type="radio" name="v{n}" value="0"></td></tr>'
        )
    if current is not None:
        blocks.append("</tbody></table></section>")
    # Inside a script element, markup characters in an answer (<!--<script>) must not
    # read as markup: each is written as its JSON escape.
    data = json.dumps([{k: str(v) for k, v in r.items()} for r in rows])
    for char, escaped in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        data = data.replace(char, escaped)
    page = _PAGE.format(
        note=escape(note), body="\n".join(blocks), data=data, columns=json.dumps(COLUMNS)
    )
    atomic_write_text(path, page, mode=0o644)


# A failure mode (negative points) is "met" when the harm is in the answer: the reverse
# of a criterion's sense, said beside each such item so no rater reads it as "avoided".
HARM_HINT = "a failure mode: <b>met</b> means the answer does this harm (it costs points)"


def _is_harm(points: object) -> bool:
    try:
        return float(str(points)) < 0
    except ValueError:
        return False


_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>BedsideBench labelling sheet</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}
pre{{white-space:pre-wrap;background:#f6f6f6;padding:.5rem}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.25rem .5rem;vertical-align:top}}
tr.harm td:first-child{{border-left:4px solid #b00}}
#bar{{position:sticky;top:0;background:#fff;padding:.5rem 0;border-bottom:1px solid #ccc}}</style>
</head><body><h1>Labelling sheet</h1><p>{note}</p>
<p>For each rubric item: is it met by the answer? The judge's verdicts are not shown. An
item with negative points is a failure mode: mark it <b>met</b> when the answer does the
harm it names (a red edge marks each).</p>
<p id="bar"><label>Rater <input id="rater" required></label>
<button id="save" class="save">Save CSV</button> <span id="said"></span></p>
{body}
<p><button class="save">Save CSV</button></p>
<script>
const ROWS = {data};
const COLUMNS = {columns};
function cell(v) {{
  v = String(v);
  if (/^'*[=+\\-@\\t\\r]/.test(v)) v = "'" + v;
  return /[",\\n\\r]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v;
}}
function csvText() {{
  const rater = document.getElementById("rater").value.trim();
  const lines = [COLUMNS.join(",")];
  ROWS.forEach((row, n) => {{
    const picked = document.querySelector('input[name="v' + n + '"]:checked');
    const verdict = picked ? picked.value : "";
    const out = Object.assign({{}}, row, {{rater: picked ? rater : "", verdict: verdict}});
    lines.push(COLUMNS.map(c => cell(out[c])).join(","));
  }});
  return lines.join("\\n") + "\\n";
}}
function fileName() {{
  const rater = document.getElementById("rater").value.trim();
  return "labels-" + (rater.replace(/[^A-Za-z0-9._-]+/g, "_") || "rater") + ".csv";
}}
function save() {{
  const said = document.getElementById("said");
  if (!document.getElementById("rater").value.trim()) {{
    said.textContent = "name the rater first";
    document.getElementById("rater").focus();
    return;
  }}
  const blob = new Blob([csvText()], {{type: "text/csv"}});
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob); a.download = fileName(); a.click();
  const left = ROWS.length - document.querySelectorAll("input[type=radio]:checked").length;
  said.textContent = "saved " + a.download + (left ? " (" + left + " items not yet labelled)" : "");
}}
document.querySelectorAll("button.save").forEach(b => b.addEventListener("click", save));
</script></body></html>
"""
