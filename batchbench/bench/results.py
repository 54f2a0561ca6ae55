"""Reference-format result rows: checking, appending, ordering, reading and naming them.

A row is built from a run's outcomes in :mod:`batchbench.engine.rows`; here are the
rules any results file obeys, whoever wrote it.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from .._io import append_pieces, atomic_write_bytes, jsonl_lines
from ..errors import ResultsError
from . import healthbench
from .dataset import Case
from .decisions import lay_verdicts
from .scoring import rubric_frame, score_joined, score_records


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
    if row.get("benchmark") == healthbench.BENCHMARK and (
        score is None or (isinstance(score, (int, float)) and math.isfinite(score))
    ):  # simple-evals' score: negative items may take it below 0; no positive item, null
        return row
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        raise ResultsError(f"{where}: field 'score' must be a number, got {score!r}")
    if not (
        0 <= score <= 1 if isinstance(score, int) else math.isfinite(score) and 0 <= score <= 1
    ):
        raise ResultsError(f"{where}: field 'score' must be a number from 0 to 1, got {score!r}")
    if not isinstance(row.get("benchmark"), str):
        raise ResultsError(f"{where}: field 'benchmark' must be a string")
    return row


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a results file; a malformed line is an error naming its number."""
    return [row for _, row in read_numbered_rows(path)]


_FAST = msgspec.json.Decoder()
_ENCODE = msgspec.json.Encoder().encode


def read_numbered_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """Every row of a results file with its line number."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"{path}: file not found") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    rows: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in jsonl_lines(data):
        where = f"{path}: line {lineno}"
        try:  # msgspec's decoder, and json's words for what it refuses (or json's taking)
            row = _FAST.decode(line)
        except (msgspec.DecodeError, RecursionError):
            row = None
        try:
            row = json.loads(line) if row is None else row
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{where}: invalid JSON ({exc.msg})") from None
        except UnicodeDecodeError:
            raise ResultsError(f"{where}: not UTF-8 text") from None
        except RecursionError:
            raise ResultsError(f"{where}: JSON nested too deeply") from None
        except ValueError as exc:  # e.g. an integer of thousands of digits
            raise ResultsError(f"{where}: unreadable JSON ({exc})") from None
        rows.append((lineno, _check_row(row, where)))
    return rows


def check_against(
    numbered: Sequence[tuple[int, dict[str, Any]]], path: Path, cases: Mapping[str, Case]
) -> None:
    """Rows that disagree with the dataset are refused, naming file, line and case.

    A row of one of the dataset's cases must carry its benchmark and grading
    method; a scored row that has ``decisions`` must score, from them and the
    case's rubric, exactly what it says (rows without decisions are taken as
    they are). Rows of cases the dataset does not have are left out of the
    summary anyway.
    """
    verdicts: dict[str, list[bool]] = {}  # each rubric item's, in rubric order
    claimed: dict[str, tuple[int, dict[str, Any]]] = {}
    for lineno, row in numbered:
        case = cases.get(row["case_id"])
        if case is None:
            continue
        where = f"{path}: line {lineno}: case {row['case_id']}"
        for key in ("benchmark", "grading_method"):
            if key in row and row[key] != case[key]:
                raise ResultsError(
                    f"{where}: {key} {row[key]!r} is not the dataset's {case[key]!r}"
                )
        if "error" in row or "decisions" not in row:
            continue
        found = row_verdicts(row["decisions"])
        items = [it["item_id"] for it in case["rubric_items"]]
        if found is None or found.keys() != set(items):
            raise ResultsError(f"{where}: its decisions do not name the case's rubric items")
        key = f"{row['case_id']}#{lineno}"
        verdicts[key], claimed[key] = [found[i] for i in items], (lineno, row)
    if not verdicts:
        return
    rubric = rubric_frame(
        [{**cases[row["case_id"]], "case_id": key} for key, (_, row) in claimed.items()]
    )
    for key, (score, components) in score_records(
        score_joined(lay_verdicts(verdicts, rubric))
    ).items():
        lineno, row = claimed[key]
        said = [row["score"], row.get("score_components", components)]
        if not _same_json(said, [score, components]):
            raise ResultsError(
                f"{path}: line {lineno}: case {row['case_id']}: score {row['score']!r} is not"
                f" what its decisions score ({score!r})"
            )


def _same_json(a: Any, b: Any) -> bool:
    """``json.dumps(a) == json.dumps(b)`` (1 and 1.0 differ, as -0.0 and 0.0 do), by
    msgspec's encoder where it can tell (2 × faster); it writes NaN and infinity as null,
    so a null on either side is settled by json's own."""
    ea, eb = _ENCODE(a), _ENCODE(b)
    if b"null" not in ea and b"null" not in eb:
        return ea == eb
    return json.dumps(a) == json.dumps(b)


