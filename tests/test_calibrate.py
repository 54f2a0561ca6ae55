"""Calibrating the judge against physicians, through the CLI, against plain oracles.

A run of the fixture dataset on the emulator is labelled by made-up physicians (the
judge's own verdicts with some flipped, by a rule written here); the expected numbers
come from the reference scoring of ``support/reference.py`` and the PPI++ formulas of
``support/ppi.py`` (plain ``statistics``), never from batchbench's own output.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections import defaultdict
from pathlib import Path

import pytest
from support import ppi, reference
from support.browser import Browser, chromium
from support.cli import assert_one_line_error, run_cli
from support.labelling import graded as _graded
from support.labelling import label as _label
from support.labelling import sheet as _sheet
from support.labelling import write_sheet as _write
from support.runs import run_args, tool_neutral

from batchbench.bench.dataset import load_dataset
from batchbench.emulator.model import default_content


def test_the_sheet_is_blind_balanced_and_reproducible(batch_emulator, tmp_path, fixture_dir):
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "a.csv", cases=20, seed=5)
    _, again = _sheet(jobs, tmp_path / "b.csv", cases=20, seed=5)
    _, other = _sheet(jobs, tmp_path / "c.csv", cases=20, seed=6)
    assert rows == again and {r["case_id"] for r in rows} != {r["case_id"] for r in other}
    assert "seed 5" in note and "20 cases over 10 benchmarks" in note
    cases = {r["case_id"]: r["benchmark"] for r in rows}
    per = defaultdict(int)
    for benchmark in cases.values():
        per[benchmark] += 1
    assert sorted(per.values()) == [2] * 10  # 20 cases, 10 benchmarks: two each
    ds = load_dataset(fixture_dir).by_id()
    for case_id in cases:  # every rubric item of every drawn case, once, in rubric order
        items = [r["item_id"] for r in rows if r["case_id"] == case_id]
        assert items == [it["item_id"] for it in ds[case_id]["rubric_items"]]
    assert all(r["verdict"] == "" and r["rater"] == "" for r in rows)
    text = (tmp_path / "a.csv").read_text()
    assert "matched" not in text and "decisions" not in text  # the judge's verdicts: never


def test_the_corrected_score_is_the_formulas_and_the_agreement_counts_are_right(
    batch_emulator, tmp_path, fixture_dir
):
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=30)
    labels = _label(rows, judged, ["dr_a", "dr_b"], rate=0.4)
    _write(tmp_path / "labels.csv", note, labels)
    proc = run_cli(
        "calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), "--json", *jobs
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    ds = load_dataset(fixture_dir).by_id()
    # Y: the mean of the two raters' case scores, by the reference's scoring.
    by = defaultdict(lambda: defaultdict(set))
    for label in labels:
        by[label["case_id"]][label["rater"]] |= (
            {label["item_id"]} if label["verdict"] == "1" else set()
        )
        by[label["case_id"]][label["rater"]] |= set()
    y = {
        c: sum(reference.score_case(ds[c], m)[0] for m in r.values()) / len(r)
        for c, r in by.items()
    }
    for name, found in got["benchmarks"].items():
        mine = [c for c, r in judged.items() if r["benchmark"] == name and "score" in r]
        lab = [c for c in mine if c in y]
        theta, se, lam, rho2 = ppi.corrected(
            [y[c] for c in lab],
            [judged[c]["score"] for c in lab],
            [judged[c]["score"] for c in mine if c not in y],
        )
        k = found["corrected"]
        assert k["n"] == len(lab) and k["N"] == len(mine) - len(lab)
        assert k["estimate"] == pytest.approx(theta, rel=1e-12, abs=1e-15)
        assert k["se"] == pytest.approx(se, rel=1e-12, abs=1e-15)
        assert k["lam"] == pytest.approx(lam, rel=1e-12, abs=1e-15)
        assert (k["rho2"] is None) == (rho2 is None)
        if rho2 is not None:
            assert k["rho2"] == pytest.approx(rho2, rel=1e-9)
        assert k["small_n"] is (len(lab) < 20)
        assert found["physicians"]["mean"] == pytest.approx(sum(y[c] for c in lab) / len(lab))
        # sensitivity and specificity, from the pairs counted here
        pairs = [
            (
                {d["item_id"]: d["matched"] for d in judged[x["case_id"]]["decisions"]}[
                    x["item_id"]
                ],
                x["verdict"] == "1",
            )
            for x in labels
            if x["benchmark"] == name
        ]
        positives = [j for j, p in pairs if p]
        negatives = [j for j, p in pairs if not p]
        if positives:
            assert found["agreement"]["sensitivity"] == pytest.approx(
                sum(positives) / len(positives)
            )
        if negatives:
            spec = sum(not j for j in negatives) / len(negatives)
            assert found["agreement"]["specificity"] == pytest.approx(spec)
    thetas = [b["corrected"]["estimate"] for b in got["benchmarks"].values()]
    ses = [b["corrected"]["se"] for b in got["benchmarks"].values()]
    overall = got["overall"]["corrected"]
    assert overall["estimate"] == pytest.approx(sum(thetas) / len(thetas), rel=1e-12)
    assert overall["se"] == pytest.approx(sum(s**2 for s in ses) ** 0.5 / len(ses), rel=1e-12)
    # the judge says met where physicians do not: its score sits above the physicians'
    assert got["overall"]["physicians"] < got["overall"]["judge"]["mean"]
    assert got["between_raters"]["items"] == len(rows)
    text = run_cli("calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *jobs)
    assert "corrected (PPI++)" in text.stdout and "fewer than 20 labelled cases" in text.stdout
    page = tmp_path / "page.html"
    argv = ["report", "ans-model", "-o", str(page), "--labels", str(tmp_path / "labels.csv")]
    assert run_cli(*argv, *jobs).returncode == 0
    html = page.read_text()
    assert "The judge against physicians: ans-model" in html
    assert f"{overall['estimate']:.3f}" in html


def test_the_plan_says_how_many_labels_a_width_needs(batch_emulator, tmp_path, fixture_dir):
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=30)
    labels = _label(rows, judged, ["dr_a"], rate=0.3)
    _write(tmp_path / "pilot.csv", note, labels)
    argv = ["calibrate", "ans-model", "--labels", str(tmp_path / "pilot.csv"), "--plan"]
    proc = run_cli(*argv, "--width", "0.15", "--json", *jobs)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)["benchmarks"]
    ds = load_dataset(fixture_dir).by_id()
    y = {}
    for case_id in {x["case_id"] for x in labels}:
        met = {x["item_id"] for x in labels if x["case_id"] == case_id and x["verdict"] == "1"}
        y[case_id] = reference.score_case(ds[case_id], met)[0]
    for name, found in got.items():
        mine = [c for c, r in judged.items() if r["benchmark"] == name and "score" in r]
        lab = [c for c in mine if c in y]
        expected = (
            ppi.needed(
                [y[c] for c in lab],
                [judged[c]["score"] for c in lab],
                [judged[c]["score"] for c in mine],
                0.15,
            )
            if len(lab) > 1
            else None
        )
        assert found["needed"] == expected, name
    assert_one_line_error(run_cli(*argv, *jobs), "--width")


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"case_id": "no-such-case"}, "is not a case of run"),
        ({"item_id": "no-such-item"}, "is not in case"),
        ({"verdict": "yes"}, "is not 0 (not met), 1 (met) or unsure"),
        ({"rater": ""}, "without a rater"),
    ],
)
def test_a_bad_label_is_one_line_naming_the_file_and_line(
    change, fragment, batch_emulator, tmp_path, fixture_dir
):
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=10)
    labels = _label(rows, judged, ["dr_a"], rate=0.2)
    labels[3] = {**labels[3], **change}
    _write(tmp_path / "labels.csv", note, labels)
    with (tmp_path / "labels.csv").open(newline="") as fh:  # the line labels[3] starts on,
        reader = csv.reader(fh)  # as Python's csv module counts lines (an answer's count)
        for _ in range(4):  # the header, labels[0..2]
            next(reader)
        line = reader.line_num + 1
    proc = run_cli("calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *jobs)
    assert_one_line_error(proc, f"{tmp_path / 'labels.csv'}: line {line}", fragment)


def test_the_html_form_saves_the_same_csv_in_a_real_browser(batch_emulator, tmp_path, fixture_dir):
    binary = chromium()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs Debian's chromium; it is missing")
        pytest.skip("no chromium here (apt install chromium)")
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    _, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=10)
    page = tmp_path / "sheet.html"
    assert (
        run_cli(
            "calibrate",
            "sheet",
            "ans-model",
            "--cases",
            "10",
            "--seed",
            "5",
            "-o",
            str(page),
            *jobs,
        ).returncode
        == 0
    )
    with Browser(binary, tmp_path / "profile") as chrome:
        chrome.open(page.as_uri())
        assert "matched" not in chrome.evaluate("document.body.innerHTML")
        chrome.evaluate("document.getElementById('rater').value = 'dr_form'")
        # every item met, except the odd ones
        chrome.evaluate(
            "document.querySelectorAll('tbody tr').forEach((tr, n) =>"
            " tr.querySelectorAll('input')[n % 2].click())"
        )
        saved = chrome.evaluate("csvText()")
        chrome.evaluate(
            "URL.createObjectURL = () => 'blob:x'; HTMLAnchorElement.prototype.click = () => {}"
        )
        # the button at the foot of the page saves as the one at the top, named by rater
        chrome.evaluate("document.querySelectorAll('button.save')[1].click()")
        said = chrome.evaluate("document.getElementById('said').textContent")
        assert said == "saved labels-dr_form.csv"
        # each failure mode (negative points) says that "met" means the harm happened
        harms = chrome.evaluate(
            "[...document.querySelectorAll('tbody tr')].map(tr => tr.classList.contains('harm')"
            " && tr.cells[0].textContent.includes('met means the answer does this harm'))"
        )
        assert harms == [float(r["points"].lstrip("'")) < 0 for r in rows] and any(harms)
    got = list(csv.DictReader(io.StringIO(saved)))
    assert [(r["case_id"], r["item_id"]) for r in got] == [
        (r["case_id"], r["item_id"]) for r in rows
    ]
    assert [r["verdict"] for r in got] == ["1" if n % 2 == 0 else "0" for n in range(len(got))]
    (tmp_path / "labels.csv").write_text(saved)
    proc = run_cli(
        "calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), "--json", *jobs
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["raters"] == ["dr_form"]


HOSTILE = [
    '=HYPERLINK("http://example.invalid","click")',
    "+1 mg\n-2 mg\n@risk",
    "Plan:\n- rest\n\n# Follow-up",  # the last line a markdown heading
    "<!--<script>alert(1)</script> & </script>",
    "'=already quoted\ttab",
]


def _hostile_run(batch_emulator_factory, tmp_path, fixture_dir):
    def responder(body):
        if body["model"] != "ans-model":
            return default_content(body)  # the default judge
        n = sum(map(ord, json.dumps(body["messages"]))) % len(HOSTILE)
        return {
            "status_code": 200,
            "body": {
                "choices": [{"index": 0, "message": {"role": "assistant", "content": HOSTILE[n]}}]
            },
        }

    emu = batch_emulator_factory(responder=responder)
    proc = run_cli(*run_args(emu, tmp_path, fixture_dir), env={"OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in (tmp_path / "jobs" / "ans-model" / "results.jsonl").open()]
    assert {r["answer"] for r in rows} == set(HOSTILE)  # every hostile answer is in the run
    return ["--jobs-dir", str(tmp_path / "jobs")], {r["case_id"]: r for r in rows}


def test_hostile_answers_neither_run_as_formulas_nor_drop_labels(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#37.9, 12: the CSV sheet holds no cell a spreadsheet would run (OWASP's rule),
    each reads back as the answer was, and an answer whose last line starts with "#"
    costs no label: every labelled case is counted."""
    jobs, judged = _hostile_run(batch_emulator_factory, tmp_path, fixture_dir)
    path = tmp_path / "sheet.csv"
    _sheet(jobs, path, cases=10)
    records = list(csv.reader(io.StringIO(path.read_text(), newline="")))[:-1]  # no note
    cells = [cell for record in records for cell in record]
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
    header = records[0]
    answers = {r[header.index("answer")] for r in records[1:]}
    # written behind one quote mark, as the rule says, from the run's own answers
    expected = {("'" + a if a[:1] in "=+-@\t\r" or a.startswith("'=") else a) for a in HOSTILE}
    answers.discard("")  # a case's answer is written on its first row only
    assert answers <= expected and any(a.startswith("'") for a in answers)
    rows = [dict(zip(header, r)) for r in records[1:]]
    labelled = _label(rows, judged, ["dr_a"], 0.2)
    out = io.StringIO()
    out.write("# an older sheet's note, above its header (still read)\n")
    writer = csv.DictWriter(out, fieldnames=list(labelled[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(labelled)
    (tmp_path / "labels.csv").write_text(out.getvalue())
    proc = run_cli(
        "calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), "--json", *jobs
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["labelled_cases"] == len({r["case_id"] for r in rows}) == 10


def test_calibrate_json_is_valid_json_when_a_figure_cannot_be_computed(
    batch_emulator, tmp_path, fixture_dir
):
    """#37.10: two labelled cases (their correlation is 1 by arithmetic) give no n_eff and
    no ρ², said as null with a reason, never NaN, Infinity or 9007199254740992."""
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    _, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=20)
    first = rows[0]["benchmark"]
    two = sorted({r["case_id"] for r in rows if r["benchmark"] == first})
    assert len(two) == 2  # two labelled cases of one benchmark, none of the others
    labelled = _label([r for r in rows if r["case_id"] in two], judged, ["dr_a"], 0.5)
    _write(tmp_path / "labels.csv", "# two cases", labelled)
    proc = run_cli(
        "calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), "--json", *jobs
    )
    assert proc.returncode == 0, proc.stderr
    assert "NaN" not in proc.stdout and "Infinity" not in proc.stdout
    found = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    for bench in found["benchmarks"].values():
        assert bench["corrected"]["effective_n"] is None
    text = run_cli("calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *jobs)
    assert text.returncode == 0 and "9007199254740992" not in text.stdout


def test_hostile_answers_keep_the_forms_save_button_in_a_real_browser(
    batch_emulator_factory, tmp_path, fixture_dir
):
    """#37.13: an answer holding ``<!--<script>`` inside the page's embedded data used to
    kill the script. The form still saves, and its CSV neutralises formulas as the CSV
    sheet does, reading back as the answers were."""
    binary = chromium()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs Debian's chromium; it is missing")
        pytest.skip("no chromium here (apt install chromium)")
    jobs, _ = _hostile_run(batch_emulator_factory, tmp_path, fixture_dir)
    page = tmp_path / "sheet.html"
    args = ("calibrate", "sheet", "ans-model", "--cases", "10", "--seed", "5", "-o")
    assert run_cli(*args, str(page), *jobs).returncode == 0
    assert run_cli(*args, str(tmp_path / "sheet.csv"), *jobs).returncode == 0
    with Browser(binary, tmp_path / "profile") as chrome:
        chrome.open(page.as_uri())
        chrome.evaluate("document.getElementById('rater').value = 'dr_form'")
        chrome.evaluate(
            "URL.createObjectURL = () => 'blob:x'; HTMLAnchorElement.prototype.click = () => {}"
        )
        chrome.evaluate("document.getElementById('save').click()")
        said = chrome.evaluate("document.getElementById('said').textContent")
        saved = chrome.evaluate("csvText()")
    sheet_text = (tmp_path / "sheet.csv").read_text()
    items = len(list(csv.reader(io.StringIO(sheet_text, newline="")))) - 2  # header, note
    assert said == f"saved labels-dr_form.csv ({items} items not yet labelled)"
    form = list(csv.reader(io.StringIO(saved, newline="")))
    sheet = list(csv.reader(io.StringIO((tmp_path / "sheet.csv").read_text(), newline="")))[:-1]
    header = sheet[0]
    assert form[0] == header
    skip = {header.index("rater"), header.index("verdict")}
    keep = [[c for i, c in enumerate(r) if i not in skip] for r in sheet[1:]]
    assert [[c for i, c in enumerate(r) if i not in skip] for r in form[1:]] == keep


def test_calibrate_gives_alpha_ac1_and_each_physicians_balanced_f1(
    batch_emulator, tmp_path, fixture_dir
):
    """#40: between the physicians, Krippendorff's α and Gwet's AC1 beside Fleiss' κ; per
    physician, the judge's balanced F1 against them and theirs against the others — each
    against an independent implementation over the same labels."""
    krippendorff = pytest.importorskip("krippendorff")
    from support import agreement

    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=20)
    labelled = _label(rows, judged, ["dr_a", "dr_b", "dr_c"], 0.25)
    some = sorted({r["case_id"] for r in rows})[::2]  # dr_c labels every other case only
    labelled = [r for r in labelled if r["rater"] != "dr_c" or r["case_id"] in some]
    _write(tmp_path / "labels.csv", note, labelled)
    proc = run_cli(
        "calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), "--json", *jobs
    )
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    items = sorted({(r["case_id"], r["item_id"]) for r in labelled})
    raters = ["dr_a", "dr_b", "dr_c"]
    said = {(r["rater"], r["case_id"], r["item_id"]): int(r["verdict"]) for r in labelled}
    table = [[said.get((rater, *item)) for item in items] for rater in raters]
    data = [[float("nan") if v is None else v for v in row] for row in table]
    between = found["between_raters"]
    assert between["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-12
    )
    assert between["gwet_ac1"] == pytest.approx(agreement.gwet_ac1(table), abs=1e-12)
    verdicts = {
        (c, d["item_id"]): int(d["matched"]) for c, r in judged.items() for d in r["decisions"]
    }
    for rater in raters:
        mine = [(i, said[(rater, *i)]) for i in items if (rater, *i) in said]
        judge = [verdicts[i] for i, _ in mine]
        truth = [v for _, v in mine]
        f1 = found["per_rater"][rater]
        assert f1["judge_f1"] == pytest.approx(agreement.balanced_f1(judge, truth))
        peers = [
            (said[(rater, *i)], said[(other, *i)])
            for i in items
            for other in raters
            if other != rater and (rater, *i) in said and (other, *i) in said
        ]
        assert f1["ceiling_f1"] == pytest.approx(
            agreement.balanced_f1([p for p, _ in peers], [t for _, t in peers])
        )
    text = run_cli("calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *jobs)
    assert "Krippendorff's α" in text.stdout and "Gwet's AC1" in text.stdout
    assert "balanced F1 against dr_c" in text.stdout


def test_labels_from_label_studio_and_prodigy_read_as_the_sheet_does(
    batch_emulator, tmp_path, fixture_dir
):
    """#40: the same physicians' verdicts given as our sheet, as Label Studio's JSON export
    of the tasks `calibrate sheet -o tasks.json` writes (the judge's verdicts pre-filled as
    predictions, to correct), and as Prodigy JSONL, calibrate to the same figures; a record
    that does not fit is one line naming the file, the record and the field."""
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=10)
    tasks_path = tmp_path / "tasks.json"
    args = ("calibrate", "sheet", "ans-model", "--cases", "10", "--seed", "5", "-o")
    assert run_cli(*args, str(tasks_path), *jobs).returncode == 0
    tasks = json.loads(tasks_path.read_text())
    assert [(t["data"]["case_id"], t["data"]["item_id"]) for t in tasks] == [
        (r["case_id"], r["item_id"]) for r in rows
    ]
    verdicts = {(c, d["item_id"]): d["matched"] for c, r in judged.items() for d in r["decisions"]}
    for task in tasks:  # the judge's verdict is a prediction, never in the task's data
        [prediction] = task["predictions"]
        [choice] = prediction["result"][0]["value"]["choices"]
        met = verdicts[(task["data"]["case_id"], task["data"]["item_id"])]
        assert choice == ("met" if met else "not met")
        assert "matched" not in json.dumps(task["data"]) and task["data"]["answer"]
    labelled = _label(rows, judged, ["dr_a", "dr_b"], 0.2)
    _write(tmp_path / "labels.csv", note, labelled)
    said = {(r["rater"], r["case_id"], r["item_id"]): r["verdict"] for r in labelled}
    for task in tasks:  # each physician corrects the predictions in Label Studio
        key = (task["data"]["case_id"], task["data"]["item_id"])
        task["annotations"] = [
            {
                "completed_by": {"id": n, "email": rater},
                "result": [
                    {
                        "from_name": "verdict",
                        "to_name": "answer",
                        "type": "choices",
                        "value": {"choices": ["met" if said[(rater, *key)] == "1" else "not met"]},
                    }
                ],
            }
            for n, rater in enumerate(["dr_a", "dr_b"], 1)
        ]
    (tmp_path / "export.json").write_text(json.dumps(tasks))
    with (tmp_path / "labels.jsonl").open("w") as fh:
        for (rater, case_id, item_id), verdict in said.items():
            answer = "accept" if verdict == "1" else "reject"
            task = {"text": "…", "meta": {"case_id": case_id, "item_id": item_id}}
            fh.write(json.dumps({**task, "answer": answer, "_annotator_id": rater}) + "\n")

    def figures(path):
        proc = run_cli("calibrate", "ans-model", "--labels", str(path), "--json", *jobs)
        assert proc.returncode == 0, proc.stderr
        return tool_neutral(json.loads(proc.stdout))

    # HealthBench's meta-eval: one line an item, the physicians' labels side by side; the
    # case by prompt_id and the item by its rubric text (as that dataset names them)
    texts = {
        (c["case_id"], i["item_id"]): i["text"]
        for c in load_dataset(fixture_dir).cases
        for i in c["rubric_items"]
    }
    with (tmp_path / "meta_eval.jsonl").open("w") as fh:
        for case_id, item_id in sorted({(c, i) for _, c, i in said}):
            raters = [r for r in ("dr_a", "dr_b") if (r, case_id, item_id) in said]
            fh.write(
                json.dumps(
                    {
                        "prompt_id": case_id,
                        "rubric": texts[(case_id, item_id)],
                        "binary_labels": [said[(r, case_id, item_id)] == "1" for r in raters],
                        "anonymized_physician_ids": raters,
                    }
                )
                + "\n"
            )

    sheet = figures(tmp_path / "labels.csv")
    assert figures(tmp_path / "export.json") == sheet
    assert figures(tmp_path / "labels.jsonl") == sheet
    assert figures(tmp_path / "meta_eval.jsonl") == sheet
    named = run_cli(
        "calibrate",
        "ans-model",
        "--labels",
        str(tmp_path / "labels.jsonl"),
        "--labels-format",
        "prodigy",
        "--json",
        *jobs,
    )
    assert tool_neutral(json.loads(named.stdout)) == sheet

    (tmp_path / "object.json").write_text('{"tasks": []}')  # not an export: said so
    proc = run_cli("calibrate", "ans-model", "--labels", str(tmp_path / "object.json"), *jobs)
    assert_one_line_error(proc, str(tmp_path / "object.json"), "a list of tasks")
    del tasks[3]["data"]["case_id"]
    (tmp_path / "bad.json").write_text(json.dumps(tasks))
    proc = run_cli("calibrate", "ans-model", "--labels", str(tmp_path / "bad.json"), *jobs)
    assert_one_line_error(proc, f"{tmp_path / 'bad.json'}: task 4", "'case_id'")
    lines = (tmp_path / "labels.jsonl").read_text().splitlines()
    lines[2] = (
        lines[2]
        .replace('"answer": "accept"', '"answer": "maybe"')
        .replace('"answer": "reject"', '"answer": "maybe"')
    )
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    proc = run_cli("calibrate", "ans-model", "--labels", str(tmp_path / "bad.jsonl"), *jobs)
    assert_one_line_error(proc, f"{tmp_path / 'bad.jsonl'}: line 3", "'maybe'")


def test_the_guides_label_studio_interface_is_the_one_the_tasks_are_made_for():
    from batchbench.calibration.formats import LABEL_STUDIO_CONFIG

    guide = (Path(__file__).resolve().parents[1] / "docs" / "calibration.md").read_text()
    block = guide.split("```xml\n", 1)[1].split("```", 1)[0]
    assert "\n".join(line[2:] for line in block.rstrip().split("\n")) == LABEL_STUDIO_CONFIG


def test_a_benchmark_the_labels_move_beyond_its_interval_is_named(
    batch_emulator, tmp_path, fixture_dir
):
    """#40: physicians who disagree with a biased judge on one benchmark's cases move its
    corrected score by more than the interval's half-width: that benchmark is named, with
    both scores, by a rule re-derived here from the figures calibrate prints."""
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=30)
    labelled = _label(rows, judged, ["dr_a"], 0.6)  # a judge that says met far too often
    _write(tmp_path / "labels.csv", note, labelled)
    args = ("calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), *jobs)
    found = json.loads(run_cli(*args, "--json").stdout)
    expected = []
    for name, b in found["benchmarks"].items():
        k = b["corrected"]
        if k["n"] and k["ci95"] is not None:
            half = (k["ci95"][1] - k["ci95"][0]) / 2
            if abs(k["estimate"] - b["judge"]["mean"]) > half:
                expected.append(name)
    assert expected, "the bias moves some benchmark beyond its interval"
    assert sorted(m["benchmark"] for m in found["moved"]) == sorted(expected)
    text = run_cli(*args).stdout
    assert "move the judge's score by more than" in text
    assert all(name in text.split("furthest first:")[1] for name in expected)


def _redcap_variable(item_id: str) -> str:
    """REDCap's rule for a field name, written here: lower case, a-z 0-9 _, 100 at most."""
    return "".join(
        c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in item_id.lower()
    )[:100]


def test_labels_from_a_redcap_export_read_as_the_sheet_does(batch_emulator, tmp_path, fixture_dir):
    """#40: the sheet's verdicts as a REDCap export (a record a case and rater, a column an
    item, REDCap's own columns and a comment beside them), by field name and by the data
    dictionary, calibrate to the sheet's figures; a value that is no verdict is one line."""
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=10)
    labelled = _label(rows, judged, ["dr_a", "dr_b"], 0.2)
    _write(tmp_path / "labels.csv", note, labelled)
    sheet = run_cli(
        "calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"), "--json", *jobs
    )
    assert sheet.returncode == 0, sheet.stderr
    items = list(dict.fromkeys(r["item_id"] for r in labelled))
    records: dict[tuple[str, str], dict[str, str]] = {}
    for r in labelled:
        records.setdefault((r["case_id"], r["rater"]), {})[r["item_id"]] = r["verdict"]

    def export(path: Path, name_of) -> None:
        header = ["record_id", "redcap_event_name", "case_id", "rater"]
        header += [name_of(i) for i in items] + ["reviewer_comment", "verdicts_complete"]
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            for n, ((case_id, rater), said) in enumerate(records.items(), 1):
                cells = [
                    "Yes" if said.get(i) == "1" else "No" if said.get(i) == "0" else ""
                    for i in items
                ]
                writer.writerow([n, "baseline_arm_1", case_id, rater, *cells, "ok", 2])

    export(tmp_path / "redcap.csv", _redcap_variable)
    by_name = run_cli(
        "calibrate", "ans-model", "--labels", str(tmp_path / "redcap.csv"), "--json", *jobs
    )
    assert by_name.returncode == 0, by_name.stderr
    assert tool_neutral(json.loads(by_name.stdout)) == tool_neutral(json.loads(sheet.stdout))
    fields = {item: f"item_{k}" for k, item in enumerate(items)}
    export(tmp_path / "redcap2.csv", fields.__getitem__)
    with (tmp_path / "dictionary.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            ["Variable / Field Name", "Form Name", "Section Header", "Field Type", "Field Label"]
        )
        writer.writerow(["record_id", "verdicts", "", "text", "Record ID"])
        for item, field in fields.items():
            writer.writerow([field, "verdicts", "", "yesno", f"[{item}] Is this item met?"])
    with_dictionary = run_cli(
        "calibrate",
        "ans-model",
        "--labels",
        str(tmp_path / "redcap2.csv"),
        "--labels",
        str(tmp_path / "dictionary.csv"),
        "--json",
        *jobs,
    )
    assert with_dictionary.returncode == 0, with_dictionary.stderr
    assert tool_neutral(json.loads(with_dictionary.stdout)) == tool_neutral(
        json.loads(sheet.stdout)
    )
    broken = (tmp_path / "redcap.csv").read_text().replace(",Yes,", ",Maybe,", 1)
    (tmp_path / "broken.csv").write_text(broken)
    proc = run_cli("calibrate", "ans-model", "--labels", str(tmp_path / "broken.csv"), *jobs)
    assert_one_line_error(proc, "broken.csv: line 2", "'Maybe' is no verdict")


def test_rogan_gladen_corrects_the_share_of_items_met_beside_ppi(
    batch_emulator, tmp_path, fixture_dir
):
    """#40: per benchmark, the judge's share of rubric items met and its Rogan–Gladen
    correction by the sensitivity and specificity the labels show, against the plain
    formula; the text names which assumption each estimate makes."""
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=30)
    labels = _label(rows, judged, ["dr_a", "dr_b"], rate=0.3)
    _write(tmp_path / "labels.csv", note, labels)
    argv = ("calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"))
    got = json.loads(run_cli(*argv, "--json", *jobs).stdout)
    checked = 0
    for name, found in got["benchmarks"].items():
        scored = [r for r in judged.values() if r["benchmark"] == name and "score" in r]
        met = sum(d["matched"] for r in scored for d in r["decisions"])
        items = sum(len(r["decisions"]) for r in scored)
        counts = defaultdict(int)
        for label in labels:
            row = judged[label["case_id"]]
            if row["benchmark"] != name or "score" not in row:
                continue
            judge = {d["item_id"]: d["matched"] for d in row["decisions"]}[label["item_id"]]
            counts[(judge, label["verdict"] == "1")] += 1
        pi, se = ppi.rogan_gladen(
            met,
            items,
            counts[(True, True)],
            counts[(False, True)],
            counts[(False, False)],
            counts[(True, False)],
        )
        rg = found["rogan_gladen"]
        assert rg["items"] == items and rg["apparent"] == pytest.approx(met / items)
        if pi is None:
            assert rg["estimate"] is None
            continue
        assert rg["estimate"] == pytest.approx(pi, rel=1e-12, abs=1e-15)
        assert rg["se"] == pytest.approx(se, rel=1e-12, abs=1e-15)
        checked += 1
    assert checked
    text = " ".join(run_cli(*argv, *jobs).stdout.split())
    assert "Rogan–Gladen" in text and "assumptions: PPI++ needs" in text


