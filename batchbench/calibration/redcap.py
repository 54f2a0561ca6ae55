"""Labels from REDCap: a project's CSV export, one record a case and rater, one column a
rubric item, read into the long table the calibration takes (:mod:`.formats`).

- The record: the export's first column is its record id (``record_id``); a
  ``case_id`` column names the case, else the record id does. The rater is the
  ``rater`` column, else the record's data access group
  (``redcap_data_access_group``); a ``run`` column, when there is one, names the run.
- The items: with the project's data dictionary given beside the export (another
  ``--labels`` file, detected by its ``Variable / Field Name`` header), a field whose
  label starts with ``[ITEM_ID]`` (as the sheet writes each item) is that item's;
  without it, a column named as REDCap would name the item id (lower case, any other
  character ``_``, at most 100) is that item's.
- A verdict is ``1``/``0`` (a yes/no field's raw export), ``Yes``/``No`` (its labels),
  or ``met``/``not met``; empty: not labelled. REDCap's own columns
  (``redcap_event_name``, ``…_complete``…) are not items. A column holding verdicts
  that names no rubric item is refused, as is a value that is no verdict: each in one
  line naming the file, the line and the column.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..errors import InputError
from .csvtext import csv_records

DICTIONARY_HEAD = "Variable / Field Name"
MET = {"1": "1", "0": "0", "yes": "1", "no": "0", "met": "1", "not met": "0", "": ""}
SYSTEM = re.compile(r"^(redcap_.*|.*_complete|case_id|rater|run)$")
LEADING_ID = re.compile(r"^\s*\[([^\]]+)\]")


class RedcapError(InputError):
    """A REDCap export or dictionary that cannot be read as physicians' verdicts."""


def is_dictionary(text: str) -> bool:
    return text.lstrip("\ufeff").startswith(DICTIONARY_HEAD) or text.lstrip().startswith(
        f'"{DICTIONARY_HEAD}"'
    )


def is_export(text: str) -> bool:
    first = text.lstrip("\ufeff").split("\n", 1)[0]
    return first.split(",", 1)[0].strip().strip('"') == "record_id"


def variable(item_id: str) -> str:
    """The name REDCap would give a field for this item id."""
    return re.sub(r"[^a-z0-9_]", "_", item_id.lower())[:100]


def _records(path: Path, text: str) -> list[tuple[int, list[str]]]:
    return [(n, r) for n, r in csv_records(path, text, RedcapError) if any(c.strip() for c in r)]


def dictionary_items(path: Path, text: str) -> dict[str, str]:
    """A data dictionary's fields that are rubric items: variable → item id."""
    records = _records(path, text)
    if not records:
        raise RedcapError(f"{path}: an empty data dictionary")
    header = [h.strip() for h in records[0][1]]
    if "Field Label" not in header:
        raise RedcapError(f"{path}: line 1: a data dictionary needs its 'Field Label' column")
    name_at, label_at = header.index(DICTIONARY_HEAD), header.index("Field Label")
    found: dict[str, str] = {}
    for n, record in records[1:]:
        if len(record) <= max(name_at, label_at):
            raise RedcapError(f"{path}: line {n}: fewer cells than the header")
        match = LEADING_ID.match(record[label_at])
        if match:
            found[record[name_at].strip()] = match.group(1).strip()
    return found


def export_rows(
    path: Path,
    text: str,
    run: str,
    items: Sequence[str],
    dictionary: Mapping[str, str] | None,
) -> Iterator[tuple[str, dict[str, str]]]:
    """The export's verdicts as the long table's rows (``items``: the run's item ids)."""
    records = _records(path, text)
    if not records:
        raise RedcapError(f"{path}: empty")
    header = [h.strip() for h in records[0][1]]
    by_variable: dict[str, str | None] = {}
    for item_id in items:  # two items one variable name: neither is found by it
        name = variable(item_id)
        by_variable[name] = None if name in by_variable else item_id
    column_item: dict[int, str] = {}
    for at, name in enumerate(header[1:], 1):
        if SYSTEM.match(name):
            continue
        found = dictionary.get(name) if dictionary else by_variable.get(name)
        if found is not None:
            column_item[at] = found
    rater_at = next(
        (header.index(c) for c in ("rater", "redcap_data_access_group") if c in header), None
    )
    if rater_at is None:
        raise RedcapError(
            f"{path}: line 1: no rater column ('rater', or the records' data access group"
            " 'redcap_data_access_group')"
        )
    case_at = header.index("case_id") if "case_id" in header else 0
    run_at = header.index("run") if "run" in header else None
    for n, record in records[1:]:
        record = record + [""] * (len(header) - len(record))
        for at, name in enumerate(header):
            if at in column_item or at == 0 or SYSTEM.match(name):
                continue
            if record[at].strip().lower() in ("0", "1") and not _text_field(header, name):
                raise RedcapError(
                    f"{path}: line {n}: column {name!r} holds verdicts but names no rubric"
                    " item (give the project's data dictionary with --labels)"
                )
        for at, item_id in column_item.items():
            value = record[at].strip().lower()
            if value not in MET:
                raise RedcapError(
                    f"{path}: line {n}: column {header[at]!r}: {record[at]!r} is no verdict"
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


def _text_field(header: Sequence[str], name: str) -> bool:
    """A free-text field beside the verdicts (a comment, a note): never a verdict."""
    return bool(re.search(r"(comment|note|notes|text|reason)$", name))