def row_verdicts(decisions: Any) -> dict[str, bool] | None:
    """``item_id → matched`` of a row's decisions, or None if they are malformed."""
    if not isinstance(decisions, list):
        return None
    found: dict[str, bool] = {}
    for d in decisions:
        if not isinstance(d, dict) or not isinstance(d.get("item_id"), str):
            return None
        if not isinstance(d.get("matched"), bool) or d["item_id"] in found:
            return None
        found[d["item_id"]] = d["matched"]
    return found


def dump_row(row: Mapping[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False)


def registry_order(rows: Sequence[dict[str, Any]], case_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Rows in registry order (stably: a redone case's rows keep their order), as a run
    writes them before it summarises them (:func:`order_and_read_for_summary`)."""
    order = {cid: i for i, cid in enumerate(case_ids)}
    return sorted(rows, key=lambda r: order.get(r["case_id"], len(order)))


class _Lean(msgspec.Struct, gc=False):
    """The fields of a row a summary reads (its decisions and answer left unread: at
    100,000 cases they were 560 MB of a run's peak memory)."""

    case_id: Any = msgspec.UNSET
    benchmark: Any = msgspec.UNSET
    score: Any = msgspec.UNSET
    error: Any = msgspec.UNSET
    answer_model: Any = msgspec.UNSET
    judge_model: Any = msgspec.UNSET
    answer_temperature: Any = msgspec.UNSET
    judge_temperature: Any = msgspec.UNSET
    started_at: Any = msgspec.UNSET
    finished_at: Any = msgspec.UNSET


_LEAN = msgspec.json.Decoder(_Lean)


def order_and_read_for_summary(path: Path, case_ids: Sequence[str]) -> list[dict[str, Any]]:
    """A run's rows put in registry order on disk (stably, atomically: the lines moved as
    they are), and each row's summary fields, checked as rows are.

    Rows arrive in whatever order batches finish, but the bootstrap draws cases by
    position, so the order changes the intervals. The reference runner (one worker)
    writes rows in registry order; so do we, which also makes an interrupted run's
    numbers equal an uninterrupted one's. A redone case's rows keep their order among
    themselves: its last row is the one that counts. A line msgspec refuses is read in
    full, so its error (or json's taking of it) is json's.
    """
    order = {cid: i for i, cid in enumerate(case_ids)}
    data = path.read_bytes()
    lines: list[tuple[int, bytes, dict[str, Any]]] = []
    for lineno, line in jsonl_lines(data):
        where = f"{path}: line {lineno}"
        try:
            lean = _LEAN.decode(line)
            row = {
                f: v
                for f in _Lean.__struct_fields__
                if (v := getattr(lean, f)) is not msgspec.UNSET
            }
        except (msgspec.DecodeError, RecursionError):
            row = dict(read_numbered_rows(path)[len(lines)][1])  # json's words for it
        lines.append((lineno, line, _check_row(row, where)))
    ordered = sorted(lines, key=lambda x: order.get(x[2]["case_id"], len(order)))
    if [n for n, _, _ in ordered] != [n for n, _, _ in lines]:
        atomic_write_bytes(path, b"".join(line + b"\n" for _, line, _ in ordered))
    return [row for _, _, row in ordered]


def row_counts(path: Path) -> Counter[str]:
    """Rows per case already in a run's results file."""
    return Counter(r["case_id"] for r in read_rows(path)) if path.exists() else Counter()


def append_rows(path: Path, rows: Sequence[Mapping[str, Any]], case_ids: Sequence[str]) -> None:
    """Append rows (in registry order among themselves), fsynced."""
    append_lines(path, [(r["case_id"], dump_row(r)) for r in rows], case_ids)


def append_lines(path: Path, lines: Sequence[tuple[str, str]], case_ids: Sequence[str]) -> None:
    """Append ``(case_id, line)``s (in registry order among themselves), fsynced; a crash
    tears at most the last line, which :meth:`Run.repair` drops before the rows are
    written again (rows are counted per case on disk, so a crash between pieces leaves
    whole rows that are not written twice)."""
    order = {cid: i for i, cid in enumerate(case_ids)}
    ordered = sorted(lines, key=lambda x: order[x[0]])
    append_pieces(path, _pieces([line for _, line in ordered]), "rows_half_written")


PIECE_LINES = 2048  # lines encoded and written at a time: a few MB, never the whole file


def _pieces(lines: Sequence[str]) -> Iterator[bytes]:
    for at in range(0, len(lines), PIECE_LINES):
        yield "\n".join([*lines[at : at + PIECE_LINES], ""]).encode("utf-8")
