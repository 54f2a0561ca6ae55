"""Reference-format result rows: reading, validating and naming result files."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._io import atomic_write_bytes, jsonl_lines
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
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"{path}: file not found") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    rows: list[dict[str, Any]] = []
    for lineno, line in jsonl_lines(data):
        where = f"{path}: line {lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{where}: invalid JSON ({exc.msg})") from None
        except UnicodeDecodeError:
            raise ResultsError(f"{where}: not UTF-8 text") from None
        rows.append(_check_row(row, where))
    return rows


def dump_row(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False)


def rows_in_registry_order(path: Path, case_ids: Sequence[str]) -> list[dict[str, Any]]:
    """A run's rows, put in registry order on disk (stably, atomically) and returned.

    Rows arrive in whatever order batches finish, but the bootstrap draws cases
    by position, so the order changes the intervals. The reference runner (one
    worker) writes rows in registry order; so do we, which also makes an
    interrupted run's numbers equal an uninterrupted one's. A redone case's rows
    keep their order among themselves: its last row is the one that counts.
    """
    rows = read_rows(path) if path.exists() else []
    order = {cid: i for i, cid in enumerate(case_ids)}
    ordered = sorted(rows, key=lambda r: order.get(r["case_id"], len(order)))
    if ordered != rows:
        atomic_write_bytes(path, "".join(dump_row(r) + "\n" for r in ordered).encode("utf-8"))
    return ordered
