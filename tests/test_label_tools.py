"""#45.6: labels from the tools physicians use, read as the tools write them — never a
figure that differs from the same verdicts given as batchbench's sheet.

Label Studio's three exports are files its own converter wrote (``fixtures/label-tools``);
Prodigy's choice view follows its recipe (explosion/prodigy-recipes ``other/choice.py``:
``options``, the chosen ids in ``accept``); REDCap's exports follow its documented
shapes (a raw or a labels header; a data dictionary as its UI downloads it or its API
exports it, labels in rich text or not). The expected figures are always the sheet's,
built here from the verdicts by plain code.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

from support.cli import FIXTURE, assert_one_line_error, run_cli
from support.labelling import graded, label, sheet
from support.runs import tool_neutral

TOOLS = FIXTURE / "label-tools"


def _bracketed(text: str) -> str:
    """The ``[item id]`` a field label starts with."""
    found = re.match(r"\[([^\]]+)\]", text)
    assert found is not None, text
    return found.group(1)


def _figures(jobs, *paths: Path, fmt: str | None = None) -> dict:
    labels = [x for p in paths for x in ("--labels", str(p))]
    more = ["--labels-format", fmt] if fmt else []
    proc = run_cli("calibrate", "ans-model", *labels, *more, "--json", *jobs)
    assert proc.returncode == 0, proc.stderr
    return tool_neutral(json.loads(proc.stdout))


def _as_sheet(path: Path, verdicts: dict[tuple[str, str, str], str]) -> Path:
    """The verdicts as batchbench's sheet: run, case, item, rater, verdict."""
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["run", "case_id", "item_id", "rater", "verdict"])
        for (case_id, item_id, rater), verdict in sorted(verdicts.items()):
            writer.writerow(["ans-model", case_id, item_id, rater, verdict])
    return path


def _label_studio_verdicts() -> dict[tuple[str, str, str], str]:
    """The full export's annotations, read by hand: (case, item, rater email) → 1/0."""
    out = {}
    for task in json.loads((TOOLS / "label-studio.json").read_text()):
        for annotation in task["annotations"]:
            if annotation["was_cancelled"]:
                continue
            [choice] = annotation["result"][0]["value"]["choices"]
            key = (task["data"]["case_id"], task["data"]["item_id"])
            out[(*key, annotation["completed_by"]["email"])] = "1" if choice == "met" else "0"
    return out


def test_label_studios_json_json_min_and_csv_exports_read_as_the_sheet(
    batch_emulator, tmp_path, fixture_dir
):
    jobs, _ = graded(batch_emulator, tmp_path, fixture_dir)
    verdicts = _label_studio_verdicts()
    assert len(verdicts) > 40
    expected = _figures(jobs, _as_sheet(tmp_path / "sheet.csv", verdicts))
    for name in ("label-studio.json", "label-studio-min.json", "label-studio.csv"):
        assert _figures(jobs, TOOLS / name) == expected, name
        named = _figures(jobs, TOOLS / name, fmt="label-studio")
        assert named == expected, name


