"""Labels from REDCap: a project's CSV export, one record a case and rater, one field a
rubric item, read into the long table the calibration takes (:mod:`.formats`).

- The project: ``calibrate sheet --format redcap`` writes its data dictionary
  (:func:`write_dictionary`) — a ``case_id`` and a ``rater`` field, each case's prompt
  and answer shown only on its records (branching logic), and a yes/no field per
  rubric item (``item_1``, ``item_2``… : REDCap names match ``^[a-z][a-z0-9_]*$``, which
  the item ids, starting with a digit, cannot) whose label starts with ``[ITEM_ID]``.
- The dictionary is given beside the export (another ``--labels`` file), as REDCap's
  UI downloads it (``Variable / Field Name``, ``Field Label``…) or its API exports it
  (``field_name``, ``field_label``…); rich-text labels are read as their text. A field
  whose label starts with ``[ITEM_ID]`` is that item's.
- The export: its header holds the fields' names (a raw export) or their labels
  (``rawOrLabelHeaders=label``: ``Record ID``, ``Data Access Group``, ``… Complete?``);
  each is matched to its field through the dictionary (a header that itself starts with
  ``[ITEM_ID]`` names its item without one). The record's case is ``case_id`` (else
  its record id), its rater ``rater`` (else its data access group), its run ``run``
  when there is one.
- A verdict is ``1``/``0`` (a yes/no field's raw export), ``Yes``/``No`` (its labels),
  or ``met``/``not met``; empty: not labelled. A column holding verdicts that names no
  rubric item, a value that is no verdict, a record cut short: each refused in one
  line naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._io import atomic_write_text
from ..errors import LabelsError
from .csvtext import csv_records

# A data dictionary's columns, as REDCap's UI writes them and as its API exports them.
NAME_HEADS = ("Variable / Field Name", "field_name")
LABEL_HEADS = ("Field Label", "field_label")
MET = {"1": "1", "0": "0", "yes": "1", "no": "0", "met": "1", "not met": "0", "": ""}
SYSTEM = re.compile(r"^(redcap_.*|.*_complete|case_id|rater|run)$")
LEADING_ID = re.compile(r"^\s*\[([^\]]+)\]")
# REDCap's own columns as a labels export heads them.
SYSTEM_LABELS = {
    "event name": "redcap_event_name",
    "repeat instrument": "redcap_repeat_instrument",
    "repeat instance": "redcap_repeat_instance",
    "data access group": "redcap_data_access_group",
    "survey identifier": "redcap_survey_identifier",
    "case id": "case_id",  # the fields the dictionary batchbench writes, by their labels
    "rater": "rater",
    "run": "run",
}
_TAG = re.compile(r"<[^>]*>")


def plain(label: str) -> str:
    """A field label as text: a rich-text label's tags dropped, entities read."""
    return " ".join(html.unescape(_TAG.sub(" ", label)).split())


@dataclass
class Dictionary:
    """A project's fields in order: name → plain label, and which are rubric items."""

    labels: dict[str, str] = field(default_factory=dict)
    items: dict[str, str] = field(default_factory=dict)  # field name → item id

    @property
    def record_id(self) -> str | None:
        return next(iter(self.labels), None)

    def field_of(self, header: str) -> str | None:
        """The field a header cell heads: its name, or its label in a labels export."""
        if header in self.labels:
            return header
        text = plain(header)
        for name, label in self.labels.items():
            if label == text:
                return name
        return None

    def merge(self, other: Dictionary) -> None:
        self.labels |= other.labels
        self.items |= other.items


def _head(text: str) -> str:
    return text.lstrip("\ufeff").split("\n", 1)[0].split(",", 1)[0].strip().strip('"')


def is_dictionary(text: str) -> bool:
    return _head(text) in NAME_HEADS


def is_export(text: str) -> bool:
    """A REDCap export with its record id first, by name or by REDCap's default label."""
    return _head(text) in ("record_id", "Record ID")


