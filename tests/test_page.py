"""batchbench report: one self-contained HTML page, its numbers the summaries', safe."""

from __future__ import annotations

import json
import os
import re
import shutil
from html.parser import HTMLParser

import pytest
from support.browser import Browser, chromium
from support.cli import FIXTURE, run_cli
from support.runs import env, run_args

HOSTILE = '</script><script>alert(1)</script><b>bold</b> & "quotes" <!--'


class Page(HTMLParser):
    """Collects what the tests look at: data-value cells by table row, scripts, links."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.rows: dict[str, list[float]] = {}
        self.scripts: list[str] = []
        self.external: list[str] = []
        self.tags: list[str] = []
        self._row: str | None = None
        self._in_script = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if tag == "tr":
            self._row = a.get("data-run") or a.get("data-benchmark")
            if self._row:
                self.rows.setdefault(self._row, [])
        if tag == "td" and "data-value" in a and self._row:
            self.rows[self._row].append(float(a["data-value"]))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")
        for key in ("src", "href"):
            if a.get(key, "").startswith(("http:", "https:", "//")):
                self.external.append(a[key])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def _two_runs(batch_emulator_factory, tmp_path, fixture_dir):
    """Two runs on the fixture: one answers with hostile markup, one fails some judges."""

    def responder(body):
        user = body["messages"][-1]["content"]
        if body["model"] == "judge-model":
            import re

            ids = re.findall(r"^\[([^\]]+)\] points=", user, re.M)
            if "second" in user and ids[0][0] in "0123":
                return "not json " + HOSTILE
            return json.dumps({"decisions": [{"item_id": i, "matched": True} for i in ids]})
        return ("second " if body["model"] == "second" else "") + HOSTILE

    emu = batch_emulator_factory(latency=0.05, responder=responder, models=["first", "second"])
    for model in ("first", "second"):
        args = run_args(emu, tmp_path, fixture_dir, "--limit", "12", "--max-attempts", "1")
        args[args.index("--answer-model") + 1] = model
        args[args.index("--run") + 1] = model
        assert run_cli(*args, env=env()).returncode in (0, 1)
    return tmp_path / "jobs"


def test_the_page_of_a_comparison_shows_the_summaries_numbers_and_escapes_content(
    batch_emulator_factory, tmp_path, fixture_dir
):
    jobs = _two_runs(batch_emulator_factory, tmp_path, fixture_dir)
    out = tmp_path / "page.html"
    proc = run_cli(
        "report", "first", "second", "-o", str(out), "--jobs-dir", str(jobs), "--allow-partial"
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    page = Page(text)
    # Self-contained: nothing fetched from anywhere, figures inline.
    flows = text.count("class='flow'")  # a flow-of-cases diagram a run, beside the figures
    assert page.external == [] and text.count("<svg") - flows == 2 and flows == 2
    # Escaped: the hostile answer and judge reply show as text, no script of theirs runs.
    assert len(page.scripts) == 1 and "alert(1)" not in page.scripts[0]
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;bold" in text
    assert "<b>bold</b>" not in text
    # The numbers are the summaries' own, exactly.
    for name in ("first", "second"):
        summary = json.loads((jobs / name / "results.summary.json").read_text())
        assert page.rows[name] == [summary["overall_macro_mean"], *summary["overall_ci95"]]
    per_benchmark = {}
    for name in ("first", "second"):
        summary = json.loads((jobs / name / "results.summary.json").read_text())
        for bench, v in summary["benchmarks"].items():
            per_benchmark.setdefault(bench, []).extend([v["mean"], *v["ci95"]])
    for bench, values in per_benchmark.items():
        assert page.rows[bench] == values
    # ... closed by the overall macro row, the same figures as the leaderboard's
    assert page.rows["overall (macro)"] == page.rows["first"] + page.rows["second"]
    # A verdict is green where it is good for the answer: a failure mode (negative
    # points) met is a harm that happened, red. This judge says every item is met.
    marks = re.findall(
        r"<td class='n'>([+-][\d.]+)</td><td>.*?</td><td class='(yes|no)'[^>]*>([^<]*)<", text
    )
    assert marks and {p[0] for p, *_ in marks} == {"+", "-"}
    for points, colour, mark in marks:
        harm = float(points) < 0
        assert colour == ("no" if harm else "yes") and mark == ("✓ harm" if harm else "✓")
    # The failures are grouped by cause, with the judge reply that failed.
    second = [json.loads(x) for x in (jobs / "second" / "results.jsonl").read_text().splitlines()]
    failed = [r for r in second if "error" in r]
    assert failed and f"{len(failed)} × invalid judge JSON" in text
    # The leaderboard flags the run whose mean is over fewer cases.
    assert f"<span class='failed'>{len(failed)} failed</span>" in text
    assert "not like for like" in text
    assert text.count("class='failure'") == len(failed)
    assert "&lt;!--" in text  # a reply that opens an HTML comment stays text


def test_a_run_with_failed_cases_alone(batch_emulator_factory, tmp_path, fixture_dir):
    jobs = _two_runs(batch_emulator_factory, tmp_path, fixture_dir)
    out = tmp_path / "one.html"
    assert run_cli("report", "second", "-o", str(out), "--jobs-dir", str(jobs)).returncode == 0
    text = out.read_text()
    flows = text.count("class='flow'")
    assert text.count("<svg") - flows == 1 and flows == 1
    assert "id='comparison'" not in text and "failed</h3>" in text


def test_a_reference_results_file_with_its_dataset(tmp_path):
    results = tmp_path / "full.jsonl"
    shutil.copy(FIXTURE / "golden" / "full.jsonl", results)
    out = tmp_path / "ref.html"
    proc = run_cli("report", str(results), "--dataset", str(FIXTURE / "dataset"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((FIXTURE / "golden" / "full.summary.json").read_text())
    assert Page(out.read_text()).rows["full"] == [
        summary["overall_macro_mean"],
        *summary["overall_ci95"],
    ]


def _verdicts(row: dict) -> dict[str, bool]:
    return {d["item_id"]: d["matched"] for d in row.get("decisions", [])}


def test_a_real_browser_renders_the_page_and_its_filters_work(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """In Chromium, offline: the figures render, and picking a benchmark and ticking "only
    where the runs disagree" shows exactly the cases the dataset and the rows say."""
    browser = chromium()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs Debian's chromium; it is missing")
        pytest.skip("no chromium here (apt install chromium)")
    jobs = _two_runs(batch_emulator_factory, tmp_path, fixture_dir)
    page = tmp_path / "page.html"
    argv = ["report", "first", "second", "-o", str(page), "--jobs-dir", str(jobs)]
    assert run_cli(*argv, "--allow-partial").returncode == 0
    # What the filters must show, from the dataset's files and the runs' rows.
    benchmark_of, rubric = {}, {}
    for path in (fixture_dir / "data").glob("*/cases/*.json"):
        case = json.loads(path.read_text())
        benchmark_of[case["case_id"]] = case["benchmark"]
        rubric[case["case_id"]] = [item["item_id"] for item in case["rubric_items"]]
    rows = {}
    for name in ("first", "second"):
        for line in (jobs / name / "results.jsonl").read_text().splitlines():
            row = json.loads(line)
            rows.setdefault(row["case_id"], {})[name] = row
    shown = sorted(rows)
    disagree = {
        cid
        for cid in shown
        if any(
            _verdicts(rows[cid].get("first", {})).get(item)
            != _verdicts(rows[cid].get("second", {})).get(item)
            for item in rubric[cid]
        )
    }
    cases_of: dict[str, set[str]] = {}
    for cid in shown:
        cases_of.setdefault(benchmark_of[cid], set()).add(cid)
    # A benchmark with cases on both sides of the box, when there is one.
    chosen = max(
        sorted(cases_of), key=lambda b: (bool(cases_of[b] - disagree), len(cases_of[b] & disagree))
    )
    in_chosen = cases_of[chosen]
    assert in_chosen & disagree and in_chosen != set(shown) != disagree  # filters that can fail

    visible = (
        "[...document.querySelectorAll('details.case')]"
        ".filter(e => e.offsetParent !== null).map(e => e.dataset.case)"
    )
    with Browser(browser, tmp_path / "profile") as chrome:
        chrome.open(page.as_uri())
        assert chrome.evaluate("document.querySelectorAll('svg:not(.flow)').length") == 2
        assert chrome.evaluate("document.querySelectorAll('svg.flow').length") == 2
        assert "Leaderboard" in chrome.evaluate("document.body.innerText")
        assert sorted(chrome.evaluate(visible)) == shown
        # Pick a benchmark, as a user's choice in the list does (the input event).
        chrome.evaluate(
            f"var s = document.getElementById('bench'); s.value = {json.dumps(chosen)};"
            " s.dispatchEvent(new Event('input', {bubbles: true}))"
        )
        assert sorted(chrome.evaluate(visible)) == sorted(in_chosen)
        chrome.evaluate("document.getElementById('dis').click()")  # tick the box
        assert sorted(chrome.evaluate(visible)) == sorted(in_chosen & disagree)
        chrome.evaluate(
            "var s = document.getElementById('bench'); s.value = '';"
            " s.dispatchEvent(new Event('input', {bubbles: true}))"
        )
        assert sorted(chrome.evaluate(visible)) == sorted(disagree)
        shot = chrome.call("Page.captureScreenshot", {"format": "png"})["data"]
        # On a phone (390 CSS pixels wide): the page is laid out at the phone's width and
        # nothing makes it wider (wide tables scroll inside themselves).
        chrome.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": 390, "height": 844, "deviceScaleFactor": 3, "mobile": True},
        )
        wide = "[document.documentElement.scrollWidth, window.innerWidth]"
        assert chrome.evaluate(wide) == [390, 390]
    import base64
    import io

    import matplotlib.image

    png = base64.b64decode(shot)
    pixels = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert pixels.shape[0] > 500 and pixels.std() > 0.05  # not a blank page


def test_a_page_of_many_cases_shows_the_worst_and_says_how_it_was_thinned(tmp_path, monkeypatch):
    """#38: past CASES_SHOWN cases the page details only the worst ones (lowest score,
    from the results file itself here) and says so; the summary numbers stay whole."""
    import re

    from batchbench.views import page_cases

    monkeypatch.setattr(page_cases, "CASES_SHOWN", 7)
    results = tmp_path / "full.jsonl"
    shutil.copy(FIXTURE / "golden" / "full.jsonl", results)
    out = tmp_path / "ref.html"
    proc = run_cli("report", str(results), "--dataset", str(FIXTURE / "dataset"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    scored: dict[str, float] = {}  # the last row of each case: its score, -1 when failed
    for line in results.read_text().splitlines():
        row = json.loads(line)
        scored[row["case_id"]] = row.get("score", -1.0)
    shown = re.findall(r"<details class='case'[^>]* data-case='([^']+)'", text)
    assert len(shown) == 7
    assert f"Showing the 7 worst of {len(scored):,} cases" in text
    assert sorted(scored[c] for c in shown) == sorted(scored.values())[:7]
