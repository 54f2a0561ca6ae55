"""#66.8: ``report --checklist``: CHART and MI-CLEAR-LLM filled from the run's record —
every item once, in order, each answer pointing at a section the page holds, the CSV's
columns as a reviewer attaches them; TRIPOD-LLM, whose wording this build lacks, is a
one-line refusal rather than a made-up list."""

from __future__ import annotations

import csv
import io
import json
import re

from support.cli import FIXTURE, assert_one_line_error, run_cli
from support.runs import env, run_args

# The subitem labels the CHART statement's abstract enumerates (BMJ Medicine
# 2025;4:e001632): title (1a), abstract (1b), background (2a,b), model identifiers
# (3a,b), model details (4a-c), prompt engineering (5a,b), query strategy (6a-d),
# performance evaluation (7a,b), sample size (8), data analysis (9a), results (10a-c),
# discussion (11a-c), disclosures (12a), funding (12b), ethics (12c), protocol (12d),
# data availability (12e).
CHART_LABELS = [
    "1a",
    "1b",
    "2a",
    "2b",
    "3a",
    "3b",
    "4a",
    "4b",
    "4c",
    "5a",
    "5b",
    "6a",
    "6b",
    "6c",
    "6d",
    "7a",
    "7b",
    "8",
    "9a",
    "10a",
    "10b",
    "10c",
    "11a",
    "11b",
    "11c",
    "12a",
    "12b",
    "12c",
    "12d",
    "12e",
]
# MI-CLEAR-LLM's six items as Korean J Radiol 2025;26:304 names them.
MI_CLEAR = [
    "Identification and specifications of the LLM used",
    "Stochasticity handling",
    "Prompt wording and syntax",
    "Prompt structuring",
    "Prompt testing and optimization",
    "Independence of the test data",
]


def _ids(html: str) -> set[str]:
    return set(re.findall(r"\bid=['\"]([^'\"]+)['\"]", html))


def test_a_run_fills_chart_and_mi_clear_llm_pointing_at_the_page(
    batch_emulator, tmp_path, fixture_dir
):
    emu = batch_emulator
    assert run_cli(*run_args(emu, tmp_path, fixture_dir, "--limit", "8"), env=env()).returncode == 0
    page = tmp_path / "page.html"
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    argv = ["report", "ans-model", *jobs, "-o", str(page), "--json", str(tmp_path / "p.json")]
    proc = run_cli(*argv, "--checklist", "chart", "--checklist", "mi-clear-llm")
    assert proc.returncode == 0, proc.stderr
    html = page.read_text()
    ids = _ids(html)
    status = json.loads(run_cli("status", "ans-model", *jobs, "--json").stdout)
    for name, labels in (("chart", CHART_LABELS), ("mi-clear-llm", ["1", "2", "3", "4", "5", "6"])):
        table = (tmp_path / f"page.{name}.csv").read_text()
        rows = list(csv.DictReader(io.StringIO(table)))
        assert list(rows[0]) == ["item", "status", "where", "text"]
        assert [r["item"] for r in rows] == labels
        for r in rows:
            assert r["status"] in ("answered", "not applicable", "not reported"), r
            assert r["text"], r  # every item says something, answered or why not
            if r["where"]:
                assert r["where"].startswith("#") and r["where"][1:] in ids, r
            if r["status"] == "answered":
                assert r["where"], r
        markdown = (tmp_path / f"page.{name}.md").read_text()
        assert markdown.count("\n| ") == len(labels) + 1  # the header and a row an item
        assert f"id='checklist-{name}'" in html
    chart = {
        r["item"]: r for r in csv.DictReader(io.StringIO((tmp_path / "page.chart.csv").read_text()))
    }
    # what the record says, said: the served model and the query span
    served = status["provenance"]["answers"]["served"]
    assert all(model in chart["3a"]["text"] for model in served)
    assert status["provenance"]["answers"]["first_query"] in chart["6b"]["text"]
    assert chart["1a"]["status"] == "not reported"  # the title is the authors'
    assert sum(r["status"] == "answered" for r in chart.values()) >= 17
    mi = (tmp_path / "page.mi-clear-llm.md").read_text()
    assert all(topic in mi for topic in MI_CLEAR)
    record = json.loads((tmp_path / "p.json").read_text())
    assert [r["item"] for r in record["checklists"]["chart"]] == CHART_LABELS


def test_a_results_file_page_points_only_at_sections_it_has(tmp_path):
    results = FIXTURE / "golden" / "full.jsonl"
    page = tmp_path / "ref.html"
    proc = run_cli(
        "report",
        str(results),
        "--dataset",
        str(FIXTURE / "dataset"),
        "-o",
        str(page),
        "--checklist",
        "chart",
    )
    assert proc.returncode == 0, proc.stderr
    ids = _ids(page.read_text())
    for r in csv.DictReader(io.StringIO((tmp_path / "ref.chart.csv").read_text())):
        if r["where"]:
            assert r["where"][1:] in ids, r
    assert "no run's journal" in (tmp_path / "ref.chart.csv").read_text()


def test_an_unknown_or_uncarried_checklist_is_one_line(tmp_path):
    results = FIXTURE / "golden" / "full.jsonl"
    base = [
        "report",
        str(results),
        "--dataset",
        str(FIXTURE / "dataset"),
        "-o",
        str(tmp_path / "x.html"),
    ]
    assert_one_line_error(run_cli(*base, "--checklist", "tripod-llm"), "tripod-llm", "not carried")
    assert_one_line_error(
        run_cli(*base, "--checklist", "consort"), "'consort'", "chart, mi-clear-llm"
    )
    assert not (tmp_path / "x.html").exists()  # refused before anything is written
