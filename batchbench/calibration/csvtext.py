"""CSV records with the line each starts on: the one reading of a labels CSV (the sheet,
a REDCap export or data dictionary), a quoted cell's line breaks kept in its record."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..errors import InputError


def csv_records(
    path: Path, text: str, error: type[InputError] = InputError
) -> list[tuple[int, list[str]]]:
    """Every record of ``text`` with its first line's number; a file that is not CSV is
    ``error`` naming the file and the line."""
    # A cell as long as the text (an answer of any length: the sheet writes them whole),
    # not the csv module's 131,072-character default.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff"), newline=""))
    records: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for record in reader:
            records.append((start, record))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise error(f"{path}: line {start}: not CSV ({exc})") from None
    return records
