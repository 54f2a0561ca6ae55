"""A graded run of the fixture dataset, its labelling sheet, and made-up physicians'
verdicts on it (the judge's own, some flipped by a rule written here)."""

from __future__ import annotations

import csv
import hashlib
import io
import json

from .cli import run_cli
from .runs import run_args


def flip(rater: str, case_id: str, item_id: str, rate: float) -> bool:
    digest = hashlib.sha256(f"{rater}|{case_id}|{item_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def graded(batch_emulator, tmp_path, fixture_dir):
    argv = run_args(batch_emulator, tmp_path, fixture_dir)
    proc = run_cli(*argv, env={"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""})
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in (tmp_path / "jobs" / "ans-model" / "results.jsonl").open()]
    return ["--jobs-dir", str(tmp_path / "jobs")], {r["case_id"]: r for r in rows}


def sheet(jobs, path, cases=30, seed=5):
    proc = run_cli(
        "calibrate",
        "sheet",
        "ans-model",
        "--cases",
        str(cases),
        "--seed",
        str(seed),
        "-o",
        str(path),
        *jobs,
    )
    assert proc.returncode == 0, proc.stderr
    return sheet_rows(path)


def sheet_rows(path):
    """A sheet's note and rows, read as a CSV reader reads the file: the header on the
    first row, the note (one cell) last (#63.9)."""
    records = list(csv.reader(io.StringIO(path.read_text(), newline="")))
    header, *body, [note] = records
    assert note.startswith("# ") and "," in note and header[0] == "run", records[:1]
    return note, [dict(zip(header, r)) for r in body]


def label(rows, judged, raters, rate):
    """Each rater's verdict: the judge's, flipped where the rule says (a biased judge:
    it says met where the physicians mostly do not, at ``rate``)."""
    out = []
    for rater in raters:
        for row in rows:
            verdicts = {d["item_id"]: d["matched"] for d in judged[row["case_id"]]["decisions"]}
            met = verdicts[row["item_id"]]
            if met and flip(rater, row["case_id"], row["item_id"], rate):
                met = False
            out.append({**row, "rater": rater, "verdict": "1" if met else "0"})
    return out


def write_sheet(path, note, rows):
    with path.open("w", newline="") as fh:  # as the sheet was: the note last
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerow([note])


def grown(fixture_dir, root, per):
    """The fixture dataset with every benchmark grown to ``per`` cases (copies of its own
    cases under new ids, prompts and item ids), for calibrations on 20+ labelled cases."""
    import hashlib as _hashlib
    import shutil

    shutil.copytree(fixture_dir, root)
    registry = json.loads((root / "registry.json").read_text())
    for panel in registry["panels"]:
        folder = root / panel["path"]
        manifest = json.loads((folder / "manifest.json").read_text())
        originals = sorted((folder / "cases").glob("*.json"))
        for k in range(per - len(originals)):
            case = json.loads(originals[k % len(originals)].read_text())
            case["prompt"] += f" (copy {k})"
            case["case_id"] = _hashlib.md5(case["prompt"].encode()).hexdigest()
            for i, item in enumerate(case["rubric_items"]):
                item["item_id"] = f"{case['case_id']}_{i}"
            (folder / "cases" / f"{case['case_id']}.json").write_text(json.dumps(case))
            manifest["case_ids"].append(case["case_id"])
        manifest["case_count"] = panel["n"] = len(manifest["case_ids"])
        (folder / "manifest.json").write_text(json.dumps(manifest))
    (root / "registry.json").write_text(json.dumps(registry))
    return root