def test_agreement_by_kind_of_rubric_item(batch_emulator, tmp_path, fixture_dir):
    """#40: the judge against the physicians on criteria (points > 0) and on failure modes
    (points < 0) apart — where a judge is most likely broken — counted by hand here."""
    jobs, judged = _graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = _sheet(jobs, tmp_path / "sheet.csv", cases=30)
    labels = _label(rows, judged, ["dr_a"], rate=0.3)
    _write(tmp_path / "labels.csv", note, labels)
    argv = ("calibrate", "ans-model", "--labels", str(tmp_path / "labels.csv"))
    got = json.loads(run_cli(*argv, "--json", *jobs).stdout)["item_kinds"]
    ds = load_dataset(fixture_dir).by_id()
    counts: dict[str, dict] = defaultdict(lambda: defaultdict(int))
    cases: dict[str, set] = defaultdict(set)
    for label in labels:
        row = judged[label["case_id"]]
        if "score" not in row:
            continue
        points = {i["item_id"]: i["points"] for i in ds[label["case_id"]]["rubric_items"]}
        kind = "failure modes" if points[label["item_id"]] < 0 else "criteria"
        judge = {d["item_id"]: d["matched"] for d in row["decisions"]}[label["item_id"]]
        counts[kind][(judge, label["verdict"] == "1")] += 1
        cases[kind].add(label["case_id"])
    assert set(got) == set(counts) and "failure modes" in got
    for kind, c in counts.items():
        a = got[kind]["agreement"]
        positives = c[(True, True)] + c[(False, True)]
        negatives = c[(False, False)] + c[(True, False)]
        assert a["n"] == positives + negatives and got[kind]["cases"] == len(cases[kind])
        if positives:
            assert a["sensitivity"] == pytest.approx(c[(True, True)] / positives)
        if negatives:
            assert a["specificity"] == pytest.approx(c[(False, False)] / negatives)
    assert "by kind of rubric item: criteria" in " ".join(run_cli(*argv, *jobs).stdout.split())


