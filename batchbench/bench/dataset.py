"""Load and validate a BedsideBench checkout, in the reference runner's order.

The order of cases and the digest are part of the protocol: the digest is what
lets a published number be tied to the exact cases it was computed on, so the
loader keeps every case object exactly as read and hashes all of them.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import msgspec

from ..errors import ConfigError, DatasetError

GRADING_METHODS = ("points_rubric", "f1_weighted_rubric")
_REQUIRED_STR = ("case_id", "benchmark", "grading_method", "prompt", "split")


class RubricItem(TypedDict):
    item_id: str
    text: str
    points: float  # signed; an int in the JSON stays an int (it is hashed and echoed as read)


class Case(TypedDict):
    """A validated case, exactly as read (other fields the file holds are kept too)."""

    case_id: str
    benchmark: str
    grading_method: str
    prompt: str
    rubric_items: list[RubricItem]
    split: str


@dataclass(frozen=True)
class Dataset:
    """All loaded cases in registry order, plus the digest over all of them."""

    root: Path
    cases: tuple[Case, ...]
    benchmarks: tuple[str, ...]
    sha256: str

    def by_id(self) -> dict[str, Case]:
        return {c["case_id"]: c for c in self.cases}


def _read_json(path: Path, root: Path) -> Any:
    """A file's JSON: msgspec's fast decoder (2.5 × json's on 25,000 case files), and on
    anything it refuses json's own reading, which either takes it (NaN, say) or names
    the problem as json does."""
    try:
        return _FAST.decode(path.read_bytes())
    except (OSError, msgspec.DecodeError, RecursionError):
        pass
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DatasetError(f"{_rel(path, root)}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{_rel(path, root)}: cannot read: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{_rel(path, root)}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise DatasetError(f"{_rel(path, root)}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of thousands of digits
        raise DatasetError(f"{_rel(path, root)}: unreadable JSON ({exc})") from None


_FAST = msgspec.json.Decoder()


def _rel(path: Path, root: Path) -> str:
    """The path as the user gave it (root-relative parts kept), so errors name the file."""
    return str(path)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_case(case: Any, where: str) -> Case:
    """Raise DatasetError naming ``where`` and the field when ``case`` is invalid."""
    if not isinstance(case, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(case).__name__}")
    for field in (*_REQUIRED_STR, "rubric_items"):
        if field not in case:
            raise DatasetError(f"{where}: missing field '{field}'")
    for field in _REQUIRED_STR:
        if not isinstance(case[field], str) or not case[field]:
            raise DatasetError(f"{where}: field '{field}' must be a non-empty string")
    method = case["grading_method"]
    if method not in GRADING_METHODS:
        raise DatasetError(
            f"{where}: field 'grading_method': unknown grading method {method!r}"
            f" (expected one of {', '.join(GRADING_METHODS)})"
        )
    items = case["rubric_items"]
    if not isinstance(items, list) or not items:
        raise DatasetError(f"{where}: field 'rubric_items' must be a non-empty list")
    digest = hashlib.md5(case["prompt"].encode("utf-8")).hexdigest()
    seen: set[str] = set()
    for i, item in enumerate(items):
        at = f"{where}: rubric_items[{i}]"
        if not isinstance(item, dict):
            raise DatasetError(f"{at}: expected a JSON object")
        for field in ("item_id", "text", "points"):
            if field not in item:
                raise DatasetError(f"{at}: missing field '{field}'")
        if not isinstance(item["text"], str) or not item["text"]:
            raise DatasetError(f"{at}.text: must be a non-empty string")
        item_id = item["item_id"]
        if not isinstance(item_id, str):
            raise DatasetError(f"{at}.item_id: must be a string")
        if item_id != f"{digest}_{i}":
            raise DatasetError(
                f"{at}.item_id: {item_id!r} is not md5(prompt)_index ({digest}_{i!s})"
            )
        if item_id in seen:
            raise DatasetError(f"{at}.item_id: duplicate item id {item_id!r}")
        seen.add(item_id)
        points = item["points"]
        if not _is_number(points):
            raise DatasetError(f"{at}.points: must be a number, got {points!r}")
        if method == "f1_weighted_rubric" and not -3 <= points <= 3:
            raise DatasetError(f"{at}.points: {points!r} is outside -3..3 for f1_weighted_rubric")
    if method == "points_rubric" and not any(it["points"] > 0 for it in items):
        raise DatasetError(f"{where}: field 'rubric_items': a points rubric needs positive points")
    return cast(Case, case)


def load_dataset(root: str | Path) -> Dataset:
    """Load every case of a checkout in registry order and compute its digest."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: dataset directory not found")
    registry_path = root / "registry.json"
    registry = _read_json(registry_path, root)
    panels = registry.get("panels") if isinstance(registry, dict) else None
    if not isinstance(panels, list) or not panels:
        raise DatasetError(f"{_rel(registry_path, root)}: field 'panels' must be a non-empty list")

    cases: list[Case] = []
    benchmarks: list[str] = []
    case_ids: dict[str, str] = {}
    item_ids: dict[str, str] = {}
    for p, panel in enumerate(panels):
        at = f"{_rel(registry_path, root)}: panels[{p}]"
        if not isinstance(panel, dict):
            raise DatasetError(f"{at}: expected a JSON object")
        for field in ("id", "grading_method", "path"):
            if not isinstance(panel.get(field), str) or not panel.get(field):
                raise DatasetError(f"{at}: field '{field}' must be a non-empty string")
        if panel["grading_method"] not in GRADING_METHODS:
            raise DatasetError(
                f"{at}.grading_method: unknown grading method {panel['grading_method']!r}"
            )
        folder = root / panel["path"]
        if not folder.resolve().is_relative_to(root.resolve()):
            raise DatasetError(f"{at}.path: {panel['path']!r} leaves the dataset folder")
        if not folder.is_dir():
            raise DatasetError(f"{at}: panel folder {panel['path']!r} is missing")
        benchmarks.append(panel["id"])
        for where, raw in _panel_cases(folder, root):
            case = validate_case(raw, where)
            if case["benchmark"] != panel["id"]:
                raise DatasetError(
                    f"{where}: field 'benchmark': {case['benchmark']!r} is not the panel"
                    f" id {panel['id']!r}"
                )
            if case["grading_method"] != panel["grading_method"]:
                raise DatasetError(
                    f"{where}: field 'grading_method': {case['grading_method']!r} differs"
                    f" from the panel's {panel['grading_method']!r}"
                )
            if case["case_id"] in case_ids:
                raise DatasetError(
                    f"{where}: field 'case_id': duplicate case id {case['case_id']!r}"
                    f" (also in {case_ids[case['case_id']]})"
                )
            case_ids[case["case_id"]] = where
            for item in case["rubric_items"]:
                if item["item_id"] in item_ids:
                    raise DatasetError(
                        f"{where}: duplicate item id {item['item_id']!r}"
                        f" (also in {item_ids[item['item_id']]})"
                    )
                item_ids[item["item_id"]] = where
            cases.append(case)
    return Dataset(root, tuple(cases), tuple(benchmarks), dataset_sha256(cases))


