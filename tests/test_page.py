"""batchbench report: one self-contained HTML page, its numbers the summaries', safe."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
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
    assert page.external == [] and text.count("<svg") == 2
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
    # The failures are grouped by cause, with the judge reply that failed.
    second = [json.loads(x) for x in (jobs / "second" / "results.jsonl").read_text().splitlines()]
    failed = [r for r in second if "error" in r]
    assert failed and f"{len(failed)} × invalid judge JSON" in text
    assert text.count("class='failure'") == len(failed)
    assert "&lt;!--" in text  # a reply that opens an HTML comment stays text


def test_a_run_with_failed_cases_alone(batch_emulator_factory, tmp_path, fixture_dir):
    jobs = _two_runs(batch_emulator_factory, tmp_path, fixture_dir)
    out = tmp_path / "one.html"
    assert run_cli("report", "second", "-o", str(out), "--jobs-dir", str(jobs)).returncode == 0
    text = out.read_text()
    assert text.count("<svg") == 1 and "id='comparison'" not in text and "failed</h3>" in text


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


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_a_real_browser_renders_the_page_offline(batch_emulator_factory, tmp_path, fixture_dir):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs Debian's chromium; it is missing")
        pytest.skip("no chromium here (Debian's chromium package; CI installs it)")
    jobs = _two_runs(batch_emulator_factory, tmp_path, fixture_dir)
    page = tmp_path / "page.html"
    assert (
        run_cli(
            "report", "first", "second", "-o", str(page), "--jobs-dir", str(jobs), "--allow-partial"
        ).returncode
        == 0
    )
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,1600",
    ]
    offline = ["unshare", "-n"] if os.geteuid() == 0 and shutil.which("unshare") else []
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*offline, browser, *flags, f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    dom = subprocess.run(
        [*offline, browser, *flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "<svg" in dom and "Leaderboard" in dom  # rendered, figures included
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] > 500 and pixels.std() > 0.05  # not a blank page
    assert Path(shot).stat().st_size > 20_000