def test_a_label_studio_record_that_does_not_fit_is_one_line(batch_emulator, tmp_path, fixture_dir):
    jobs, _ = graded(batch_emulator, tmp_path, fixture_dir)
    tasks = json.loads((TOOLS / "label-studio.json").read_text())
    tasks[2]["annotations"][0] = "met"  # an annotation that is not an object: never skipped
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(tasks))
    proc = run_cli("calibrate", "ans-model", "--labels", str(bad), *jobs)
    assert_one_line_error(proc, f"{bad}: task 3, annotation 1", "an annotation is an object")
    records = json.loads((TOOLS / "label-studio-min.json").read_text())
    records[4]["verdict"] = "maybe"
    bad.write_text(json.dumps(records))
    proc = run_cli("calibrate", "ans-model", "--labels", str(bad), *jobs)
    assert_one_line_error(proc, f"{bad}: record 5", "'maybe'")
    lines = (TOOLS / "label-studio.csv").read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.csv"
    cut.write_text("".join(lines[:7]) + lines[7][: len(lines[7]) // 3] + "\n")
    proc = run_cli("calibrate", "ans-model", "--labels", str(cut), *jobs)
    assert_one_line_error(proc, str(cut), "cells where the header has")


def test_prodigys_choice_view_reads_as_the_sheet(batch_emulator, tmp_path, fixture_dir):
    """The audit's case: options met / not met, the choice in ``accept``, ``answer``
    always accept — read as 'every item met' it gave the physicians' score 0.708 where
    it was 0.360. Here it gives the sheet's figures; a file named .json is still Prodigy's
    JSONL (by its content)."""
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    _, rows = sheet(jobs, tmp_path / "s.csv", cases=10)
    labelled = label(rows, judged, ["dr_a", "dr_b"], 0.4)
    verdicts = {(r["case_id"], r["item_id"], r["rater"]): r["verdict"] for r in labelled}
    expected = _figures(jobs, _as_sheet(tmp_path / "sheet.csv", verdicts))
    options = [{"id": "met", "text": "met"}, {"id": "not met", "text": "not met"}]
    numbered = [{"id": 1, "text": "met"}, {"id": 2, "text": "not met"}]
    out = tmp_path / "choice.jsonl"
    with out.open("w") as fh:
        for n, ((case_id, item_id, rater), verdict) in enumerate(sorted(verdicts.items())):
            by_id = n % 2  # both ways Prodigy's options are written: ids as text, or numbers
            task = {
                "text": "…",
                "meta": {"case_id": case_id, "item_id": item_id},
                "options": numbered if by_id else options,
                "accept": [
                    (1 if verdict == "1" else 2)
                    if by_id
                    else ("met" if verdict == "1" else "not met")
                ],
                "answer": "accept",
                "_annotator_id": f"session-{rater}",
                "_view_id": "choice",
            }
            fh.write(json.dumps(task) + "\n")
    got = _figures(jobs, out)
    renamed = {f"session-{r}" for r in ("dr_a", "dr_b")}
    assert set(got["per_rater"]) == renamed
    strip = lambda d: json.loads(json.dumps(d).replace("session-", ""))  # noqa: E731
    assert strip(got) == expected
    as_json = tmp_path / "choice.json"
    as_json.write_text(out.read_text())
    assert strip(_figures(jobs, as_json)) == expected


def _dictionary(jobs, tmp_path) -> tuple[Path, list[dict[str, str]]]:
    path = tmp_path / "dictionary.csv"
    args = ("calibrate", "sheet", "ans-model", "--cases", "10", "--seed", "5", "-o", str(path))
    proc = run_cli(*args, "--format", "redcap", *jobs)
    assert proc.returncode == 0, proc.stderr
    return path, list(csv.DictReader(io.StringIO(path.read_text())))


def test_the_redcap_dictionary_batchbench_writes_is_one_redcap_takes(
    batch_emulator, tmp_path, fixture_dir
):
    """REDCap's rules for a data dictionary, written out here: the record id first, field
    names ^[a-z][a-z0-9_]*$ of at most 100 characters and unique, field types REDCap
    has, yes/no items whose label starts with [ITEM_ID]; every item of the sheet once."""
    jobs, _ = graded(batch_emulator, tmp_path, fixture_dir)
    path, fields = _dictionary(jobs, tmp_path)
    _, rows = sheet(jobs, tmp_path / "s.csv", cases=10)
    assert fields[0]["Variable / Field Name"] == "record_id"
    names = [f["Variable / Field Name"] for f in fields]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]{0,99}", n) for n in names)
    assert {f["Field Type"] for f in fields} <= {"text", "descriptive", "yesno"}
    items = [f for f in fields if f["Field Type"] == "yesno"]
    labelled = [re.match(r"\[([^\]]+)\]", f["Field Label"]).group(1) for f in items]
    assert labelled == [r["item_id"] for r in rows]
    assert all(f["Form Name"] == "verdicts" for f in fields)
    assert all(
        re.fullmatch(
            r"\[run\] = '[^']+' and \[case_id\] = '[0-9a-f]+'",
            f["Branching Logic (Show field only if...)"],
        )
        for f in fields[4:]
    )


def _export(path: Path, fields: list[dict[str, str]], records: dict, *, labels: bool) -> None:
    """A REDCap CSV export of these records (case, rater → item id → 1/0): a raw one
    (variable names, 1/0) or a labels one (field labels as headers, Yes/No), the form's
    status column last, as REDCap writes them."""
    shown = [f for f in fields if f["Field Type"] != "descriptive"]
    item_of = {
        f["Variable / Field Name"]: _bracketed(f["Field Label"])
        for f in shown
        if f["Field Type"] == "yesno"
    }
    head = [f["Field Label"] if labels else f["Variable / Field Name"] for f in shown]
    head.append("Verdicts Complete?" if labels else "verdicts_complete")
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(head)
        for n, ((case_id, rater), said) in enumerate(records.items(), 1):
            cells = []
            for f in shown:
                name = f["Variable / Field Name"]
                value = {
                    "record_id": str(n),
                    "run": "ans-model",
                    "case_id": case_id,
                    "rater": rater,
                }.get(name, "")
                if name in item_of and item_of[name] in said:
                    met = said[item_of[name]] == "1"
                    value = ("Yes" if met else "No") if labels else ("1" if met else "0")
                cells.append(value)
            writer.writerow([*cells, "Complete" if labels else "2"])


def _api(path: Path, out: Path, rich: bool) -> Path:
    """The dictionary as REDCap's API exports it (field_name, field_label…), its labels in
    rich text where ``rich``."""
    heads = {
        "Variable / Field Name": "field_name",
        "Form Name": "form_name",
        "Section Header": "section_header",
        "Field Type": "field_type",
        "Field Label": "field_label",
        "Choices, Calculations, OR Slider Labels": "select_choices_or_calculations",
        "Field Note": "field_note",
        "Text Validation Type OR Show Slider Number": "text_validation_type_or_show_slider_number",
        "Text Validation Min": "text_validation_min",
        "Text Validation Max": "text_validation_max",
        "Identifier?": "identifier",
        "Branching Logic (Show field only if...)": "branching_logic",
        "Required Field?": "required_field",
        "Custom Alignment": "custom_alignment",
        "Question Number (surveys only)": "question_number",
        "Matrix Group Name": "matrix_group_name",
        "Matrix Ranking?": "matrix_ranking",
        "Field Annotation": "field_annotation",
    }
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(heads.values()))
        writer.writeheader()
        for row in rows:
            moved = {heads[k]: v for k, v in row.items()}
            if rich:
                label = html.escape(moved["field_label"], quote=False)
                moved["field_label"] = f'<div class="rich-text-field-label"><p>{label}</p></div>'
            writer.writerow(moved)
    return out


