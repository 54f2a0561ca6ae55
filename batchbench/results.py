"""Reference-format result rows: reading, validating and naming result files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .errors import ResultsError


def summary_path(results: str | Path) -> Path:
    """``x.jsonl`` → ``x.summary.json``, the name the reference gives it."""
    results = Path(results)
    if results.suffix == ".jsonl":
        return results.with_suffix(".summary.json")
    return results.with_name(results.name + ".summary.json")


def _check_row(row: Any, where: str) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise ResultsError(f"{where}: expected a JSON object, got {type(row).__name__}")
    if not isinstance(row.get("case_id"), str) or not row["case_id"]:
        raise ResultsError(f"{where}: field 'case_id' must be a non-empty string")
    if "error" in row:
        if not isinstance(row["error"], str):
            raise ResultsError(f"{where}: field 'error' must be a string")
        return row
    if "score" not in row:
        raise ResultsError(f"{where}: row has neither 'score' nor 'error'")
    score = row["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or math.isnan(score):
        raise ResultsError(f"{where}: field 'score' must be a number, got {score!r}")
    if not isinstance(row.get("benchmark"), str):
        raise ResultsError(f"{where}: field 'benchmark' must be a string")
    return row


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a results file; a malformed line is an error naming its number."""
    path = Path(path)
    rows: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{path}: line {lineno}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ResultsError(f"{where}: invalid JSON ({exc.msg})") from None
                rows.append(_check_row(row, where))
    except FileNotFoundError:
        raise ResultsError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise ResultsError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    return rows


def dump_row(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False)