def variable(item_id: str) -> str:
    """The name a field named after this item id would have (REDCap's characters)."""
    return re.sub(r"[^a-z0-9_]", "_", item_id.lower())[:100]


def _records(path: Path, text: str) -> list[tuple[int, list[str]]]:
    return [(n, r) for n, r in csv_records(path, text, LabelsError) if any(c.strip() for c in r)]


def read_dictionary(path: Path, text: str) -> Dictionary:
    """A data dictionary (the UI's or the API's columns): every field, and those that are
    rubric items (their label starts with ``[ITEM_ID]``)."""
    records = _records(path, text)
    if not records:
        raise LabelsError(f"{path}: an empty data dictionary")
    header = [h.strip() for h in records[0][1]]
    name_at = next((header.index(h) for h in NAME_HEADS if h in header), None)
    label_at = next((header.index(h) for h in LABEL_HEADS if h in header), None)
    if name_at is None or label_at is None:
        raise LabelsError(
            f"{path}: line 1: a data dictionary needs its field name and label columns"
            f" ({' or '.join(NAME_HEADS)}; {' or '.join(LABEL_HEADS)})"
        )
    found = Dictionary()
    for n, record in records[1:]:
        if len(record) <= max(name_at, label_at):
            raise LabelsError(f"{path}: line {n}: fewer cells than the header (cut short?)")
        name, label = record[name_at].strip(), plain(record[label_at])
        found.labels[name] = label
        match = LEADING_ID.match(label)
        if match:
            found.items[name] = match.group(1).strip()
    return found


def _fields(header: Sequence[str], dictionary: Dictionary | None) -> list[str | None]:
    """Each header cell's field name (None: neither a field of the dictionary nor one of
    REDCap's own columns); a labels export's ``… Complete?`` is its form's status."""
    out: list[str | None] = []
    for cell in header:
        text = plain(cell)
        name: str | None = dictionary.field_of(cell) if dictionary else None
        if name is None:
            if text.lower() in SYSTEM_LABELS:
                name = SYSTEM_LABELS[text.lower()]
            elif text.endswith("Complete?"):
                name = "form_complete"
            elif dictionary is None or SYSTEM.match(text):
                name = text
        out.append(name)
    return out


def export_rows(
    path: Path,
    text: str,
    run: str,
    items: Sequence[str],
    dictionary: Dictionary | None,
) -> Iterator[tuple[str, dict[str, str]]]:
    """The export's verdicts as the long table's rows (``items``: the run's item ids)."""
    records = _records(path, text)
    if not records:
        raise LabelsError(f"{path}: empty")
    header = [h.strip() for h in records[0][1]]
    names = _fields(header, dictionary)
    by_variable: dict[str, str | None] = {}
    for item_id in items:  # two items one variable name: neither is found by it
        var = variable(item_id)
        by_variable[var] = None if var in by_variable else item_id
    column_item: dict[int, str] = {}
    for at, heads in enumerate(names[1:], 1):
        leading = LEADING_ID.match(plain(header[at]))
        if heads is not None and dictionary and heads in dictionary.items:
            column_item[at] = dictionary.items[heads]
        elif leading:  # a labels export heads an item's column with its label
            column_item[at] = leading.group(1).strip()
        elif heads is not None and not dictionary and not SYSTEM.match(heads):
            found = by_variable.get(heads)
            if found is not None:
                column_item[at] = found

    def column(name: str) -> int | None:
        return names.index(name) if name in names else None

    rater_at = column("rater")
    if rater_at is None:
        rater_at = column("redcap_data_access_group")
    if rater_at is None:
        hint = "" if dictionary else "; a labels export needs the project's data dictionary"
        raise LabelsError(
            f"{path}: line 1: no rater column ('rater', or the records' data access group"
            f" 'redcap_data_access_group'){hint}"
        )
    case_at, run_at = column("case_id") or 0, column("run")
    for n, record in records[1:]:
        if len(record) < len(header):
            raise LabelsError(
                f"{path}: line {n}: {len(record)} cells where the header has {len(header)}:"
                " the record is cut short (export it again)"
            )
        for col, heads in enumerate(names):
            if col in column_item or col == 0 or (heads is not None and SYSTEM.match(heads)):
                continue
            if record[col].strip().lower() in ("0", "1", "yes", "no") and not _text_field(
                header[col]
            ):
                raise LabelsError(
                    f"{path}: line {n}: column {header[col]!r} holds verdicts but names no"
                    " rubric item (give the project's data dictionary with --labels)"
                )
        for col, item_id in column_item.items():
            value = record[col].strip().lower()
            if value not in MET:
                raise LabelsError(
                    f"{path}: line {n}: column {header[col]!r}: {record[col]!r} is no verdict"
                    " (1/0, Yes/No)"
                )
            yield (
                f"{path}: line {n}",
                {
                    "run": record[run_at].strip() if run_at is not None else run,
                    "case_id": record[case_at].strip(),
                    "item_id": item_id,
                    "rater": record[rater_at].strip(),
                    "verdict": MET[value],
                },
            )


