"""The labels formats batchbench reads and writes, each one record: its name, what it
is (the CLI's help is made of these), how its content is recognised (``sniff``), how
its rows are read into the long table (``read``) and, where batchbench writes one for
physicians to fill, how (``write``) — so the next format (Argilla, Doccano) is one
record, as a provider is. One verdict vocabulary (:data:`.formats.MET`) and one error
(:class:`LabelsError`) serve them all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import LabelsError
from . import redcap

if TYPE_CHECKING:
    from ..bench.dataset import Case
from .csvtext import csv_records
from .formats import (
    PRODIGY_KEYS,
    LabelsFormat,
    Row,
    csv_header,
    healthbench_rows,
    label_studio_rows,
    prodigy_rows,
)

REQUIRED = ("run", "case_id", "item_id", "rater", "verdict")


@dataclass(frozen=True)
class Reading:
    """What reading a file needs beyond its text: the run whose verdicts are wanted, its
    cases, and a REDCap data dictionary given beside an export."""

    run: str
    cases: Mapping[str, Case]
    dictionary: redcap.Dictionary | None


@dataclass(frozen=True)
class Sheet:
    """What a sheet to fill is written from: its note, its rows, the judge's verdicts
    (which only a tool that shows them as predictions to correct carries)."""

    note: str
    rows: Sequence[Mapping[str, Any]]
    judged: Mapping[tuple[str, str, str], bool]


@dataclass(frozen=True)
class LabelFormat:
    name: LabelsFormat
    says: str  # what such a file is, for people
    sniff: Callable[[Path, str], bool]
    read: Callable[[Path, str, Reading], Iterator[Row]]
    write: Callable[[Path, Sheet], None] | None = None  # the sheet to fill, in this format


def _first_object(text: str) -> Any:
    import json

    try:
        return json.loads(text.lstrip().split("\n", 1)[0])
    except json.JSONDecodeError:
        return None


def _is_healthbench(path: Path, text: str) -> bool:
    head = text.lstrip()
    return head[:1] == "{" and '"binary_labels"' in head.split("\n", 1)[0]


def _is_prodigy(path: Path, text: str) -> bool:
    if text.lstrip()[:1] != "{" or _is_healthbench(path, text):
        return False
    line = _first_object(text)
    keyed = isinstance(line, dict) and any(k in line for k in PRODIGY_KEYS)
    return keyed or path.suffix.lower() != ".json"


def _is_label_studio(path: Path, text: str) -> bool:
    head = text.lstrip()[:1]
    if head == "[" and path.suffix.lower() == ".jsonl":  # a list per line is no labels file
        raise LabelsError(
            f"{path}: line 1 is a JSON list: a .jsonl labels file (Prodigy's, HealthBench's)"
            " holds one object a line; Label Studio's export is one list in a .json file"
        )
    if head == "[":  # its JSON and JSON_MIN exports are one list
        return True
    if head == "{":  # one task alone, in a .json file
        return not _is_prodigy(path, text) and not _is_healthbench(path, text)
    return {"annotation_id", "annotator"} <= set(csv_header(text))  # its CSV export


def _healthbench(path: Path, text: str, reading: Reading) -> Iterator[Row]:
    rubrics: dict[str, dict[str, str | None]] = {}
    for c, case in reading.cases.items():  # a text two items share names neither (None)
        found: dict[str, str | None] = {}
        for item in case["rubric_items"]:
            text_of = str(item["text"]).strip()
            found[text_of] = None if text_of in found else item["item_id"]
        rubrics[c] = found
    return healthbench_rows(path, text, reading.run, rubrics)


def _redcap(path: Path, text: str, reading: Reading) -> Iterator[Row]:
    items = sorted({i["item_id"] for c in reading.cases.values() for i in c["rubric_items"]})
    return redcap.export_rows(path, text, reading.run, items, reading.dictionary)


def _note(record: list[str]) -> bool:
    """The sheet's note: a first cell starting with "#", every other cell empty."""
    return bool(record) and record[0].startswith("#") and not any(c.strip() for c in record[1:])


def sheet_records(path: Path, text: str, reading: Reading | None = None) -> Iterator[Row]:
    """batchbench's own sheet: CSV records (a quoted cell may hold line breaks, and an
    answer's line may start with "#"), each with the line it starts on, the sheet's
    notes (before the header, or last) skipped."""
    records = csv_records(path, text, LabelsError)
    while records and records[0][1] and records[0][1][0].startswith("#"):
        records.pop(0)  # an older sheet's note, above its header
    while records and _note(records[-1][1]):
        records.pop()  # the sheet's note, after its rows: one cell
    records = [(n, r) for n, r in records if any(cell.strip() for cell in r)]
    if not records:
        raise LabelsError(f"{path}: empty")
    first, head = records[0]
    header = [h.strip() for h in head]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise LabelsError(
            f"{path}: line {first}: no column {', '.join(missing)}: not batchbench's sheet"
            " (a REDCap export starts with its record id: give the project's data"
            " dictionary beside it, or --labels-format to name the format)"
        )
    from .sheet import restored  # numpy stays out of the CLI's import

    for n, r in records[1:]:
        yield f"{path}: line {n}", dict(zip(header, map(restored, r)))


def _write_sheet(path: Path, sheet: Sheet) -> None:
    from .sheet import write_csv

    write_csv(path, sheet.note, sheet.rows)


def _write_label_studio(path: Path, sheet: Sheet) -> None:
    from .formats import write_label_studio

    write_label_studio(path, sheet.rows, sheet.judged)


def _write_redcap(path: Path, sheet: Sheet) -> None:
    redcap.write_dictionary(path, sheet.rows)


# In the order content is told apart: the first whose sniff says yes (the sheet last).
LABEL_FORMATS: tuple[LabelFormat, ...] = (
    LabelFormat(
        "healthbench",
        "HealthBench meta-eval JSONL",
        _is_healthbench,
        _healthbench,
    ),
    LabelFormat(
        "redcap",
        "a REDCap CSV export (its data dictionary beside it)",
        lambda path, text: redcap.is_export(text),
        _redcap,
        _write_redcap,
    ),
    LabelFormat(
        "label-studio",
        "a Label Studio export (JSON, JSON_MIN or CSV)",
        _is_label_studio,
        lambda path, text, reading: label_studio_rows(path, text, reading.run),
        _write_label_studio,
    ),
    LabelFormat(
        "prodigy",
        "Prodigy JSONL",
        _is_prodigy,
        lambda path, text, reading: prodigy_rows(path, text, reading.run),
    ),
    LabelFormat("sheet", "a filled sheet", lambda path, text: True, sheet_records, _write_sheet),
)
BY_NAME: dict[str, LabelFormat] = {f.name: f for f in LABEL_FORMATS}


def detect(path: Path, text: str) -> LabelFormat:
    """The format a labels file is in, by its content (its name only breaks a tie)."""
    return next(f for f in LABEL_FORMATS if f.sniff(path, text))


def formats_help() -> str:
    """``--labels``' words for what it reads, from the records (the sheet first)."""
    said = [f.says for f in (*LABEL_FORMATS[-1:], *LABEL_FORMATS[:-1])]
    return f"{', '.join(said[:-1])} or {said[-1]}"


def names_help() -> str:
    """``--labels-format``'s words: each format's name."""
    names = [f.name for f in (*LABEL_FORMATS[-1:], *LABEL_FORMATS[:-1])]
    return f"{', '.join(names[:-1])} or {names[-1]}"
