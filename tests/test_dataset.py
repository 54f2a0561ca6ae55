"""Loading a BedsideBench checkout: order, digest, selection and every validation error."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support.cli import assert_one_line_error, run_cli

from batchbench.bench.dataset import load_dataset, select_cases
from batchbench.errors import ConfigError


def test_digest_equals_the_reference(golden_set):
    digest = (golden_set.golden_dir / "dataset_sha256.txt").read_text().strip()
    assert golden_set.dataset.sha256 == digest
    case_files = list(golden_set.dataset_dir.glob("data/*/cases/*.json"))
    assert len(golden_set.dataset.cases) == len(case_files)


def test_registry_order(golden_set):
    dataset, dataset_dir = golden_set.dataset, golden_set.dataset_dir
    registry = json.loads((dataset_dir / "registry.json").read_text())
    expected = []
    for panel in registry["panels"]:
        manifest = json.loads((dataset_dir / panel["path"] / "manifest.json").read_text())
        expected += manifest["case_ids"]
    assert [c["case_id"] for c in dataset.cases] == expected


def test_selection(dataset):
    smoke = select_cases(dataset, smoke=True)
    assert [c["benchmark"] for c in smoke] == list(dataset.benchmarks)
    firsts = {}
    for c in dataset.cases:
        firsts.setdefault(c["benchmark"], c["case_id"])
    assert [c["case_id"] for c in smoke] == list(firsts.values())
    assert select_cases(dataset, smoke=True, limit=3) == smoke[:3]
    assert select_cases(dataset, limit=7) == list(dataset.cases[:7])
    only = select_cases(dataset, benchmarks=["health_equity", "drug_safety"])
    assert {c["benchmark"] for c in only} == {"health_equity", "drug_safety"}
    assert len(only) == 50
    with pytest.raises(ConfigError, match="--limit must be at least 1"):
        select_cases(dataset, limit=0)
    with pytest.raises(ConfigError, match="unknown benchmark 'nope'"):
        select_cases(dataset, benchmarks=["nope"])


def test_unlisted_test_split_files_follow_the_manifest(sample_copy):
    folder = sample_copy / "data" / "drug_safety" / "cases"
    template = json.loads(next(folder.glob("*.json")).read_text())
    for name, split in (("zz_test", "test"), ("aa_test", "test"), ("mm_train", "train")):
        case = dict(template, case_id=name, split=split, prompt=f"prompt {name}")
        digest = hashlib.md5(case["prompt"].encode()).hexdigest()
        case["rubric_items"] = [
            dict(it, item_id=f"{digest}_{i}") for i, it in enumerate(template["rubric_items"])
        ]
        (folder / f"{name}.json").write_text(json.dumps(case))
    ds = load_dataset(sample_copy)
    ids = [c["case_id"] for c in ds.cases if c["benchmark"] == "drug_safety"]
    assert ids[-2:] == ["aa_test", "zz_test"] and "mm_train" not in ids


def _first_case(root: Path, panel: str = "drug_safety") -> Path:
    manifest = json.loads((root / "data" / panel / "manifest.json").read_text())
    return root / "data" / panel / "cases" / f"{manifest['case_ids'][0]}.json"


def _edit_case(root: Path, fn, panel: str = "drug_safety") -> Path:
    path = _first_case(root, panel)
    case = json.loads(path.read_text())
    fn(case)
    path.write_text(json.dumps(case))
    return path


def _set(key, value):
    def fn(case):
        case[key] = value

    return fn


def _item(i, key, value):
    def fn(case):
        case["rubric_items"][i][key] = value

    return fn


def _break_json(root):
    _first_case(root).write_text('{"case_id": ')
    return _first_case(root).name, "invalid JSON"


def _missing_field(root):
    path = _edit_case(root, lambda c: c.pop("prompt"))
    return path.name, "missing field 'prompt'"


def _wrong_type(root):
    path = _edit_case(root, _set("rubric_items", "none"))
    return path.name, "'rubric_items' must be a non-empty list"


def _unknown_method(root):
    path = _edit_case(root, _set("grading_method", "vibes"))
    return path.name, "unknown grading method 'vibes'"


def _bad_item_id(root):
    path = _edit_case(root, _item(1, "item_id", "abc_1"))
    return path.name, "rubric_items[1].item_id"


def _duplicate_case_id(root):
    manifest = json.loads((root / "data" / "drug_safety" / "manifest.json").read_text())
    other = root / "data" / "guideline_adherence" / "cases"
    src = json.loads(_first_case(root).read_text())
    src["benchmark"] = "guideline_adherence"
    (other / f"{manifest['case_ids'][0]}.json").write_text(json.dumps(src))
    gm = json.loads((root / "data" / "guideline_adherence" / "manifest.json").read_text())
    gm["case_ids"].append(manifest["case_ids"][0])
    (root / "data" / "guideline_adherence" / "manifest.json").write_text(json.dumps(gm))
    return manifest["case_ids"][0], "duplicate case id"


def _duplicate_item_id(root):
    """Two cases with one prompt share md5(prompt)_i item ids across the dataset."""
    src = json.loads(_first_case(root).read_text())
    target = _first_case(root, "guideline_adherence")
    case = json.loads(target.read_text())
    case["prompt"] = src["prompt"]
    case["rubric_items"] = [
        dict(it, item_id=src["rubric_items"][0]["item_id"].rsplit("_", 1)[0] + f"_{i}")
        for i, it in enumerate(case["rubric_items"])
    ]
    target.write_text(json.dumps(case))
    return target.name, "duplicate item id"


def _non_numeric_points(root):
    path = _edit_case(root, _item(0, "points", "two"))
    return path.name, "rubric_items[0].points: must be a number, got 'two'"


def _boolean_points(root):
    path = _edit_case(root, _item(0, "points", True))
    return path.name, "rubric_items[0].points: must be a number"


def _f1_points_out_of_range(root):
    path = _edit_case(root, _item(0, "points", 5), panel="safety_diagnostic")
    return path.name, "outside -3..3"


def _no_positive_points(root):
    def fn(case):
        for item in case["rubric_items"]:
            item["points"] = -1

    path = _edit_case(root, fn)
    return path.name, "needs positive points"


def _manifest_lists_missing_file(root):
    path = _first_case(root)
    path.unlink()
    return "manifest.json", f"{path.name} is missing"


def _panel_folder_missing(root):
    import shutil

    shutil.rmtree(root / "data" / "landmark_trials")
    return "registry.json", "panel folder 'data/landmark_trials' is missing"


def _registry_unreadable(root):
    (root / "registry.json").write_text("[1, 2")
    return "registry.json", "invalid JSON"


def _case_id_not_file_name(root):
    path = _edit_case(root, _set("case_id", "other"))
    return path.name, "does not match the file name"


def _benchmark_not_panel(root):
    path = _edit_case(root, _set("benchmark", "landmark_trials"))
    return path.name, "is not the panel id"


def _case_not_object(root):
    _first_case(root).write_text("[]")
    return _first_case(root).name, "expected a JSON object"


def _empty_item_text(root):
    path = _edit_case(root, _item(0, "text", ""))
    return path.name, "rubric_items[0].text"


def _nested_too_deeply(root):
    path = _first_case(root)
    path.write_text('{"case_id": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return path.name, "JSON nested too deeply"


def _huge_integer(root):
    path = _first_case(root)
    text = path.read_text()
    path.write_text(text.replace('"points": ', '"points": 1' + "0" * 5000 + ', "x": ', 1))
    return path.name, "unreadable JSON"


def _panel_path_leaves_the_dataset(root):
    registry = json.loads((root / "registry.json").read_text())
    registry["panels"][0]["path"] = "../../.."
    (root / "registry.json").write_text(json.dumps(registry))
    return "registry.json", "'../../..' leaves the dataset folder"


BREAKERS = [
    _nested_too_deeply,
    _huge_integer,
    _panel_path_leaves_the_dataset,
    _break_json,
    _missing_field,
    _wrong_type,
    _unknown_method,
    _bad_item_id,
    _duplicate_case_id,
    _duplicate_item_id,
    _non_numeric_points,
    _boolean_points,
    _f1_points_out_of_range,
    _no_positive_points,
    _manifest_lists_missing_file,
    _panel_folder_missing,
    _registry_unreadable,
    _case_id_not_file_name,
    _benchmark_not_panel,
    _case_not_object,
    _empty_item_text,
]


@pytest.mark.parametrize("breaker", BREAKERS, ids=lambda f: f.__name__.strip("_"))
def test_validation_errors_name_file_and_field(sample_copy, breaker):
    culprit, message = breaker(sample_copy)
    proc = run_cli("validate", "--dataset", str(sample_copy))
    assert proc.returncode == 2
    assert_one_line_error(proc, culprit, message)


def test_valid_sample_validates():
    proc = run_cli("validate")
    assert proc.returncode == 0, proc.stderr
    assert "12 cases in 10 benchmarks" in proc.stdout


def test_missing_dataset_directory(tmp_path):
    proc = run_cli("validate", "--dataset", str(tmp_path / "nowhere"))
    assert_one_line_error(proc, "nowhere", "not found")


def test_an_unlistable_case_folder_is_one_line(sample_copy, monkeypatch):
    """A case folder that cannot be listed (permissions: root here reads anything, so the
    refusal is the kernel's error raised in place of the listing) names the folder."""
    import batchbench.bench.dataset as dataset_module

    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(dataset_module.os, "scandir", refuse)
    proc = run_cli("validate", "--dataset", str(sample_copy))
    assert_one_line_error(proc, "cases", "cannot list: Permission denied")
    assert proc.returncode != 0