def test_the_sheet_format_may_be_named(batch_emulator, tmp_path, fixture_dir):
    """#40: `calibrate sheet … --format label-studio` writes the tasks whatever -o's suffix;
    a format that is none of the sheet's is one line."""
    jobs, _ = _graded(batch_emulator, tmp_path, fixture_dir)
    args = ("calibrate", "sheet", "ans-model", "--cases", "10", "-o")
    out = tmp_path / "tasks.txt"
    proc = run_cli(*args, str(out), "--format", "label-studio", *jobs)
    assert proc.returncode == 0, proc.stderr
    tasks = json.loads(out.read_text())
    assert tasks and all("predictions" in t and "case_id" in t["data"] for t in tasks)
    bad = run_cli(*args, str(tmp_path / "x.csv"), "--format", "xlsx", *jobs)
    assert_one_line_error(bad, "--format 'xlsx'", "label-studio")


def test_calibrate_given_a_runs_results_file_says_how_to_name_the_run(
    batch_emulator, tmp_path, fixture_dir
):
    """#61.11: `calibrate results.jsonl` said only that it reads runs: it says which run
    the file is, and the command that names it (exit 2: the user's input)."""
    from support.cli import assert_one_line_error
    from support.runs import env, run_args

    made = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"), env=env())
    assert made.returncode == 0, made.stderr
    labels = tmp_path / "dr_a.csv"
    labels.write_text("run,case_id,item_id,verdict,rater\n")
    rows = tmp_path / "jobs" / "ans-model" / "results.jsonl"
    proc = run_cli("calibrate", str(rows), "--labels", str(labels))
    assert_one_line_error(
        proc, "not a results file", f"calibrate ans-model --jobs-dir {tmp_path / 'jobs'}"
    )
    assert proc.returncode == 2