def _text_field(name: str) -> bool:
    """A free-text field beside the verdicts (a comment, a note): never a verdict."""
    return bool(re.search(r"(comment|note|notes|text|reason)$", name.lower()))


DICTIONARY_COLUMNS = (
    "Variable / Field Name",
    "Form Name",
    "Section Header",
    "Field Type",
    "Field Label",
    "Choices, Calculations, OR Slider Labels",
    "Field Note",
    "Text Validation Type OR Show Slider Number",
    "Text Validation Min",
    "Text Validation Max",
    "Identifier?",
    "Branching Logic (Show field only if...)",
    "Required Field?",
    "Custom Alignment",
    "Question Number (surveys only)",
    "Matrix Group Name",
    "Matrix Ranking?",
    "Field Annotation",
)


def write_dictionary(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """The sheet as a REDCap project's data dictionary (one instrument, ``verdicts``): a
    record is one case and rater; each case's prompt and answer, and its rubric items as
    yes/no fields labelled ``[ITEM_ID] text (points)``, show only on its records."""

    def entry(name: str, kind: str, label: str, logic: str = "", note: str = "") -> list[str]:
        cells = dict.fromkeys(DICTIONARY_COLUMNS, "")
        cells |= {
            "Variable / Field Name": name,
            "Form Name": "verdicts",
            "Field Type": kind,
            "Field Label": label,
            "Field Note": note,
            "Branching Logic (Show field only if...)": logic,
        }
        return list(cells.values())

    lines = [
        list(DICTIONARY_COLUMNS),
        entry("record_id", "text", "Record ID"),
        entry("run", "text", "Run", note="the run whose answer is shown"),
        entry("case_id", "text", "Case ID", note="as batchbench's sheet names it"),
        entry("rater", "text", "Rater", note="your name or initials"),
    ]
    cases: dict[tuple[str, str], int] = {}
    for n, row in enumerate(rows, 1):
        key = (str(row["run"]), str(row["case_id"]))
        logic = f"[run] = '{key[0]}' and [case_id] = '{key[1]}'"
        if key not in cases:
            cases[key] = len(cases) + 1
            shown = f"<b>Prompt</b><br>{html.escape(str(row['prompt']))}<br><br><b>Answer</b>"
            shown += f"<br>{html.escape(str(row['answer']))}"
            lines.append(entry(f"case_{cases[key]}", "descriptive", shown, logic))
        n += 1
        label = f"[{row['item_id']}] {row['item']} ({row['points']} points)"
        note = (
            "met on a negative-points item: the harm happened" if float(row["points"]) < 0 else ""
        )
        lines.append(entry(f"item_{n}", "yesno", label, logic, note))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(lines)
    atomic_write_text(path, out.getvalue(), mode=0o644)