def test_redcap_exports_read_as_the_sheet(batch_emulator, tmp_path, fixture_dir):
    """The dictionary batchbench writes, a project made of it, its records exported raw
    and with labels, the dictionary as the UI or the API gives it (rich text too): every
    combination calibrates to the sheet's figures; a record cut short is refused."""
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    path, fields = _dictionary(jobs, tmp_path)
    _, rows = sheet(jobs, tmp_path / "s.csv", cases=10)
    labelled = label(rows, judged, ["dr_a", "dr_b"], 0.3)
    verdicts = {(r["case_id"], r["item_id"], r["rater"]): r["verdict"] for r in labelled}
    expected = _figures(jobs, _as_sheet(tmp_path / "sheet.csv", verdicts))
    records: dict[tuple[str, str], dict[str, str]] = {}
    for (case_id, item_id, rater), verdict in verdicts.items():
        records.setdefault((case_id, rater), {})[item_id] = verdict
    dictionaries = {
        "ui": path,
        "api": _api(path, tmp_path / "api.csv", rich=False),
        "rich": _api(path, tmp_path / "rich.csv", rich=True),
    }
    for labels in (False, True):
        export = tmp_path / f"export-{labels}.csv"
        _export(export, fields, records, labels=labels)
        for kind, dictionary in dictionaries.items():
            assert _figures(jobs, export, dictionary) == expected, (labels, kind)
    # A labels export heads each item with its [ITEM_ID]: read without the dictionary too.
    assert _figures(jobs, tmp_path / "export-True.csv") == expected
    # Cut mid-record (a download that stopped): refused, never read short.
    text = (tmp_path / "export-False.csv").read_text()
    cut = tmp_path / "cut.csv"
    cut.write_text(text[: text.index("\n", len(text) // 2) - 5] + "\n")
    proc = run_cli("calibrate", "ans-model", "--labels", str(cut), "--labels", str(path), *jobs)
    assert_one_line_error(proc, str(cut), "cut short")


def test_a_healthbench_line_without_its_physician_names_the_field(
    batch_emulator, tmp_path, fixture_dir
):
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    case_id, row = next(iter(judged.items()))
    item = row["decisions"][0]["item_id"]
    line = {
        "case_id": case_id,
        "item_id": item,
        "binary_labels": [True],
        "anonymized_physician_ids": [None],
    }
    path = tmp_path / "meta.jsonl"
    path.write_text(json.dumps(line) + "\n")
    proc = run_cli("calibrate", "ans-model", "--labels", str(path), *jobs)
    assert_one_line_error(proc, f"{path}: line 1", "'anonymized_physician_ids'")
    assert "completed_by" not in proc.stderr


def test_a_sheet_with_a_very_long_answer_reads_back(batch_emulator, tmp_path, fixture_dir):
    """#45.11: the sheet writes an answer whole; one of 131,073 characters (past the csv
    module's default cell limit) is read back, not refused as 'not CSV'."""
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    note, rows = sheet(jobs, tmp_path / "s.csv", cases=10)
    labelled = label(rows, judged, ["dr_a"], 0.2)
    labelled[0]["answer"] = "x" * 131_073
    path = tmp_path / "long.csv"
    with path.open("w", newline="") as fh:
        fh.write(note + "\n")
        writer = csv.DictWriter(fh, fieldnames=list(labelled[0]))
        writer.writeheader()
        writer.writerows(labelled)
    verdicts = {(r["case_id"], r["item_id"], r["rater"]): r["verdict"] for r in labelled}
    assert _figures(jobs, path) == _figures(jobs, _as_sheet(tmp_path / "plain.csv", verdicts))


def test_several_label_files_after_one_labels(batch_emulator, tmp_path, fixture_dir):
    """#47.3: the README's `--labels export.csv dictionary.csv` for calibrate and report
    (one run before it): both files read, as with --labels given twice."""
    jobs, judged = graded(batch_emulator, tmp_path, fixture_dir)
    path, fields = _dictionary(jobs, tmp_path)
    _, rows = sheet(jobs, tmp_path / "s.csv", cases=10)
    labelled = label(rows, judged, ["dr_a"], 0.3)
    records: dict[tuple[str, str], dict[str, str]] = {}
    for r in labelled:
        records.setdefault((r["case_id"], r["rater"]), {})[r["item_id"]] = r["verdict"]
    export = tmp_path / "export.csv"
    _export(export, fields, records, labels=False)
    twice = _figures(jobs, export, path)
    proc = run_cli("calibrate", "ans-model", "--labels", str(export), str(path), "--json", *jobs)
    assert proc.returncode == 0, proc.stderr
    assert tool_neutral(json.loads(proc.stdout)) == twice
    page = run_cli(
        "report",
        "ans-model",
        "--labels",
        str(export),
        str(path),
        "-o",
        str(tmp_path / "r.html"),
        *jobs,
    )
    assert page.returncode == 0, page.stderr
    assert "PPI" in (tmp_path / "r.html").read_text()


def test_a_labels_file_told_the_wrong_format_or_in_the_wrong_shape_is_said_as_what_it_is(
    batch_emulator, tmp_path, fixture_dir
):
    """#61.11: batchbench's own sheet given with `--labels-format label-studio` was read as
    a Label Studio CSV missing its cells; a .jsonl whose first line is a list was "not
    Label Studio's JSON". Each is said as what it is, in one line naming the file."""
    from support.cli import assert_one_line_error, run_cli
    from support.runs import env, run_args

    made = run_cli(*run_args(batch_emulator, tmp_path, fixture_dir, "--limit", "2"), env=env())
    assert made.returncode == 0, made.stderr
    jobs = ["--jobs-dir", str(tmp_path / "jobs")]
    sheet = tmp_path / "sheet.csv"
    made = run_cli("calibrate", "sheet", "ans-model", *jobs, "--cases", "2", "-o", str(sheet))
    assert made.returncode == 0, made.stderr
    told = run_cli(
        "calibrate", "ans-model", *jobs, "--labels", str(sheet), "--labels-format", "label-studio"
    )
    assert_one_line_error(told, str(sheet), "batchbench's labelling sheet", "--labels-format sheet")
    listed = tmp_path / "lists.jsonl"
    listed.write_text('[{"case_id": "x"}]\n[{"case_id": "y"}]\n')
    proc = run_cli("calibrate", "ans-model", *jobs, "--labels", str(listed))
    assert_one_line_error(proc, str(listed), "line 1 is a JSON list", "one object a line")