def _panel_cases(folder: Path, root: Path) -> Iterable[tuple[str, Any]]:
    """Manifest cases in order, then unlisted test-split files sorted by name."""
    manifest_path = folder / "manifest.json"
    manifest = _read_json(manifest_path, root)
    listed = manifest.get("case_ids") if isinstance(manifest, dict) else None
    if not isinstance(listed, list) or not all(isinstance(c, str) for c in listed):
        raise DatasetError(
            f"{_rel(manifest_path, root)}: field 'case_ids' must be a list of strings"
        )
    cases_dir = folder / "cases"
    files = _file_names(cases_dir)  # one listing, not a stat per case
    for case_id in listed:
        path = cases_dir / f"{case_id}.json"
        if path.name not in files:
            raise DatasetError(
                f"{_rel(manifest_path, root)}: lists case {case_id!r} but"
                f" {_rel(path, root)} is missing"
            )
        case = _read_json(path, root)
        if isinstance(case, dict) and case.get("case_id") != case_id:
            raise DatasetError(
                f"{_rel(path, root)}: field 'case_id': {case.get('case_id')!r}"
                " does not match the file name"
            )
        yield _rel(path, root), case
    seen = set(listed)
    extra = sorted(n for n in files if n.endswith(".json") and n[: -len(".json")] not in seen)
    for name in extra:
        path = cases_dir / name
        case = _read_json(path, root)
        if isinstance(case, dict) and case.get("split") == "test":
            yield _rel(path, root), case


def _file_names(folder: Path) -> set[str]:
    """The names of the files in a folder (none if it is not one)."""
    try:
        with os.scandir(folder) as entries:
            return {e.name for e in entries if e.is_file()}
    except (FileNotFoundError, NotADirectoryError):
        return set()
    except OSError as exc:  # unreadable: one line naming it
        raise DatasetError(f"{folder}: cannot list: {exc.strerror or exc}") from None


def dataset_sha256(cases: Sequence[Case]) -> str:
    """The reference digest: compact, key-sorted, non-ASCII kept, over all cases."""
    # The list's JSON, a case at a time (the same bytes: "[" + cases joined by "," + "]"),
    # so no copy of the whole dataset's text is held: at 100,000 cases that copy and its
    # encoding were 700 MB of a run's peak memory.
    digest = hashlib.sha256(b"[")
    for n, case in enumerate(cases):
        text = json.dumps(case, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest.update((b"," if n else b"") + text.encode("utf-8"))
    digest.update(b"]")
    return digest.hexdigest()


def select_cases(
    dataset: Dataset,
    *,
    smoke: bool = False,
    limit: int | None = None,
    benchmarks: Sequence[str] = (),
) -> list[Case]:
    """Benchmark filter, then smoke (first case per benchmark), then the first ``limit``."""
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1, got {limit}")
    unknown = [b for b in benchmarks if b not in dataset.benchmarks]
    if unknown:
        raise ConfigError(
            f"unknown benchmark {unknown[0]!r} (known: {', '.join(dataset.benchmarks)})"
        )
    chosen = [c for c in dataset.cases if not benchmarks or c["benchmark"] in benchmarks]
    if smoke:
        first: dict[str, Case] = {}
        for case in chosen:
            first.setdefault(case["benchmark"], case)
        chosen = list(first.values())
    if limit is not None:
        chosen = chosen[:limit]
    return chosen
